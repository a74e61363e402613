"""Global ops: primitive globals live in the instance's rwdata bytes, refs in its ``global_refs`` list
(dispatch.c, ``vm.global.*``)."""

from __future__ import annotations

import struct

from engine.runtime.vm.handlers import M32, CompileEnv, check_ref_type, handler, ref, reg
from engine.runtime.vm.native import StatusCode, VmStatusError

_WIDTH_FMT = {"I32": "<I", "F32": "<I", "I64": "<Q", "F64": "<Q"}


def _global_suffix(symbol: str) -> str:
    return symbol[-3:]


def _check_global_offset(inst, offset: int, size: int) -> None:
    if offset < 0 or offset + size > len(inst.rwdata):
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            f"global byte_offset out of range: {offset} (rwdata={len(inst.rwdata)})",
        )


def _ref_ordinal_error(ordinal: int, refs: list) -> VmStatusError:
    return VmStatusError(StatusCode.OUT_OF_RANGE, f"global ref ordinal out of range: {ordinal} (table={len(refs)})")


@handler(
    "GlobalLoadI32",
    "GlobalLoadF32",
    "GlobalLoadI64",
    "GlobalLoadF64",
    "GlobalLoadIndirectI32",
    "GlobalLoadIndirectF32",
    "GlobalLoadIndirectI64",
    "GlobalLoadIndirectF64",
)
def _global_load(ins, env: CompileEnv):
    sym = ins.opcode.symbol
    st = struct.Struct(_WIDTH_FMT[_global_suffix(sym)])
    wide = st.size == 8
    src, wraw = ins.operands
    w, n, inst = reg(wraw), env.next_pc, env.instance
    wh = w + 1
    indirect = "Indirect" in sym
    s = reg(src)
    unpack = st.unpack_from

    def h(i, r, t):
        off = i[s] if indirect else src
        if indirect:
            _check_global_offset(inst, off, st.size)
        v = unpack(inst.rwdata, off)[0]
        if wide:
            i[w] = v & M32
            i[wh] = v >> 32
        else:
            i[w] = v
        return n

    return h


@handler(
    "GlobalStoreI32",
    "GlobalStoreF32",
    "GlobalStoreI64",
    "GlobalStoreF64",
    "GlobalStoreIndirectI32",
    "GlobalStoreIndirectF32",
    "GlobalStoreIndirectI64",
    "GlobalStoreIndirectF64",
)
def _global_store(ins, env: CompileEnv):
    sym = ins.opcode.symbol
    st = struct.Struct(_WIDTH_FMT[_global_suffix(sym)])
    wide = st.size == 8
    dst, vraw = ins.operands
    v_, n, inst = reg(vraw), env.next_pc, env.instance
    vh = v_ + 1
    indirect = "Indirect" in sym
    d = reg(dst)
    pack = st.pack_into

    def h(i, r, t):
        off = i[d] if indirect else dst
        if indirect:
            _check_global_offset(inst, off, st.size)
        pack(inst.rwdata, off, (i[v_] | (i[vh] << 32)) if wide else i[v_])
        return n

    return h


@handler("GlobalLoadRef", "GlobalLoadIndirectRef")
def _global_load_ref(ins, env: CompileEnv):
    src, type_id, wraw = ins.operands
    w, _ = ref(wraw)
    inst, n = env.instance, env.next_pc
    type_name = inst.type_name(type_id)
    indirect = "Indirect" in ins.opcode.symbol
    s = reg(src)

    def h(i, r, t):
        k = i[s] if indirect else src
        refs = inst.global_refs
        if indirect and k >= len(refs):
            raise _ref_ordinal_error(k, refs)
        v = refs[k]
        check_ref_type(v, type_name)
        r[w] = v
        return n

    return h


@handler("GlobalStoreRef", "GlobalStoreIndirectRef")
def _global_store_ref(ins, env: CompileEnv):
    dst, type_id, vraw = ins.operands
    v_, move = ref(vraw)
    inst, n = env.instance, env.next_pc
    type_name = inst.type_name(type_id)
    indirect = "Indirect" in ins.opcode.symbol
    d = reg(dst)

    def h(i, r, t):
        k = i[d] if indirect else dst
        refs = inst.global_refs
        if indirect and k >= len(refs):
            raise _ref_ordinal_error(k, refs)
        v = r[v_]
        check_ref_type(v, type_name)
        refs[k] = v
        if move:
            r[v_] = None
        return n

    return h
