// A compiled module another program calls, writing into storage its caller gives (iree.abi.output).
builtin.module @module_b {
  func.func @mul(%lhs: tensor<8xf32>, %rhs: tensor<8xf32>,
                 %output: tensor<8xf32> {iree.abi.output = 0 : index}) -> tensor<8xf32> {
    %result = arith.mulf %lhs, %rhs : tensor<8xf32>
    return %result : tensor<8xf32>
  }
}
