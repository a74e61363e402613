// A 4xi4 result (2 bytes: IREE packs i4 two a byte, low nibble first) and an i4 argument.
func.func @ret4() -> tensor<4xi4> {
  %a = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi4>
  %b = util.unfoldable_constant dense<[1, 1, 1, -1]> : tensor<4xi4>
  %e = tensor.empty() : tensor<4xi4>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%a, %b : tensor<4xi4>, tensor<4xi4>) outs(%e : tensor<4xi4>) {
  ^bb0(%x: i4, %y: i4, %o: i4):
    %s = arith.addi %x, %y : i4
    linalg.yield %s : i4
  } -> tensor<4xi4>
  return %r : tensor<4xi4>
}
func.func @widen(%a: tensor<4xi4>) -> tensor<4xi8> {
  %e = tensor.empty() : tensor<4xi8>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
                       ins(%a : tensor<4xi4>) outs(%e : tensor<4xi8>) {
  ^bb0(%x: i4, %o: i8):
    %w = arith.extsi %x : i4 to i8
    linalg.yield %w : i8
  } -> tensor<4xi8>
  return %r : tensor<4xi8>
}
