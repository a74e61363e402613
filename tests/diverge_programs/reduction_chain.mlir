// A chain of reductions: row mean, centred values, row variance, normalised values, column sums.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @main(%x: tensor<64x1024xf32>) -> tensor<1024xf32> {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 1024.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e64 = tensor.empty() : tensor<64xf32>
  %e1024 = tensor.empty() : tensor<1024xf32>
  %e2 = tensor.empty() : tensor<64x1024xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e64 : tensor<64xf32>) -> tensor<64xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x1024xf32>) outs(%acc : tensor<64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %a, %o : f32
      linalg.yield %s : f32
  } -> tensor<64xf32>
  %centred = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<64x1024xf32>, tensor<64xf32>) outs(%e2 : tensor<64x1024xf32>) {
    ^bb0(%a: f32, %s: f32, %o: f32):
      %m = arith.divf %s, %n : f32
      %d = arith.subf %a, %m : f32
      linalg.yield %d : f32
  } -> tensor<64x1024xf32>
  %acc2 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<64xf32>) -> tensor<64xf32>
  %var = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%centred : tensor<64x1024xf32>) outs(%acc2 : tensor<64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %q = arith.mulf %a, %a : f32
      %s = arith.addf %q, %o : f32
      linalg.yield %s : f32
  } -> tensor<64xf32>
  %normed = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%centred, %var : tensor<64x1024xf32>, tensor<64xf32>) outs(%e2 : tensor<64x1024xf32>) {
    ^bb0(%a: f32, %v: f32, %o: f32):
      %m = arith.divf %v, %n : f32
      %p = arith.addf %m, %eps : f32
      %r = math.rsqrt %p : f32
      %y = arith.mulf %a, %r : f32
      %t = math.tanh %y : f32
      linalg.yield %t : f32
  } -> tensor<64x1024xf32>
  %acc3 = linalg.fill ins(%zero : f32) outs(%e1024 : tensor<1024xf32>) -> tensor<1024xf32>
  %cols = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%normed : tensor<64x1024xf32>) outs(%acc3 : tensor<1024xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %a, %o : f32
      linalg.yield %s : f32
  } -> tensor<1024xf32>
  return %cols : tensor<1024xf32>
}
