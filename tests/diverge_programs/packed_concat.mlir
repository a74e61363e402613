// Two computed tensors concatenated along the inner dimension, then reduced: IREE writes both into one
// slab (an in-place concatenation), the second dispatch reading and writing a binding the first wrote.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @main(%a: tensor<16x24xf32>, %b: tensor<16x40xf32>) -> tensor<16xf32> {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<16x24xf32>
  %eb = tensor.empty() : tensor<16x40xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<16x24xf32>) outs(%ea : tensor<16x24xf32>) {
    ^bb0(%v: f32, %o: f32):
      %t = math.tanh %v : f32
      linalg.yield %t : f32
  } -> tensor<16x24xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<16x40xf32>) outs(%eb : tensor<16x40xf32>) {
    ^bb0(%v: f32, %o: f32):
      %t = math.exp %v : f32
      linalg.yield %t : f32
  } -> tensor<16x40xf32>
  %c = tensor.concat dim(1) %x, %y : (tensor<16x24xf32>, tensor<16x40xf32>) -> tensor<16x64xf32>
  %e16 = tensor.empty() : tensor<16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e16 : tensor<16xf32>) -> tensor<16xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%c : tensor<16x64xf32>) outs(%acc : tensor<16xf32>) {
    ^bb0(%v: f32, %o: f32):
      %q = arith.addf %v, %o : f32
      linalg.yield %q : f32
  } -> tensor<16xf32>
  return %s : tensor<16xf32>
}
