// Results of the narrow types iree-run-module prints specially (f8 as the f32 they widen to, i1 as hex bytes)
// and an f8 argument it parses (to f32, then rounded into the 8-bit type).
func.func @f8(%a: tensor<3xf32>) -> (tensor<3xf8E4M3FN>, tensor<3xbf16>, tensor<3xf16>, tensor<3xi1>) {
  %e = tensor.empty() : tensor<3xf8E4M3FN>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<3xf32>) outs(%e : tensor<3xf8E4M3FN>) {
  ^bb0(%x: f32, %o: f8E4M3FN):
    %t = arith.truncf %x : f32 to f8E4M3FN
    linalg.yield %t : f8E4M3FN
  } -> tensor<3xf8E4M3FN>
  %eb = tensor.empty() : tensor<3xbf16>
  %b = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<3xf32>) outs(%eb : tensor<3xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<3xbf16>
  %eh = tensor.empty() : tensor<3xf16>
  %h = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<3xf32>) outs(%eh : tensor<3xf16>) {
  ^bb0(%x: f32, %o: f16):
    %t = arith.truncf %x : f32 to f16
    linalg.yield %t : f16
  } -> tensor<3xf16>
  %ei = tensor.empty() : tensor<3xi1>
  %i = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<3xf32>) outs(%ei : tensor<3xi1>) {
  ^bb0(%x: f32, %o: i1):
    %z = arith.constant 0.0 : f32
    %t = arith.cmpf ogt, %x, %z : f32
    linalg.yield %t : i1
  } -> tensor<3xi1>
  return %r, %b, %h, %i : tensor<3xf8E4M3FN>, tensor<3xbf16>, tensor<3xf16>, tensor<3xi1>
}
func.func @widen(%a: tensor<3xf8E4M3FN>) -> tensor<3xf32> {
  %e = tensor.empty() : tensor<3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<3xf8E4M3FN>) outs(%e : tensor<3xf32>) {
  ^bb0(%x: f8E4M3FN, %o: f32):
    %t = arith.extf %x : f8E4M3FN to f32
    linalg.yield %t : f32
  } -> tensor<3xf32>
  return %r : tensor<3xf32>
}
func.func @id(%a: tensor<4xi1>, %b: tensor<3xbf16>, %c: tensor<3xf16>, %d: tensor<2xi8>, %e: tensor<2xui32>) -> (tensor<4xi1>, tensor<3xbf16>, tensor<3xf16>, tensor<2xi8>, tensor<2xui32>) {
  %a2 = util.optimization_barrier %a : tensor<4xi1>
  return %a2, %b, %c, %d, %e : tensor<4xi1>, tensor<3xbf16>, tensor<3xf16>, tensor<2xi8>, tensor<2xui32>
}
