// A compiled module another program calls (IREE's samples/multiple_modules, at 8 elements): @module_a.abs.
builtin.module @module_a {
  func.func @abs(%input: tensor<8xf32>) -> tensor<8xf32> {
    %result = math.absf %input : tensor<8xf32>
    return %result : tensor<8xf32>
  }
}
