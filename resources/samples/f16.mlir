// Half precision: fused multiply-add and a widening to f32.
func.func @fma_f16(%a: tensor<8xf16>, %b: tensor<8xf16>, %c: tensor<8xf16>) -> tensor<8xf16> {
  %m = arith.mulf %a, %b : tensor<8xf16>
  %s = arith.addf %m, %c : tensor<8xf16>
  return %s : tensor<8xf16>
}

func.func @widen(%a: tensor<8xf16>) -> tensor<8xf32> {
  %w = arith.extf %a : tensor<8xf16> to tensor<8xf32>
  return %w : tensor<8xf32>
}
