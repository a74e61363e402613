// A counter one call stores a scalar into: IREE writes the element on the host (flow.tensor.store), so an
// inline-dynamic build writes it with the VM's own vm.buffer.fill into the HAL buffer's storage view.
util.global private mutable @counter = dense<0> : tensor<4xi32>
func.func @bump(%i: index, %v: i32) -> tensor<4xi32> {
  %c = util.global.load @counter : tensor<4xi32>
  %u = tensor.insert %v into %c[%i] : tensor<4xi32>
  util.global.store %u, @counter : tensor<4xi32>
  return %u : tensor<4xi32>
}
