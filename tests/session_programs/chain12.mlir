// Twelve dispatches in a chain (each step's optimization barrier keeps them apart): dispatch k adds
// k + 1 to the running value, so every dispatch's output says which one wrote it.
func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant dense<1.0> : tensor<4x8xf32>
  %s0 = arith.addf %a, %c0 : tensor<4x8xf32>
  %b0 = util.optimization_barrier %s0 : tensor<4x8xf32>
  %c1 = arith.constant dense<2.0> : tensor<4x8xf32>
  %s1 = arith.addf %b0, %c1 : tensor<4x8xf32>
  %b1 = util.optimization_barrier %s1 : tensor<4x8xf32>
  %c2 = arith.constant dense<3.0> : tensor<4x8xf32>
  %s2 = arith.addf %b1, %c2 : tensor<4x8xf32>
  %b2 = util.optimization_barrier %s2 : tensor<4x8xf32>
  %c3 = arith.constant dense<4.0> : tensor<4x8xf32>
  %s3 = arith.addf %b2, %c3 : tensor<4x8xf32>
  %b3 = util.optimization_barrier %s3 : tensor<4x8xf32>
  %c4 = arith.constant dense<5.0> : tensor<4x8xf32>
  %s4 = arith.addf %b3, %c4 : tensor<4x8xf32>
  %b4 = util.optimization_barrier %s4 : tensor<4x8xf32>
  %c5 = arith.constant dense<6.0> : tensor<4x8xf32>
  %s5 = arith.addf %b4, %c5 : tensor<4x8xf32>
  %b5 = util.optimization_barrier %s5 : tensor<4x8xf32>
  %c6 = arith.constant dense<7.0> : tensor<4x8xf32>
  %s6 = arith.addf %b5, %c6 : tensor<4x8xf32>
  %b6 = util.optimization_barrier %s6 : tensor<4x8xf32>
  %c7 = arith.constant dense<8.0> : tensor<4x8xf32>
  %s7 = arith.addf %b6, %c7 : tensor<4x8xf32>
  %b7 = util.optimization_barrier %s7 : tensor<4x8xf32>
  %c8 = arith.constant dense<9.0> : tensor<4x8xf32>
  %s8 = arith.addf %b7, %c8 : tensor<4x8xf32>
  %b8 = util.optimization_barrier %s8 : tensor<4x8xf32>
  %c9 = arith.constant dense<10.0> : tensor<4x8xf32>
  %s9 = arith.addf %b8, %c9 : tensor<4x8xf32>
  %b9 = util.optimization_barrier %s9 : tensor<4x8xf32>
  %c10 = arith.constant dense<11.0> : tensor<4x8xf32>
  %s10 = arith.addf %b9, %c10 : tensor<4x8xf32>
  %b10 = util.optimization_barrier %s10 : tensor<4x8xf32>
  %c11 = arith.constant dense<12.0> : tensor<4x8xf32>
  %s11 = arith.addf %b10, %c11 : tensor<4x8xf32>
  %b11 = util.optimization_barrier %s11 : tensor<4x8xf32>
  return %b11 : tensor<4x8xf32>
}
