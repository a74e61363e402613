// tanh of %a and the log of %b written into one slab (IREE concatenates in place: the log, the second
// dispatch, reads and writes a binding the first wrote; two slow_memcpy dispatches follow), then a matmul
// of the concatenation. With %b negative the log writes 64 NaN; the matmul's input then already holds
// them. ``break nan`` must name the log, the first writer of a NaN, not the matmul that carries them on.
#id = affine_map<(i, j) -> (i, j)>
func.func @main(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %w: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
    ^bb0(%v: f32, %o: f32):
      %t = math.tanh %v : f32
      linalg.yield %t : f32
  } -> tensor<8x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
    ^bb0(%v: f32, %o: f32):
      %t = math.log %v : f32
      linalg.yield %t : f32
  } -> tensor<8x8xf32>
  %c = tensor.concat dim(1) %x, %y : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %mm = linalg.matmul ins(%c, %w : tensor<8x16xf32>, tensor<16x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %mm : tensor<8x8xf32>
}
