// The pipeline of pipeline.mlir with asynchronous calls (built with --iree-execution-model=async-external,
// as module_a and module_b are then): each declared function follows IREE's coarse-fences ABI, so every call
// passes a wait and a signal fence down to the module it calls, and @run takes the caller's pair.
func.func private @module_a.abs(%input: tensor<8xf32>) -> tensor<8xf32> attributes {
  iree.abi.model = "coarse-fences"
}
func.func private @module_b.mul(%lhs: tensor<8xf32>, %rhs: tensor<8xf32>, %output: tensor<8xf32> {iree.abi.output = 0 : index}) -> tensor<8xf32> attributes {
  iree.abi.model = "coarse-fences"
}

func.func @run(%input: tensor<8xf32>) -> tensor<8xf32> {
  %input_abs = call @module_a.abs(%input) : (tensor<8xf32>) -> tensor<8xf32>
  %result_storage = tensor.empty() : tensor<8xf32>
  %result = call @module_b.mul(%input_abs, %input_abs, %result_storage) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %result : tensor<8xf32>
}
