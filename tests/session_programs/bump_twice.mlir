// A bytecode function called twice (never inlined): IREE names the private callee __func_0 in the .vmfb.
util.func private @bump(%x: i32) -> i32 attributes {inlining_policy = #util.inline.never} {
  %c3 = arith.constant 3 : i32
  %m = arith.muli %x, %c3 : i32
  %c1 = arith.constant 1 : i32
  %r = arith.addi %m, %c1 : i32
  util.return %r : i32
}
func.func @twice(%x: i32) -> i32 {
  %a = util.call @bump(%x) : (i32) -> i32
  %b = util.call @bump(%a) : (i32) -> i32
  return %b : i32
}
