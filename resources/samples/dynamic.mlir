// Dynamic shapes: scale a vector of any length by 2 and add 1; and a dynamic-row matmul.
func.func @scale(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %empty = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%empty : tensor<?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %one = arith.constant 1.0 : f32
    %m = arith.mulf %v, %two : f32
    %a = arith.addf %m, %one : f32
    linalg.yield %a : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

func.func @matmul_rows(%lhs: tensor<?x8xf32>, %rhs: tensor<8x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %lhs, %c0 : tensor<?x8xf32>
  %empty = tensor.empty(%m) : tensor<?x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x4xf32>) -> tensor<?x4xf32>
  %r = linalg.matmul ins(%lhs, %rhs : tensor<?x8xf32>, tensor<8x4xf32>) outs(%acc : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
