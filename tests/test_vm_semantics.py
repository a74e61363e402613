"""The interpreter against IREE's own runtime on VM-dialect programs (numeric quirks of docs/iree-3.13-runtime-facts.md §3.9).

Each program is compiled with ``iree-compile --compile-from=vm`` and run by ``iree.runtime`` and by our
interpreter with the same arguments; results must be equal exactly (floats compared by their f32 bits).
"""

from __future__ import annotations

import struct

import iree.runtime as rt
import pytest
from support import iree_compile

from engine.runtime.vm.context import VmContext
from engine.runtime.vm.interpreter import VmTrap
from engine.runtime.vm.native import StatusCode
from engine.runtime.vmfb.module import open_vmfb

PROGRAM = """
vm.module @sem {
  vm.func private @callee(%a: i64, %b: i32, %c: i64) -> (i64, i32) {
    %s = vm.add.i64 %a, %c : i64
    %t = vm.mul.i32 %b, %b : i32
    vm.return %s, %t : i64, i32
  }
  vm.export @calls
  vm.func @calls(%a: i64, %b: i32, %c: i64) -> (i64, i32) {
    %r:2 = vm.call @callee(%a, %b, %c) : (i64, i32, i64) -> (i64, i32)
    vm.return %r#0, %r#1 : i64, i32
  }
  vm.export @switch64
  vm.func @switch64(%i: i32) -> i64 {
    %d = vm.const.i64 -7
    %a = vm.const.i64 4294967301
    %b = vm.const.i64 -4294967296
    %r = vm.switch.i64 %i[%a, %b] else %d : i64
    vm.return %r : i64
  }
  vm.export @remf
  vm.func @remf(%x: f32, %y: f32) -> f32 {
    %r = vm.rem.f32 %x, %y : f32
    vm.return %r : f32
  }
  vm.export @casts
  vm.func @casts(%x: f32) -> (i32, i64, i32, i64) {
    %a = vm.cast.f32.si32 %x : f32 -> i32
    %b = vm.cast.f32.si64 %x : f32 -> i64
    %c = vm.cast.f32.ui32 %x : f32 -> i32
    %d = vm.cast.f32.ui64 %x : f32 -> i64
    vm.return %a, %b, %c, %d : i32, i64, i32, i64
  }
  vm.export @shifts
  vm.func @shifts(%x: i32, %n: i32, %y: i64) -> (i32, i32, i32, i64, i64, i64) {
    %a = vm.shl.i32 %x, %n : i32
    %b = vm.shr.i32.s %x, %n : i32
    %c = vm.shr.i32.u %x, %n : i32
    %d = vm.shl.i64 %y, %n : i64
    %e = vm.shr.i64.s %y, %n : i64
    %f = vm.shr.i64.u %y, %n : i64
    vm.return %a, %b, %c, %d, %e, %f : i32, i32, i32, i64, i64, i64
  }
  vm.export @intops
  vm.func @intops(%x: i32, %y: i32) -> (i32, i32, i32, i32, i32, i32, i32) {
    %a = vm.div.i32.s %x, %y : i32
    %b = vm.rem.i32.s %x, %y : i32
    %c = vm.div.i32.u %x, %y : i32
    %d = vm.trunc.i32.i8 %x : i32 -> i32
    %e = vm.ctlz.i32 %x : i32
    %f = vm.min.i32.u %x, %y : i32
    %g = vm.ext.i8.i32.s %x : i32 -> i32
    vm.return %a, %b, %c, %d, %e, %f, %g : i32, i32, i32, i32, i32, i32, i32
  }
  vm.export @floatops
  vm.func @floatops(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32, i32) {
    %a = vm.tanh.f32 %x : f32
    %b = vm.exp.f32 %x : f32
    %c = vm.div.f32 %x, %y : f32
    %d = vm.fma.f32 %x, %y, %x : f32
    %e = vm.round.f32.even %x : f32
    %f = vm.cmp.lt.f32.u %x, %y : f32
    vm.return %a, %b, %c, %d, %e, %f : f32, f32, f32, f32, f32, i32
  }
  vm.export @buffers
  vm.func @buffers(%n: i64, %v: i32) -> (i32, i32, i64, i32) {
    %c0 = vm.const.i64.zero
    %c1 = vm.const.i64 1
    %c2 = vm.const.i64 2
    %c16 = vm.const.i32 16
    %buf = vm.buffer.alloc %n, %c16 : !vm.buffer
    vm.buffer.store.i32 %v, %buf[%c1] : i32 -> !vm.buffer
    %x = vm.buffer.load.i8.s %buf[%c2] : !vm.buffer -> i32
    %y = vm.buffer.load.i32 %buf[%c1] : !vm.buffer -> i32
    %len = vm.buffer.length %buf : !vm.buffer -> i64
    vm.buffer.fill.i16 %buf, %c0, %c2, %v : i32 -> !vm.buffer
    %z = vm.buffer.load.i16.u %buf[%c1] : !vm.buffer -> i32
    vm.return %x, %y, %len, %z : i32, i32, i64, i32
  }
  vm.export @lists
  vm.func @lists(%v: i64) -> (i32, i32, i64) {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    %c3 = vm.const.i32 3
    %l = vm.list.alloc %c3 : (i32) -> !vm.list<i32>
    vm.list.resize %l, %c3 : (!vm.list<i32>, i32)
    vm.list.set.i64 %l, %c1, %v : (!vm.list<i32>, i32, i64)
    %a = vm.list.get.i32 %l, %c1 : (!vm.list<i32>, i32) -> i32
    %s = vm.list.size %l : (!vm.list<i32>) -> i32
    %b = vm.list.get.i64 %l, %c1 : (!vm.list<i32>, i32) -> i64
    vm.return %a, %s, %b : i32, i32, i64
  }
  vm.export @fails
  vm.func @fails(%code: i32) -> i32 {
    vm.fail %code, "custom failure message"
  }
  vm.export @oob
  vm.func @oob(%i: i64) -> i32 {
    %c16 = vm.const.i32 16
    %n = vm.const.i64 8
    %buf = vm.buffer.alloc %n, %c16 : !vm.buffer
    %x = vm.buffer.load.i32 %buf[%i] : !vm.buffer -> i32
    vm.return %x : i32
  }
}
"""

F32_FUNCS = {"remf": "ff", "casts": "f", "floatops": "ff"}


@pytest.fixture(scope="module")
def sem_vmfb(tmp_path_factory):
    d = tmp_path_factory.mktemp("vmsem")
    (d / "sem.mlir").write_text(PROGRAM)
    out = d / "sem.vmfb"
    iree_compile(
        [
            "--compile-from=vm",
            "--output-format=vm-bytecode",
            str(d / "sem.mlir"),
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


@pytest.fixture(scope="module")
def ours(sem_vmfb):
    return VmContext([open_vmfb(sem_vmfb, writable=True)])


@pytest.fixture(scope="module")
def theirs(sem_vmfb):
    inst = rt.VmInstance()
    module = rt.VmModule.copy_buffer(inst, sem_vmfb.read_bytes())
    return rt.VmContext(inst, [module]), module


def iree_invoke(theirs, name, args, nresults):
    ctx, module = theirs
    fn = module.lookup_function(name)
    a = rt.VmVariantList(len(args))
    for v in args:
        if isinstance(v, float):
            a.push_float(v)
        else:
            a.push_int(v)
    r = rt.VmVariantList(nresults)
    ctx.invoke(fn, a, r)
    return [r.get_variant(k) for k in range(nresults)]


def norm(v):
    if isinstance(v, float):
        return ("f32", struct.unpack("<I", struct.pack("<f", v))[0]) if v == v else ("nan",)
    return v


CASES = [
    ("calls", [5, 7, -(2**40)], 2),
    ("calls", [2**62, 65536, 2**62], 2),
    ("switch64", [0], 1),  # 4294967301 -> 5: IREE 3.13 reads the chosen value as one sign-extended word
    ("switch64", [1], 1),
    ("switch64", [2], 1),
    ("switch64", [-1], 1),
    ("remf", [5.5, 2.0], 1),
    ("remf", [-7.25, 3.0], 1),
    ("remf", [1e30, 3.0], 1),
    ("casts", [5.5], 4),
    ("casts", [2.5], 4),
    ("casts", [-2.5], 4),
    ("casts", [-0.49999997], 4),
    ("casts", [3e9], 4),
    ("shifts", [-123456, 33, -(2**40) + 5], 6),
    ("shifts", [0x7FFFFFFF, 31, 2**63 - 1], 6),
    ("shifts", [1, 64 + 3, 1], 6),
    ("intops", [-7, 2], 7),
    ("intops", [7, -2], 7),
    ("intops", [-(2**31), 3], 7),
    ("intops", [0x1F0, 1000], 7),
    ("floatops", [0.5, 3.0], 6),
    ("floatops", [-3.75, 0.1], 6),
    ("floatops", [2.5, 0.0], 6),
    ("floatops", [1e-3, -1.5], 6),
    ("buffers", [16, -2], 4),
    ("buffers", [8, 0x12345678], 4),
    ("lists", [2**40 + 3], 3),
    ("lists", [-5], 3),
]


@pytest.mark.parametrize("name,args,nresults", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_same_results_as_iree(ours, theirs, name, args, nresults):
    expected = iree_invoke(theirs, name, args, nresults)
    got = ours.invoke(name, args)
    assert [norm(v) for v in got] == [norm(v) for v in expected]


def test_switch_i64_quirk(ours):
    # Documented quirk (docs/iree-3.13-runtime-facts.md §3.9): selecting 4294967301 yields 5.
    assert ours.invoke("switch64", [0]) == [5]
    assert ours.invoke("switch64", [5]) == [-7]


def test_rem_is_ieee_remainder_and_casts_round_half_away(ours):
    assert ours.invoke("remf", [5.5, 2.0]) == [-0.5]
    assert ours.invoke("casts", [2.5])[:2] == [3, 3]
    assert ours.invoke("casts", [-2.5])[:2] == [-3, -3]


@pytest.mark.parametrize("code", [7, 9, 3])
def test_fail_status_matches_iree(ours, theirs, code):
    with pytest.raises(Exception) as theirs_err:  # noqa: B017  (the binding picks the class by code)
        iree_invoke(theirs, "fails", [code], 1)
    with pytest.raises(VmTrap) as ours_err:
        ours.invoke("fails", [code])
    trap = ours_err.value
    assert trap.code == StatusCode(code)
    assert trap.status_text in str(theirs_err.value)
    assert trap.stack[-1].function == "fails"
    assert trap.instruction.opcode.symbol == "Fail"


def test_fail_with_ok_status_falls_through_to_no_return(ours):
    # vm.fail with status 0 falls through; the next pc is past the function's last instruction.
    with pytest.raises(VmTrap):
        ours.invoke("fails", [0])


def test_out_of_bounds_load_traps_like_iree(ours, theirs):
    assert ours.invoke("oob", [1]) == iree_invoke(theirs, "oob", [1], 1) == [0]
    with pytest.raises(Exception) as theirs_err:  # noqa: B017  (the binding picks the class by code)
        iree_invoke(theirs, "oob", [2], 1)
    with pytest.raises(VmTrap) as ours_err:
        ours.invoke("oob", [2])
    assert ours_err.value.code == StatusCode.OUT_OF_RANGE
    assert "OUT_OF_RANGE" in str(theirs_err.value)
