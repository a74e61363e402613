// A padded tensor: IREE zero-fills it (hal.command_buffer.fill_buffer), copies the interior in place
// (a slow_memcpy dispatch that reads and writes it), then squares it. The fill defines the padding.
func.func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x10x10xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x4x8x8xf32> to tensor<1x4x10x10xf32>
  %e = tensor.empty() : tensor<1x4x10x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a,b,c,d) -> (a,b,c,d)>, affine_map<(a,b,c,d) -> (a,b,c,d)>], iterator_types = ["parallel","parallel","parallel","parallel"]} ins(%p : tensor<1x4x10x10xf32>) outs(%e : tensor<1x4x10x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<1x4x10x10xf32>
  return %r : tensor<1x4x10x10xf32>
}
