// Expectations that hold: every export must return with no failure on both engines.
// Written like IREE's tests/e2e programs: exported functions without arguments or results.

func.func @eq_i32() {
  %lhs = util.unfoldable_constant dense<[1, -2, 3, 2147483647]> : tensor<4xi32>
  %rhs = util.unfoldable_constant dense<[3, 4, 5, 6]> : tensor<4xi32>
  %sum = arith.addi %lhs, %rhs : tensor<4xi32>
  check.expect_eq_const(%sum, dense<[4, 2, 8, -2147483643]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq(%sum, %sum) : tensor<4xi32>
  return
}

func.func @eq_i8_2d() {
  %x = util.unfoldable_constant dense<[[1, 2, 3], [-4, -5, 127]]> : tensor<2x3xi8>
  %y = arith.muli %x, %x : tensor<2x3xi8>
  check.expect_eq_const(%y, dense<[[1, 4, 9], [16, 25, 1]]> : tensor<2x3xi8>) : tensor<2x3xi8>
  return
}

func.func @almost_eq_default_tolerance() {
  // Within the compiler's default atol (1e-4): 2.00005 vs 2.0.
  %x = util.unfoldable_constant dense<[1.0, 2.00005, -3.5]> : tensor<3xf32>
  %y = arith.mulf %x, %x : tensor<3xf32>
  check.expect_almost_eq_const(%x, dense<[1.0, 2.0, -3.5]> : tensor<3xf32>) : tensor<3xf32>
  check.expect_almost_eq_const(%y, dense<[1.0, 4.0002, 12.25]> : tensor<3xf32>) : tensor<3xf32>
  return
}

func.func @almost_eq_explicit_tolerance() {
  // 1000.5 vs 1000.0 holds with rtol 1e-3 (the tolerance scales with the rhs), not with the default.
  %x = util.unfoldable_constant dense<[1000.5, 0.01, 0.0]> : tensor<3xf32>
  %e = arith.constant dense<[1000.0, 0.0, 0.001]> : tensor<3xf32>
  check.expect_almost_eq(%x, %e, atol 1.0e-2, rtol 1.0e-3) : tensor<3xf32>
  return
}

func.func @almost_eq_f16_and_infinity() {
  // f16 values are compared as floats; an infinity only equals the same infinity. (No arithmetic: the
  // vmvx backend has no f16 kernels.)
  %x = util.unfoldable_constant dense<[0.5, 1.5, -2.0, 0x7C00]> : tensor<4xf16>
  check.expect_almost_eq_const(%x, dense<[0.5, 1.5, -2.0, 0x7C00]> : tensor<4xf16>) : tensor<4xf16>
  return
}

func.func @scalars_true_false() {
  %one = util.unfoldable_constant 1 : i32
  %minus = util.unfoldable_constant -7 : i32
  %zero = util.unfoldable_constant 0 : i32
  check.expect_true(%one) : i32
  check.expect_true(%minus) : i32
  check.expect_false(%zero) : i32
  %cmp = arith.cmpi slt, %minus, %zero : i32
  %c = arith.extui %cmp : i1 to i32
  check.expect_true(%c) : i32
  return
}

func.func @all_true_i32() {
  %x = util.unfoldable_constant dense<[1, -1, 5, 2147483647]> : tensor<4xi32>
  check.expect_all_true(%x) : tensor<4xi32>
  return
}
