// A program with no dispatches of its own: it calls @module_a.abs, then @module_b.mul on the result twice
// (|x| * |x|), so its module depends on both and a VM context registers them before it.
func.func private @module_a.abs(%input: tensor<8xf32>) -> tensor<8xf32>
func.func private @module_b.mul(%lhs: tensor<8xf32>, %rhs: tensor<8xf32>, %output: tensor<8xf32> {iree.abi.output = 0 : index}) -> tensor<8xf32>

func.func @run(%input: tensor<8xf32>) -> tensor<8xf32> {
  %input_abs = call @module_a.abs(%input) : (tensor<8xf32>) -> tensor<8xf32>
  %result_storage = tensor.empty() : tensor<8xf32>
  %result = call @module_b.mul(%input_abs, %input_abs, %result_storage) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %result : tensor<8xf32>
}
