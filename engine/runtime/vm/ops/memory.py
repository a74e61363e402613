"""Constants, globals, ref moves, select/switch, ``!vm.buffer`` and ``!vm.list`` ops (dispatch.c L1187-1890).

Buffer ``load``/``store``/``fill`` offsets and lengths are in elements of the op's width; ``copy``,
``compare``, ``clone`` and ``hash`` use bytes (runtime facts §3.4). Errors are raised as
``VmStatusError`` with IREE's status code and message; the interpreter turns them into a trap.
"""

from __future__ import annotations

import struct

import numpy as np

from engine.runtime.vm import numeric as N
from engine.runtime.vm.handlers import CompileEnv, handler, ref
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import VmBuffer, VmList, ref_type_name, type_matches

M32 = 0xFFFFFFFF


def _p(raw: int) -> int:
    return raw & 0x7FFF


# ---------------------------------------------------------------------------------------------------
# Constants


@handler("ConstI32Zero", "ConstF32Zero")
def _const_zero32(ins, env: CompileEnv):
    (w,) = ins.operands
    w, n = _p(w), env.next_pc

    def h(i, r, t):
        i[w] = 0
        return n

    return h


@handler("ConstI64Zero", "ConstF64Zero")
def _const_zero64(ins, env: CompileEnv):
    (w,) = ins.operands
    w, n = _p(w), env.next_pc
    wh = w + 1

    def h(i, r, t):
        i[w] = 0
        i[wh] = 0
        return n

    return h


def _imm_bits(ins) -> int:
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
    v = _imm_bits(ins)
    w, n = _p(ins.operands[1]), env.next_pc

    def h(i, r, t):
        i[w] = v
        return n

    return h


@handler("ConstI64", "ConstF64")
def _const64(ins, env: CompileEnv):
    v = _imm_bits(ins)
    lo, hi = v & M32, v >> 32
    w, n = _p(ins.operands[1]), env.next_pc
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


# ---------------------------------------------------------------------------------------------------
# Globals: primitive globals live in the instance's rwdata bytes, refs in its global_refs list.

_WIDTH_FMT = {"I32": "<I", "F32": "<I", "I64": "<Q", "F64": "<Q"}


def _global_suffix(symbol: str) -> str:
    return symbol[-3:]


def _check_global_offset(inst, offset: int, size: int) -> None:
    if offset < 0 or offset + size > len(inst.rwdata):
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            f"global byte_offset out of range: {offset} (rwdata={len(inst.rwdata)})",
        )


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
    w, n, inst = _p(wraw), env.next_pc, env.instance
    wh = w + 1
    indirect = "Indirect" in sym
    s = _p(src)
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
    v_, n, inst = _p(vraw), env.next_pc, env.instance
    vh = v_ + 1
    indirect = "Indirect" in sym
    d = _p(dst)
    pack = st.pack_into

    def h(i, r, t):
        off = i[d] if indirect else dst
        if indirect:
            _check_global_offset(inst, off, st.size)
        pack(inst.rwdata, off, (i[v_] | (i[vh] << 32)) if wide else i[v_])
        return n

    return h


def _check_type(value: object, type_name: str) -> None:
    if value is not None and not type_matches(value, type_name):
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"source ref type mismatch: {ref_type_name(value)} is not {type_name}",
        )


@handler("GlobalLoadRef", "GlobalLoadIndirectRef")
def _global_load_ref(ins, env: CompileEnv):
    src, type_id, wraw = ins.operands
    w, _ = ref(wraw)
    inst, n = env.instance, env.next_pc
    type_name = inst.type_name(type_id)
    indirect = "Indirect" in ins.opcode.symbol
    s = _p(src)

    def h(i, r, t):
        k = i[s] if indirect else src
        refs = inst.global_refs
        if indirect and k >= len(refs):
            raise VmStatusError(
                StatusCode.OUT_OF_RANGE, f"global ref ordinal out of range: {k} (table={len(refs)})"
            )
        v = refs[k]
        _check_type(v, type_name)
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
    d = _p(dst)

    def h(i, r, t):
        k = i[d] if indirect else dst
        refs = inst.global_refs
        if indirect and k >= len(refs):
            raise VmStatusError(
                StatusCode.OUT_OF_RANGE, f"global ref ordinal out of range: {k} (table={len(refs)})"
            )
        v = r[v_]
        _check_type(v, type_name)
        refs[k] = v
        if move:
            r[v_] = None
        return n

    return h


# ---------------------------------------------------------------------------------------------------
# Ref moves, select and switch


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
        _check_type(v, type_name)
        if move and s != w:
            r[s] = None
        r[w] = v
        return n

    return h


@handler("SelectI32", "SelectF32")
def _select32(ins, env: CompileEnv):
    c, a, b, w = (_p(x) for x in ins.operands)
    n = env.next_pc

    def h(i, r, t):
        i[w] = i[a] if i[c] else i[b]
        return n

    return h


@handler("SelectI64", "SelectF64")
def _select64(ins, env: CompileEnv):
    c, a, b, w = (_p(x) for x in ins.operands)
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
    c = _p(craw)
    a, amove = ref(araw)
    b, bmove = ref(braw)
    w, _ = ref(wraw)
    n = env.next_pc
    type_name = env.instance.type_name(type_id)

    def h(i, r, t):
        s, move = (a, amove) if i[c] else (b, bmove)
        v = r[s]
        _check_type(v, type_name)
        if move and s != w:
            r[s] = None
        r[w] = v
        return n

    return h


@handler("SwitchI32", "SwitchF32")
def _switch32(ins, env: CompileEnv):
    x, d, values, w = ins.operands
    x, d, w = _p(x), _p(d), _p(w)
    values = tuple(_p(v) for v in values)
    n, count = env.next_pc, len(values)

    def h(i, r, t):
        k = i[x]
        i[w] = i[values[k]] if k < count else i[d]  # index is compared unsigned, as a host size
        return n

    return h


@handler("SwitchI64", "SwitchF64")
def _switch64(ins, env: CompileEnv):
    x, d, values, w = ins.operands
    x, d, w = _p(x), _p(d), _p(w)
    values = tuple(_p(v) for v in values)
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
    x = _p(xraw)
    d, dmove = ref(draw)
    refs = tuple(ref(v) for v in values)
    w, _ = ref(wraw)
    n, count = env.next_pc, len(refs)
    type_name = env.instance.type_name(type_id)

    def h(i, r, t):
        k = i[x]
        s, move = refs[k] if k < count else (d, dmove)
        v = r[s]
        _check_type(v, type_name)
        if move and s != w:
            r[s] = None
        r[w] = v
        return n

    return h


# ---------------------------------------------------------------------------------------------------
# Buffers


def _buffer(v: object, what: str) -> VmBuffer:
    if v is None:
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"{what} is null")
    if not isinstance(v, VmBuffer):
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT, f"{what} is not a !vm.buffer (got {ref_type_name(v)})"
        )
    return v


def _oob(offset: int, length: int, size: int, buf: VmBuffer) -> VmStatusError:
    return VmStatusError(
        StatusCode.OUT_OF_RANGE,
        f"out-of-bounds access detected (offset={offset}, length={length}, alignment={size}, "
        f"buffer length={buf.length})",
    )


def _read_only() -> VmStatusError:
    return VmStatusError(
        StatusCode.PERMISSION_DENIED, "buffer is read-only and cannot be mapped for mutation"
    )


_LOAD = {
    "BufferLoadI8U": ("<B", False),
    "BufferLoadI8S": ("<b", False),
    "BufferLoadI16U": ("<H", False),
    "BufferLoadI16S": ("<h", False),
    "BufferLoadI32": ("<I", False),
    "BufferLoadF32": ("<I", False),
    "BufferLoadI64": ("<Q", True),
    "BufferLoadF64": ("<Q", True),
}


@handler(*_LOAD)
def _buffer_load(ins, env: CompileEnv):
    fmt, wide = _LOAD[ins.opcode.symbol]
    st = struct.Struct(fmt)
    size = st.size
    unpack = st.unpack_from
    braw, oraw, wraw = ins.operands
    b, _ = ref(braw)
    o, w = _p(oraw), _p(wraw)
    oh, wh = o + 1, w + 1
    n = env.next_pc

    def h(i, r, t):
        buf = r[b]
        if buf.__class__ is not VmBuffer:
            buf = _buffer(buf, "source_buffer")
        off = (i[o] | (i[oh] << 32)) * size
        data = buf.data
        if off + size > data.shape[0]:
            raise _oob(off, size, size, buf)
        v = unpack(data, off)[0]
        if wide:
            i[w] = v & M32
            i[wh] = v >> 32
        else:
            i[w] = v & M32
        return n

    return h


_STORE = {
    "BufferStoreI8": ("<B", 0xFF),
    "BufferStoreI16": ("<H", 0xFFFF),
    "BufferStoreI32": ("<I", M32),
    "BufferStoreF32": ("<I", M32),
    "BufferStoreI64": ("<Q", N.M64),
    "BufferStoreF64": ("<Q", N.M64),
}


@handler(*_STORE)
def _buffer_store(ins, env: CompileEnv):
    fmt, mask = _STORE[ins.opcode.symbol]
    st = struct.Struct(fmt)
    size = st.size
    pack = st.pack_into
    braw, oraw, vraw = ins.operands
    b, _ = ref(braw)
    o, v_ = _p(oraw), _p(vraw)
    oh, vh = o + 1, v_ + 1
    wide = size == 8
    n = env.next_pc

    def h(i, r, t):
        buf = r[b]
        if buf.__class__ is not VmBuffer:
            buf = _buffer(buf, "target_buffer")
        if not buf.mutable:
            raise _read_only()
        off = (i[o] | (i[oh] << 32)) * size
        data = buf.data
        if off + size > data.shape[0]:
            raise _oob(off, size, size, buf)
        pack(data, off, ((i[v_] | (i[vh] << 32)) if wide else i[v_]) & mask)
        return n

    return h


_FILL = {
    "BufferFillI8": np.uint8,
    "BufferFillI16": np.uint16,
    "BufferFillI32": np.uint32,
    "BufferFillF32": np.uint32,
    "BufferFillI64": np.uint64,
    "BufferFillF64": np.uint64,
}


@handler(*_FILL)
def _buffer_fill(ins, env: CompileEnv):
    dtype = np.dtype(_FILL[ins.opcode.symbol])
    size = dtype.itemsize
    braw, oraw, lraw, vraw = ins.operands
    b, _ = ref(braw)
    o, ln, v_ = _p(oraw), _p(lraw), _p(vraw)
    n = env.next_pc
    mask = (1 << (8 * size)) - 1

    def h(i, r, t):
        buf = _buffer(r[b], "buffer")
        if not buf.mutable:
            raise _read_only()
        off = (i[o] | (i[o + 1] << 32)) * size
        length = (i[ln] | (i[ln + 1] << 32)) * size
        if off + length > buf.length:
            raise _oob(off, length, size, buf)
        value = (i[v_] | (i[v_ + 1] << 32)) if size == 8 else i[v_]
        buf.data[off : off + length].view(dtype)[:] = value & mask
        return n

    return h


def _i64(i: list, k: int) -> int:
    return i[k] | (i[k + 1] << 32)


def _put64(i: list, k: int, v: int) -> None:
    i[k] = v & M32
    i[k + 1] = (v >> 32) & M32


@handler("BufferAlloc")
def _buffer_alloc(ins, env: CompileEnv):
    lraw, _align, wraw = ins.operands
    ln = _p(lraw)
    w, _ = ref(wraw)
    n = env.next_pc

    def h(i, r, t):
        length = _i64(i, ln)
        if length > (1 << 40):
            raise VmStatusError(
                StatusCode.RESOURCE_EXHAUSTED, f"buffer allocation of {length} bytes is too large"
            )
        r[w] = VmBuffer.allocate(length, "alloc")
        return n

    return h


@handler("BufferClone")
def _buffer_clone(ins, env: CompileEnv):
    sraw, oraw, lraw, _align, wraw = ins.operands
    s, _ = ref(sraw)
    o, ln = _p(oraw), _p(lraw)
    w, _ = ref(wraw)
    n = env.next_pc

    def h(i, r, t):
        src = _buffer(r[s], "source")
        off, length = _i64(i, o), _i64(i, ln)
        if off + length > src.length:
            raise _oob(off, length, 1, src)
        r[w] = VmBuffer(src.data[off : off + length].copy(), True, "clone")
        return n

    return h


@handler("BufferLength")
def _buffer_length(ins, env: CompileEnv):
    braw, wraw = ins.operands
    b, _ = ref(braw)
    w = _p(wraw)
    n = env.next_pc

    def h(i, r, t):
        _put64(i, w, _buffer(r[b], "buffer").length)
        return n

    return h


@handler("BufferCopy")
def _buffer_copy(ins, env: CompileEnv):
    sraw, soraw, draw, doraw, lraw = ins.operands
    s, _ = ref(sraw)
    d, _ = ref(draw)
    so, do, ln = _p(soraw), _p(doraw), _p(lraw)
    n = env.next_pc

    def h(i, r, t):
        src = _buffer(r[s], "source_buffer")
        dst = _buffer(r[d], "target_buffer")
        soff, doff, length = _i64(i, so), _i64(i, do), _i64(i, ln)
        if not dst.mutable:
            raise _read_only()
        if soff + length > src.length:
            raise _oob(soff, length, 1, src)
        if doff + length > dst.length:
            raise _oob(doff, length, 1, dst)
        dst.data[doff : doff + length] = src.data[soff : soff + length]
        return n

    return h


@handler("BufferCompare")
def _buffer_compare(ins, env: CompileEnv):
    araw, aoraw, braw, boraw, lraw, wraw = ins.operands
    a, _ = ref(araw)
    b, _ = ref(braw)
    ao, bo, ln, w = _p(aoraw), _p(boraw), _p(lraw), _p(wraw)
    n = env.next_pc

    def h(i, r, t):
        lhs = _buffer(r[a], "lhs_buffer")
        rhs = _buffer(r[b], "rhs_buffer")
        aoff, boff, length = _i64(i, ao), _i64(i, bo), _i64(i, ln)
        if aoff + length > lhs.length:
            raise _oob(aoff, length, 1, lhs)
        if boff + length > rhs.length:
            raise _oob(boff, length, 1, rhs)
        i[w] = 1 if bytes(lhs.data[aoff : aoff + length]) == bytes(rhs.data[boff : boff + length]) else 0
        return n

    return h


def fnv1a_64(data: bytes) -> int:
    """IREE's ``iree_vm_buffer_hash``: 64-bit FNV-1a over the bytes."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & N.M64
    return h


@handler("BufferHash")
def _buffer_hash(ins, env: CompileEnv):
    sraw, oraw, lraw, wraw = ins.operands
    s, _ = ref(sraw)
    o, ln, w = _p(oraw), _p(lraw), _p(wraw)
    n = env.next_pc

    def h(i, r, t):
        src = _buffer(r[s], "source_buffer")
        off, length = _i64(i, o), _i64(i, ln)
        if off + length > src.length:
            raise _oob(off, length, 1, src)
        _put64(i, w, fnv1a_64(bytes(src.data[off : off + length])))
        return n

    return h


# ---------------------------------------------------------------------------------------------------
# Lists. Items are Python values: ints (signed, of the element width), floats, or refs.

_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_FLOAT_TYPES = ("f32", "f64")


def _list(v: object) -> VmList:
    if v is None:
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, "list is null")
    if not isinstance(v, VmList):
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"not a !vm.list (got {ref_type_name(v)})")
    return v


def _wrap_signed(v: int, bits: int) -> int:
    m = (1 << bits) - 1
    v &= m
    return v - (1 << bits) if v >> (bits - 1) else v


def list_element_kind(element_type: str) -> str:
    """``value`` for i8..f64 element types, ``ref`` for refs, ``variant`` for ``!vm.opaque``/``?``."""
    t = element_type.lstrip("!")
    if t in _INT_BITS or t in _FLOAT_TYPES:
        return "value"
    if t in ("vm.opaque", "?", "vm.ref<?>", "opaque", "variant", "any"):
        return "variant"
    return "ref"


def list_store_value(lst: VmList, index: int, value: int | float, value_type: str) -> None:
    """``iree_vm_list_set_value``: converts to the element type of a typed list; variants keep the value."""
    _check_index(lst, index)
    t = lst.element_type.lstrip("!")
    kind = list_element_kind(t)
    if kind == "ref":
        raise VmStatusError(StatusCode.FAILED_PRECONDITION, "list does not store values")
    if kind == "variant":
        lst.items[index] = value if value_type not in ("f32",) else float(value)
        return
    if t in _INT_BITS:
        lst.items[index] = _wrap_signed(int(value), _INT_BITS[t]) if isinstance(value, int) else 0
    elif t == "f32":
        lst.items[index] = N.f32_round(value) if isinstance(value, float) else 0.0
    else:
        lst.items[index] = float(value) if isinstance(value, float) else 0.0


def list_load_value(lst: VmList, index: int, want: str) -> int | float:
    """``iree_vm_list_get_value_as``: ints convert between widths; float↔int conversions give 0."""
    _check_index(lst, index)
    v = lst.items[index]
    if v is None or not isinstance(v, (int, float)) or isinstance(v, bool):
        if (
            list_element_kind(lst.element_type) == "variant"
            and v is not None
            and not isinstance(v, (int, float))
        ):
            raise VmStatusError(
                StatusCode.FAILED_PRECONDITION, f"variant at index {index} is not a value type"
            )
        v = 0
    if want in _INT_BITS:
        return _wrap_signed(v, _INT_BITS[want]) if isinstance(v, int) else 0
    return float(v) if isinstance(v, float) else 0.0


def _check_index(lst: VmList, index: int) -> None:
    if index >= len(lst.items):
        raise VmStatusError(StatusCode.OUT_OF_RANGE, f"index {index} out of bounds ({len(lst.items)})")


@handler("ListAlloc")
def _list_alloc(ins, env: CompileEnv):
    type_id, craw, wraw = ins.operands
    c = _p(craw)
    w, _ = ref(wraw)
    n = env.next_pc
    element_type = env.instance.type_name(type_id)

    def h(i, r, t):
        r[w] = VmList(element_type, [], i[c])
        return n

    return h


@handler("ListReserve")
def _list_reserve(ins, env: CompileEnv):
    lraw, craw = ins.operands
    lr, _ = ref(lraw)
    c = _p(craw)
    n = env.next_pc

    def h(i, r, t):
        lst = _list(r[lr])
        lst.capacity = max(lst.capacity, i[c])
        return n

    return h


@handler("ListSize")
def _list_size(ins, env: CompileEnv):
    lraw, wraw = ins.operands
    lr, _ = ref(lraw)
    w = _p(wraw)
    n = env.next_pc

    def h(i, r, t):
        i[w] = len(_list(r[lr]).items)
        return n

    return h


def list_resize(lst: VmList, size: int) -> None:
    items = lst.items
    if size < len(items):
        del items[size:]
    else:
        t = lst.element_type.lstrip("!")
        fill = 0 if t in _INT_BITS else 0.0 if t in _FLOAT_TYPES else None
        items.extend([fill] * (size - len(items)))
    lst.capacity = max(lst.capacity, size)


@handler("ListResize")
def _list_resize(ins, env: CompileEnv):
    lraw, sraw = ins.operands
    lr, _ = ref(lraw)
    s = _p(sraw)
    n = env.next_pc

    def h(i, r, t):
        list_resize(_list(r[lr]), i[s])
        return n

    return h


_LIST_VALUE = {
    "ListGetI32": "i32",
    "ListSetI32": "i32",
    "ListGetI64": "i64",
    "ListSetI64": "i64",
    "ListGetF32": "f32",
    "ListSetF32": "f32",
    "ListGetF64": "f64",
    "ListSetF64": "f64",
}


@handler("ListGetI32", "ListGetI64", "ListGetF32", "ListGetF64")
def _list_get_value(ins, env: CompileEnv):
    want = _LIST_VALUE[ins.opcode.symbol]
    lraw, xraw, wraw = ins.operands
    lr, _ = ref(lraw)
    x, w = _p(xraw), _p(wraw)
    n = env.next_pc

    def h(i, r, t):
        v = list_load_value(_list(r[lr]), i[x], want)
        if want == "i32":
            i[w] = v & M32
        elif want == "i64":
            _put64(i, w, v)
        elif want == "f32":
            i[w] = N.f32_bits(v)
        else:
            _put64(i, w, N.f64_bits(v))
        return n

    return h


@handler("ListSetI32", "ListSetI64", "ListSetF32", "ListSetF64")
def _list_set_value(ins, env: CompileEnv):
    kind = _LIST_VALUE[ins.opcode.symbol]
    lraw, xraw, vraw = ins.operands
    lr, _ = ref(lraw)
    x, v_ = _p(xraw), _p(vraw)
    n = env.next_pc

    def h(i, r, t):
        if kind == "i32":
            v = N.s32(i[v_])
        elif kind == "i64":
            v = N.s64(_i64(i, v_))
        elif kind == "f32":
            v = N.f32_of(i[v_])
        else:
            v = N.f64_of(_i64(i, v_))
        list_store_value(_list(r[lr]), i[x], v, kind)
        return n

    return h


@handler("ListGetRef")
def _list_get_ref(ins, env: CompileEnv):
    lraw, xraw, type_id, wraw = ins.operands
    lr, _ = ref(lraw)
    x = _p(xraw)
    w, move = ref(wraw)
    n = env.next_pc
    type_name = env.instance.type_name(type_id)

    def h(i, r, t):
        lst = _list(r[lr])
        k = i[x]
        _check_index(lst, k)
        v = lst.items[k]
        if isinstance(v, (int, float)):
            raise VmStatusError(StatusCode.FAILED_PRECONDITION, f"list element {k} is not a ref")
        if move:
            lst.items[k] = None
        # A type mismatch yields null, not an error (dispatch.c L1776-1795).
        r[w] = v if v is None or type_matches(v, type_name) else None
        return n

    return h


@handler("ListSetRef")
def _list_set_ref(ins, env: CompileEnv):
    lraw, xraw, vraw = ins.operands
    lr, _ = ref(lraw)
    x = _p(xraw)
    v_, move = ref(vraw)
    n = env.next_pc

    def h(i, r, t):
        lst = _list(r[lr])
        k = i[x]
        _check_index(lst, k)
        v = r[v_]
        if (
            v is not None
            and list_element_kind(lst.element_type) == "ref"
            and not type_matches(v, lst.element_type)
        ):
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"cannot store {ref_type_name(v)} in a list of {lst.element_type}",
            )
        lst.items[k] = v
        if move:
            r[v_] = None
        return n

    return h
