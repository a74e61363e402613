"""``!vm.buffer`` ops (dispatch.c). ``load``/``store``/``fill`` offsets and lengths are in elements of the
op's width; ``copy``, ``compare``, ``clone`` and ``hash`` use bytes (docs/iree-3.13-runtime-facts.md §3.4). Errors are
``VmStatusError`` with IREE's status code and message; the interpreter turns them into a trap."""

from __future__ import annotations

import struct

import numpy as np

from engine.runtime.vm import numeric as N
from engine.runtime.vm.handlers import M32, CompileEnv, handler, read_i64, ref, reg, write_i64
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import VmBuffer, ref_type_name


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
    o, w = reg(oraw), reg(wraw)
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
    o, v_ = reg(oraw), reg(vraw)
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
    o, ln, v_ = reg(oraw), reg(lraw), reg(vraw)
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


@handler("BufferAlloc")
def _buffer_alloc(ins, env: CompileEnv):
    lraw, _align, wraw = ins.operands
    ln = reg(lraw)
    w, _ = ref(wraw)
    n = env.next_pc

    def h(i, r, t):
        length = read_i64(i, ln)
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
    o, ln = reg(oraw), reg(lraw)
    w, _ = ref(wraw)
    n = env.next_pc

    def h(i, r, t):
        src = _buffer(r[s], "source")
        off, length = read_i64(i, o), read_i64(i, ln)
        if off + length > src.length:
            raise _oob(off, length, 1, src)
        r[w] = VmBuffer(src.data[off : off + length].copy(), True, "clone")
        return n

    return h


@handler("BufferLength")
def _buffer_length(ins, env: CompileEnv):
    braw, wraw = ins.operands
    b, _ = ref(braw)
    w = reg(wraw)
    n = env.next_pc

    def h(i, r, t):
        write_i64(i, w, _buffer(r[b], "buffer").length)
        return n

    return h


@handler("BufferCopy")
def _buffer_copy(ins, env: CompileEnv):
    sraw, soraw, draw, doraw, lraw = ins.operands
    s, _ = ref(sraw)
    d, _ = ref(draw)
    so, do, ln = reg(soraw), reg(doraw), reg(lraw)
    n = env.next_pc

    def h(i, r, t):
        src = _buffer(r[s], "source_buffer")
        dst = _buffer(r[d], "target_buffer")
        soff, doff, length = read_i64(i, so), read_i64(i, do), read_i64(i, ln)
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
    ao, bo, ln, w = reg(aoraw), reg(boraw), reg(lraw), reg(wraw)
    n = env.next_pc

    def h(i, r, t):
        lhs = _buffer(r[a], "lhs_buffer")
        rhs = _buffer(r[b], "rhs_buffer")
        aoff, boff, length = read_i64(i, ao), read_i64(i, bo), read_i64(i, ln)
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
    o, ln, w = reg(oraw), reg(lraw), reg(wraw)
    n = env.next_pc

    def h(i, r, t):
        src = _buffer(r[s], "source_buffer")
        off, length = read_i64(i, o), read_i64(i, ln)
        if off + length > src.length:
            raise _oob(off, length, 1, src)
        write_i64(i, w, fnv1a_64(bytes(src.data[off : off + length])))
        return n

    return h
