// One small elementwise dispatch run N times by a host loop: a run of thousands of dispatches that
// compiles in a second (the window's lists at model scale).
func.func @many(%x: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<4xf32>) {
    %e = tensor.empty() : tensor<4xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                         iterator_types = ["parallel"]} ins(%acc : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%a: f32, %b: f32):
      %one = arith.constant 1.0 : f32
      %s = arith.addf %a, %one : f32
      linalg.yield %s : f32
    } -> tensor<4xf32>
    scf.yield %y : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
