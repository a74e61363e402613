// A padded convolution: IREE copies the input into a larger zero-filled buffer (a slow_memcpy dispatch into
// part of its binding), then convolves. Untyped, the copy's binding is more bytes than its traced tensor.
func.func @main(%x: tensor<1x3x16x16xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x16x16xf32> {
  %cst = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<1x3x16x16xf32> to tensor<1x3x18x18xf32>
  %e = tensor.empty() : tensor<1x4x16x16xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
    ins(%p, %w : tensor<1x3x18x18xf32>, tensor<4x3x3x3xf32>) outs(%z : tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  return %y : tensor<1x4x16x16xf32>
}
