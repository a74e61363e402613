// A kernel that works in place on a buffer imported from the module's constant data: the sort's
// operand is an unfoldable constant, so the dispatch writes into rodata. IREE's tools load modules into
// writable memory; a read-only map of the .vmfb makes this program crash.

func.func @sort_descending_in_place() {
  %input = util.unfoldable_constant dense<[4, 9, -1, 7, 0, 12, 3, 3]> : tensor<8xi32>
  %sorted = iree_linalg_ext.sort dimension(0) outs(%input : tensor<8xi32>) {
    ^bb0(%a: i32, %b: i32):
      %gt = arith.cmpi sgt, %a, %b : i32
      iree_linalg_ext.yield %gt : i1
    } -> tensor<8xi32>
  check.expect_eq_const(%sorted, dense<[12, 9, 7, 4, 3, 3, 0, -1]> : tensor<8xi32>) : tensor<8xi32>
  return
}

func.func @sort_rows_f32_in_place() {
  %input = util.unfoldable_constant dense<[[2.5, -1.0, 0.5], [9.0, 3.0, 6.0]]> : tensor<2x3xf32>
  %sorted = iree_linalg_ext.sort dimension(1) outs(%input : tensor<2x3xf32>) {
    ^bb0(%a: f32, %b: f32):
      %lt = arith.cmpf olt, %a, %b : f32
      iree_linalg_ext.yield %lt : i1
    } -> tensor<2x3xf32>
  check.expect_eq_const(%sorted, dense<[[-1.0, 0.5, 2.5], [3.0, 6.0, 9.0]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  return
}
