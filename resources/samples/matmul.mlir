// Matrix multiply followed by tanh: 4x8 * 8x16.
func.func @main(%lhs: tensor<4x8xf32>, %rhs: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%lhs, %rhs : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %t = math.tanh %mm : tensor<4x16xf32>
  return %t : tensor<4x16xf32>
}
