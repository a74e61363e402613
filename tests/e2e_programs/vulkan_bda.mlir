// Compiled for Vulkan with --iree-vulkan-dispatch-abi=bda: the executable format is
// vulkan-spirv-bda-v1 and kernels reach their bindings through buffer device addresses instead of
// descriptor sets. IREE's Vulkan driver (lavapipe included) runs it.

func.func @add_f32() {
  %a = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = util.unfoldable_constant dense<[0.5, -2.0, 10.0, 0.25]> : tensor<4xf32>
  %c = arith.addf %a, %b : tensor<4xf32>
  check.expect_almost_eq_const(%c, dense<[1.5, 0.0, 13.0, 4.25]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @mul_i32_2d() {
  %a = util.unfoldable_constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %b = util.unfoldable_constant dense<[[7, -1, 0], [2, 2, -3]]> : tensor<2x3xi32>
  %c = arith.muli %a, %b : tensor<2x3xi32>
  check.expect_eq_const(%c, dense<[[7, -2, 0], [8, 10, -18]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  return
}
