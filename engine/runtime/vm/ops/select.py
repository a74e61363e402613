"""Ref moves, ``vm.select.*`` and ``vm.switch.*`` (dispatch.c)."""

from __future__ import annotations

from engine.runtime.vm.handlers import M32, CompileEnv, check_ref_type, handler, ref, reg


@handler("AssignRef")
def _assign_ref(ins, env: CompileEnv):
    s, move = ref(ins.operands[0])
    w, _ = ref(ins.operands[1])
    n = env.next_pc

    def h(i, r, t):
        v = r[s]
        if move and s != w:
            r[s] = None
        r[w] = v
        return n

    return h


@handler("CastAnyRef")
def _cast_any_ref(ins, env: CompileEnv):
    sraw, type_id, wraw = ins.operands
    s, move = ref(sraw)
    w, _ = ref(wraw)
    n = env.next_pc
    type_name = env.instance.type_name(type_id)

    def h(i, r, t):
        v = r[s]
        check_ref_type(v, type_name)
        if move and s != w:
            r[s] = None
        r[w] = v
        return n

    return h


@handler("SelectI32", "SelectF32")
def _select32(ins, env: CompileEnv):
    c, a, b, w = (reg(x) for x in ins.operands)
    n = env.next_pc

    def h(i, r, t):
        i[w] = i[a] if i[c] else i[b]
        return n

    return h


@handler("SelectI64", "SelectF64")
def _select64(ins, env: CompileEnv):
    c, a, b, w = (reg(x) for x in ins.operands)
    n = env.next_pc

    def h(i, r, t):
        s = a if i[c] else b
        i[w] = i[s]
        i[w + 1] = i[s + 1]
        return n

    return h


@handler("SelectRef")
def _select_ref(ins, env: CompileEnv):
    craw, type_id, araw, braw, wraw = ins.operands
    c = reg(craw)
    a, amove = ref(araw)
    b, bmove = ref(braw)
    w, _ = ref(wraw)
    n = env.next_pc
    type_name = env.instance.type_name(type_id)

    def h(i, r, t):
        s, move = (a, amove) if i[c] else (b, bmove)
        v = r[s]
        check_ref_type(v, type_name)
        if move and s != w:
            r[s] = None
        r[w] = v
        return n

    return h


@handler("SwitchI32", "SwitchF32")
def _switch32(ins, env: CompileEnv):
    x, d, values, w = ins.operands
    x, d, w = reg(x), reg(d), reg(w)
    values = tuple(reg(v) for v in values)
    n, count = env.next_pc, len(values)

    def h(i, r, t):
        k = i[x]
        i[w] = i[values[k]] if k < count else i[d]  # index is compared unsigned, as a host size
        return n

    return h


@handler("SwitchI64", "SwitchF64")
def _switch64(ins, env: CompileEnv):
    x, d, values, w = ins.operands
    x, d, w = reg(x), reg(d), reg(w)
    values = tuple(reg(v) for v in values)
    n, count = env.next_pc, len(values)
    buggy = ins.opcode.symbol == "SwitchI64"

    def h(i, r, t):
        k = i[x]
        if k < count:
            s = values[k]
            if buggy:
                # IREE 3.13 reads the chosen value as one i32 word, sign-extended (dispatch.c L1872-1881).
                lo = i[s]
                i[w] = lo
                i[w + 1] = M32 if lo & 0x80000000 else 0
                return n
        else:
            s = d
        i[w] = i[s]
        i[w + 1] = i[s + 1]
        return n

    return h


@handler("SwitchRef")
def _switch_ref(ins, env: CompileEnv):
    xraw, type_id, draw, values, wraw = ins.operands
    x = reg(xraw)
    d, dmove = ref(draw)
    refs = tuple(ref(v) for v in values)
    w, _ = ref(wraw)
    n, count = env.next_pc, len(refs)
    type_name = env.instance.type_name(type_id)

    def h(i, r, t):
        k = i[x]
        s, move = refs[k] if k < count else (d, dmove)
        v = r[s]
        check_ref_type(v, type_name)
        if move and s != w:
            r[s] = None
        r[w] = v
        return n

    return h
