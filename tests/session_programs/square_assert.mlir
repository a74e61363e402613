// Squares its input in a dispatch, reads the first square back on the host and asserts it is negative: the
// cf.assert fails (IREE's vm.fail with FAILED_PRECONDITION) after one dispatch ran.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.mulf %v, %v : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %z = arith.constant 0 : index
  %v = tensor.extract %r[%z] : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %neg = arith.cmpf olt, %v, %zero : f32
  cf.assert %neg, "the square was not negative"
  return %r : tensor<4xf32>
}
