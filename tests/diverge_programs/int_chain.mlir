// Integer dispatches: an i32 multiply-shift-max and an i8 -> i32 widening sum of its result's low bytes.
func.func @main(%a: tensor<256xi32>, %b: tensor<256xi32>) -> (tensor<256xi32>, tensor<i32>) {
  %m = arith.muli %a, %b : tensor<256xi32>
  %c3 = arith.constant dense<3> : tensor<256xi32>
  %sh = arith.shrsi %m, %c3 : tensor<256xi32>
  %mx = arith.maxsi %sh, %a : tensor<256xi32>
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<i32>
  %acc = linalg.fill ins(%zero : i32) outs(%e : tensor<i32>) -> tensor<i32>
  %r = linalg.reduce ins(%mx : tensor<256xi32>) outs(%acc : tensor<i32>) dimensions = [0]
    (%in: i32, %out: i32) {
      %s = arith.addi %in, %out : i32
      linalg.yield %s : i32
    }
  return %mx, %r : tensor<256xi32>, tensor<i32>
}
