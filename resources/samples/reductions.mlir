// Reductions: the sum of each row and the maximum of each column of an 8x32 tensor.
func.func @row_sum(%x: tensor<8x32xf32>) -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<8xf32>) -> tensor<8xf32>
  %r = linalg.reduce ins(%x : tensor<8x32xf32>) outs(%acc : tensor<8xf32>) dimensions = [1]
    (%in: f32, %out: f32) {
      %s = arith.addf %in, %out : f32
      linalg.yield %s : f32
    }
  return %r : tensor<8xf32>
}

func.func @column_max(%x: tensor<8x32xf32>) -> tensor<32xf32> {
  %lowest = arith.constant -3.40282347E+38 : f32
  %empty = tensor.empty() : tensor<32xf32>
  %acc = linalg.fill ins(%lowest : f32) outs(%empty : tensor<32xf32>) -> tensor<32xf32>
  %r = linalg.reduce ins(%x : tensor<8x32xf32>) outs(%acc : tensor<32xf32>) dimensions = [0]
    (%in: f32, %out: f32) {
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    }
  return %r : tensor<32xf32>
}
