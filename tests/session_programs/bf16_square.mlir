// Squares a bf16 tensor: IREE's llvm-cpu code computes it through f32 and integer bit operations, and .npy
// keeps bf16 as its bits (uint16): 1.5 squared is bf16 2.25, bits 0x4010.
func.func @main(%x: tensor<6x7xbf16>) -> tensor<6x7xbf16> {
  %e = tensor.empty() : tensor<6x7xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<6x7xbf16>) outs(%e : tensor<6x7xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %s = arith.mulf %a, %a : bf16
    linalg.yield %s : bf16
  } -> tensor<6x7xbf16>
  return %r : tensor<6x7xbf16>
}
