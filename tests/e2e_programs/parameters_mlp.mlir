// Weights loaded at run time from a parameter archive (scope "model"): a matmul, a bias and a splat scale.
util.global private @weight = #flow.parameter.named<"model"::"weight"> : tensor<4x4xf32>
util.global private @bias = #flow.parameter.named<"model"::"bias"> : tensor<4xf32>
util.global private @scale = #flow.parameter.named<"model"::"scale"> : tensor<4xf32>
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = util.global.load @weight : tensor<4x4xf32>
  %b = util.global.load @bias : tensor<4xf32>
  %s = util.global.load @scale : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m, %b, %s : tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%a: f32, %c: f32, %k: f32, %o: f32):
    %t = arith.addf %a, %c : f32
    %u = arith.mulf %t, %k : f32
    linalg.yield %u : f32
  } -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
