// Expectations that fail: each export must report what was expected and what was found, and the
// command must exit non-zero. A failed expectation does not stop the function (IREE's check module).

func.func @eq_contents() {
  %x = util.unfoldable_constant dense<[1, 2, 3]> : tensor<3xi32>
  %y = arith.addi %x, %x : tensor<3xi32>
  check.expect_eq_const(%y, dense<[2, 4, 7]> : tensor<3xi32>) : tensor<3xi32>
  return
}

func.func @almost_eq_outside_default_atol() {
  // 2.0003 vs 2.0 differs by more than the default atol (1e-4).
  %x = util.unfoldable_constant dense<[1.0, 2.0003]> : tensor<2xf32>
  check.expect_almost_eq_const(%x, dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
  return
}

func.func @almost_eq_rtol_is_asymmetric() {
  // |lhs - rhs| = 100 <= rtol * |rhs| fails when rhs is the small value (0.5 * 100 = 50).
  %x = util.unfoldable_constant dense<[200.0]> : tensor<1xf32>
  %e = arith.constant dense<[100.0]> : tensor<1xf32>
  check.expect_almost_eq(%x, %e, atol 0.0, rtol 0.5) : tensor<1xf32>
  return
}

func.func @true_of_zero() {
  %zero = util.unfoldable_constant 0 : i32
  check.expect_true(%zero) : i32
  return
}

func.func @false_of_nonzero() {
  %v = util.unfoldable_constant 42 : i32
  check.expect_false(%v) : i32
  return
}

func.func @all_true_with_a_zero() {
  %x = util.unfoldable_constant dense<[3, 0, 1, 0]> : tensor<4xi32>
  check.expect_all_true(%x) : tensor<4xi32>
  return
}

func.func @two_failures_then_a_pass() {
  %x = util.unfoldable_constant dense<[1.5, 2.5]> : tensor<2xf32>
  check.expect_almost_eq_const(%x, dense<[1.0, 2.5]> : tensor<2xf32>) : tensor<2xf32>
  %i = util.unfoldable_constant dense<[7]> : tensor<1xi32>
  check.expect_eq_const(%i, dense<[8]> : tensor<1xi32>) : tensor<1xi32>
  check.expect_eq_const(%i, dense<[7]> : tensor<1xi32>) : tensor<1xi32>
  return
}

func.func @all_true_of_i1_is_unsupported() {
  // IREE's check module reads no bool elements in expect_all_true: INVALID_ARGUMENT, the call fails.
  %x = util.unfoldable_constant dense<[true, true]> : tensor<2xi1>
  check.expect_all_true(%x) : tensor<2xi1>
  return
}
