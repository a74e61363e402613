// Twelve matmuls in a chain, in one command buffer (one queue.execute runs them all): x(k+1) = x(k) @ w.
// With w = 0.5 * identity... any w: dispatch k's output is its input times w.
func.func @main(%a: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m0 = linalg.matmul ins(%a, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%m0, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = linalg.matmul ins(%m1, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = linalg.matmul ins(%m2, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m4 = linalg.matmul ins(%m3, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m5 = linalg.matmul ins(%m4, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m6 = linalg.matmul ins(%m5, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m7 = linalg.matmul ins(%m6, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m8 = linalg.matmul ins(%m7, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m9 = linalg.matmul ins(%m8, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m10 = linalg.matmul ins(%m9, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m11 = linalg.matmul ins(%m10, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m11 : tensor<4x4xf32>
}
