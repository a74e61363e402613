// A constant large enough (64 KiB) to be stored as an external rodata segment of the .vmfb.
func.func @main(%x: tensor<16384xf32>) -> tensor<16384xf32> {
  %c = arith.constant dense<1.5> : tensor<16384xf32>
  %r = arith.mulf %x, %c : tensor<16384xf32>
  return %r : tensor<16384xf32>
}
