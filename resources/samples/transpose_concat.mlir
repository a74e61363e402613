// Data movement: transpose, concatenate and slice.
func.func @main(%a: tensor<4x6xf32>, %b: tensor<6x4xf32>) -> tensor<6x6xf32> {
  %e = tensor.empty() : tensor<6x4xf32>
  %t = linalg.transpose ins(%a : tensor<4x6xf32>) outs(%e : tensor<6x4xf32>) permutation = [1, 0]
  %c = tensor.concat dim(1) %t, %b : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x8xf32>
  %s = tensor.extract_slice %c[0, 1] [6, 6] [1, 1] : tensor<6x8xf32> to tensor<6x6xf32>
  return %s : tensor<6x6xf32>
}
