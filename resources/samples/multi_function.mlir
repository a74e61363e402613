// Several exported functions in one module, one of them calling another.
func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.addf %a, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}

func.func @mul(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.mulf %a, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}

func.func @add_then_mul(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %s = call @add(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %p = call @mul(%s, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %p : tensor<4xf32>
}

func.func @scalar_math(%x: f32, %n: i64) -> (f32, i64) {
  %two = arith.constant 2.0 : f32
  %y = arith.mulf %x, %two : f32
  %c7 = arith.constant 7 : i64
  %m = arith.muli %n, %c7 : i64
  return %y, %m : f32, i64
}
