// Integer types: i8 saturating-free arithmetic, i32 bit operations, and an i8 -> i32 widening sum.
func.func @i8_ops(%a: tensor<16xi8>, %b: tensor<16xi8>) -> tensor<16xi8> {
  %s = arith.addi %a, %b : tensor<16xi8>
  %x = arith.xori %s, %a : tensor<16xi8>
  return %x : tensor<16xi8>
}

func.func @i32_ops(%a: tensor<16xi32>, %b: tensor<16xi32>) -> tensor<16xi32> {
  %m = arith.muli %a, %b : tensor<16xi32>
  %c3 = arith.constant dense<3> : tensor<16xi32>
  %sh = arith.shrsi %m, %c3 : tensor<16xi32>
  %mx = arith.maxsi %sh, %a : tensor<16xi32>
  return %mx : tensor<16xi32>
}

func.func @widen_sum(%a: tensor<16xi8>) -> tensor<i32> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<i32>
  %acc = linalg.fill ins(%zero : i32) outs(%e : tensor<i32>) -> tensor<i32>
  %r = linalg.reduce ins(%a : tensor<16xi8>) outs(%acc : tensor<i32>) dimensions = [0]
    (%in: i8, %out: i32) {
      %w = arith.extsi %in : i8 to i32
      %s = arith.addi %w, %out : i32
      linalg.yield %s : i32
    }
  return %r : tensor<i32>
}
