// A stateful program: a tensor global and one global of each primitive kind (i32, f32, i64 interleaved,
// which IREE's serializer packs by size), updated by every call and returned, so IREE's runtime gives the
// values the globals hold after each call.
util.global private mutable @state = dense<0.0> : tensor<8xf32>
util.global private mutable @calls = 0 : i32
util.global private mutable @scale = 2.5 : f32
util.global private mutable @big = 7 : i64
func.func @accumulate(%x: tensor<8xf32>) -> (tensor<8xf32>, i32, f32, i64) {
  %s = util.global.load @state : tensor<8xf32>
  %n = arith.addf %s, %x : tensor<8xf32>
  util.global.store %n, @state : tensor<8xf32>
  %c = util.global.load @calls : i32
  %one = arith.constant 1 : i32
  %c1 = arith.addi %c, %one : i32
  util.global.store %c1, @calls : i32
  %f = util.global.load @scale : f32
  %f1 = arith.mulf %f, %f : f32
  util.global.store %f1, @scale : f32
  %b = util.global.load @big : i64
  %b1 = arith.addi %b, %b : i64
  util.global.store %b1, @big : i64
  return %n, %c1, %f1, %b1 : tensor<8xf32>, i32, f32, i64
}
