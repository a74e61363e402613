"""Constant ops: zeros, immediates and rodata refs (dispatch.c, ``vm.const.*``)."""

from __future__ import annotations

from engine.runtime.vm import numeric as N
from engine.runtime.vm.handlers import M32, CompileEnv, handler, ref, reg


@handler("ConstI32Zero", "ConstF32Zero")
def _const_zero32(ins, env: CompileEnv):
    (w,) = ins.operands
    w, n = reg(w), env.next_pc

    def h(i, r, t):
        i[w] = 0
        return n

    return h


@handler("ConstI64Zero", "ConstF64Zero")
def _const_zero64(ins, env: CompileEnv):
    (w,) = ins.operands
    w, n = reg(w), env.next_pc
    wh = w + 1

    def h(i, r, t):
        i[w] = 0
        i[wh] = 0
        return n

    return h


def imm_bits(ins) -> int:
    value = ins.operands[0]
    sym = ins.opcode.symbol
    if sym == "ConstI32":
        return value & M32
    if sym == "ConstI64":
        return value & N.M64
    if sym == "ConstF32":
        return value if isinstance(value, int) else N.f32_bits(value)
    return value if isinstance(value, int) else N.f64_bits(value)


@handler("ConstI32", "ConstF32")
def _const32(ins, env: CompileEnv):
    v = imm_bits(ins)
    w, n = reg(ins.operands[1]), env.next_pc

    def h(i, r, t):
        i[w] = v
        return n

    return h


@handler("ConstI64", "ConstF64")
def _const64(ins, env: CompileEnv):
    v = imm_bits(ins)
    lo, hi = v & M32, v >> 32
    w, n = reg(ins.operands[1]), env.next_pc
    wh = w + 1

    def h(i, r, t):
        i[w] = lo
        i[wh] = hi
        return n

    return h


@handler("ConstRefZero")
def _const_ref_zero(ins, env: CompileEnv):
    w, _ = ref(ins.operands[0])
    n = env.next_pc

    def h(i, r, t):
        r[w] = None
        return n

    return h


@handler("ConstRefRodata")
def _const_ref_rodata(ins, env: CompileEnv):
    ordinal, wraw = ins.operands
    w, _ = ref(wraw)
    inst = env.instance
    n = env.next_pc

    def h(i, r, t):
        r[w] = inst.rodata_buffer(ordinal)
        return n

    return h
