// Compiled for vmvx with --iree-vmvx-enable-microkernels: the VMVX executables then import IREE's `vmvx`
// module (vmvx.add.2d.f32, vmvx.exp.2d.f32, vmvx.copy.2d.x32, vmvx.pack, vmvx.unpack...), which the
// HAL's VMVX loader registers next to each executable.

func.func @elementwise_f32() {
  %a = util.unfoldable_constant dense<[[1.0, -2.0, 3.5], [0.25, 8.0, -0.5]]> : tensor<2x3xf32>
  %b = util.unfoldable_constant dense<[[0.5, 0.5, -1.0], [2.0, 1.0, 4.0]]> : tensor<2x3xf32>
  %sum = arith.addf %a, %b : tensor<2x3xf32>
  %prod = arith.mulf %a, %b : tensor<2x3xf32>
  %diff = arith.subf %a, %b : tensor<2x3xf32>
  %abs = math.absf %a : tensor<2x3xf32>
  %neg = arith.negf %b : tensor<2x3xf32>
  check.expect_almost_eq_const(%sum, dense<[[1.5, -1.5, 2.5], [2.25, 9.0, 3.5]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  check.expect_almost_eq_const(%prod, dense<[[0.5, -1.0, -3.5], [0.5, 8.0, -2.0]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  check.expect_almost_eq_const(%diff, dense<[[0.5, -2.5, 4.5], [-1.75, 7.0, -4.5]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  check.expect_almost_eq_const(%abs, dense<[[1.0, 2.0, 3.5], [0.25, 8.0, 0.5]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  check.expect_almost_eq_const(%neg, dense<[[-0.5, -0.5, 1.0], [-2.0, -1.0, -4.0]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  return
}

func.func @transcendental_f32() {
  %a = util.unfoldable_constant dense<[0.0, 1.0, 2.0, -1.0]> : tensor<4xf32>
  %e = math.exp %a : tensor<4xf32>
  %l = math.log %e : tensor<4xf32>
  check.expect_almost_eq_const(%e, dense<[1.0, 2.7182817, 7.389056, 0.36787945]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%l, dense<[0.0, 1.0, 2.0, -1.0]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @elementwise_i32() {
  %a = util.unfoldable_constant dense<[7, -3, 12, 0]> : tensor<4xi32>
  %b = util.unfoldable_constant dense<[5, 6, -4, 9]> : tensor<4xi32>
  %sum = arith.addi %a, %b : tensor<4xi32>
  %prod = arith.muli %a, %b : tensor<4xi32>
  %and = arith.andi %a, %b : tensor<4xi32>
  %xor = arith.xori %a, %b : tensor<4xi32>
  check.expect_eq_const(%sum, dense<[12, 3, 8, 9]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%prod, dense<[35, -18, -48, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%and, dense<[5, 4, 12, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%xor, dense<[2, -5, -16, 9]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @pack_unpack_i32() {
  %src = util.unfoldable_constant dense<[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]> : tensor<4x4xi32>
  %init = tensor.empty() : tensor<2x2x2x2xi32>
  %packed = linalg.pack %src inner_dims_pos = [0, 1] inner_tiles = [2, 2] into %init
      : tensor<4x4xi32> -> tensor<2x2x2x2xi32>
  check.expect_eq_const(%packed, dense<[[[[0, 1], [4, 5]], [[2, 3], [6, 7]]], [[[8, 9], [12, 13]], [[10, 11], [14, 15]]]]> : tensor<2x2x2x2xi32>) : tensor<2x2x2x2xi32>
  %barrier = util.optimization_barrier %packed : tensor<2x2x2x2xi32>
  %out = tensor.empty() : tensor<4x4xi32>
  %unpacked = linalg.unpack %barrier inner_dims_pos = [0, 1] inner_tiles = [2, 2] into %out
      : tensor<2x2x2x2xi32> -> tensor<4x4xi32>
  check.expect_eq(%unpacked, %src) : tensor<4x4xi32>
  return
}
