// A two-layer perceptron with constant weights: relu(x * W1 + b1) * W2 + b2.
func.func @main(%x: tensor<2x16xf32>) -> tensor<2x4xf32> {
  %w1 = arith.constant dense<0.125> : tensor<16x32xf32>
  %b1 = arith.constant dense<[-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, -1.5, 2.0, -2.0, 0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 0.1,
                              0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8]> : tensor<32xf32>
  %w2 = arith.constant dense<-0.0625> : tensor<32x4xf32>
  %b2 = arith.constant dense<[0.5, -0.5, 1.0, -1.0]> : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<2x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x32xf32>) -> tensor<2x32xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<2x16xf32>, tensor<16x32xf32>) outs(%f1 : tensor<2x32xf32>) -> tensor<2x32xf32>
  %hb = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%h, %b1 : tensor<2x32xf32>, tensor<32xf32>) outs(%e1 : tensor<2x32xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %s = arith.addf %v, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<2x32xf32>
  %e2 = tensor.empty() : tensor<2x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %o = linalg.matmul ins(%hb, %w2 : tensor<2x32xf32>, tensor<32x4xf32>) outs(%f2 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %ob = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%o, %b2 : tensor<2x4xf32>, tensor<4xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %bias: f32, %out: f32):
    %s = arith.addf %v, %bias : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %ob : tensor<2x4xf32>
}
