// Softmax over the last dimension of a 4x16 tensor.
func.func @main(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %empty = tensor.empty() : tensor<4x16xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<4x16xf32>) outs(%empty : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
