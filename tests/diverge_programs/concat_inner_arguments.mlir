// Two arguments concatenated along the inner dimension and returned: IREE copies each into the result with
// a slow_memcpy dispatch, whose name gives no element type, straight from the arguments.
func.func @main(%a: tensor<16x24xf32>, %b: tensor<16x40xf32>) -> tensor<16x64xf32> {
  %c = tensor.concat dim(1) %a, %b : (tensor<16x24xf32>, tensor<16x40xf32>) -> tensor<16x64xf32>
  return %c : tensor<16x64xf32>
}
