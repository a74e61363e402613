// One convolution dispatch for timing checks: 1x16x34x34 input, 32 3x3 filters (4.7 M multiply-adds).
func.func @conv(%input: tensor<1x16x34x34xf32>, %filter: tensor<32x16x3x3xf32>) -> tensor<1x32x32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x32x32x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  %out = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%input, %filter : tensor<1x16x34x34xf32>, tensor<32x16x3x3xf32>)
      outs(%init : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  return %out : tensor<1x32x32x32xf32>
}
