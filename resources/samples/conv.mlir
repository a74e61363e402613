// 2-D convolution, NHWC input and HWCF filter, stride 1, no padding.
func.func @main(%input: tensor<1x8x8x3xf32>, %filter: tensor<3x3x3x4xf32>) -> tensor<1x6x6x4xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x6x6x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  %conv = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%input, %filter : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) outs(%acc : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  return %conv : tensor<1x6x6x4xf32>
}
