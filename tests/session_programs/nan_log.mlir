// Three dispatches; the second takes the log of a difference, NaN where the difference is negative
// (and -Inf where it is zero). The optimization barriers keep the three apart.
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %diff = arith.subf %a, %b : tensor<4x8xf32>
  %d = util.optimization_barrier %diff : tensor<4x8xf32>
  %log = math.log %d : tensor<4x8xf32>
  %l = util.optimization_barrier %log : tensor<4x8xf32>
  %sq = arith.mulf %l, %l : tensor<4x8xf32>
  return %sq : tensor<4x8xf32>
}
