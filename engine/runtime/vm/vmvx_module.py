"""The ``vmvx`` native module: the microkernels VMVX executables import when compiled with
``--iree-vmvx-enable-microkernels`` (``vmvx.add.2d.f32``, ``vmvx.copy.2d.x32``, ``vmvx.mmt4d``...).

Our own implementation of the functions IREE's module (``runtime/src/iree/modules/vmvx``) exports, with the
same names, calling conventions and results:

* 2-D operands are (buffer, offset, stride0, stride1) with offset and strides counted in elements; the
  shape (size0, size1) is shared. Elements live at ``offset + i*stride0 + j*stride1``.
* f32 arithmetic is done in float32, one IEEE operation per element as the C loops do (``rsqrt`` is
  ``1.0f / sqrtf(x)``); ``expf``/``logf`` come from the C math library, which IREE's runtime also calls.
* ``mmt4d``/``pack``/``unpack``/``query_tile_sizes.2d`` follow IREE's microkernels (``builtins/ukernel``),
  including the tile sizes its x86-64 code picks from the CPU's features and the fused multiply-add its
  architecture-specific f32 mmt4d tiles use.

Every function bounds-checks its operands against the buffers (``VmStatusError`` OUT_OF_RANGE) the way
IREE's ``iree_vm_buffer_map_ro/rw`` do before the kernel runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.runtime.vm.native import NativeModule, StatusCode, VmStatusError, export
from engine.runtime.vm.values import VmBuffer

# IREE_VMVX_MODULE_VERSION_LATEST (0.0): the version the VMVX executables' dependency asks for at least.
VMVX_MODULE_VERSION = 0

# Flag bits of the microkernels (``builtins/ukernel/exported_bits.h``).
MMT4D_TYPE_MASK = 0xFF
MMT4D_TYPE_F32F32F32 = 0x01
MMT4D_TYPE_S8S8S32 = 0x02
MMT4D_ACCUMULATE = 0x100
PACK_TYPE_MASK = 0xFF
PACK_TYPE_F32F32 = 0x01
PACK_TYPE_I8I8 = 0x02
PACK_TYPE_I32I32 = 0x03
PACK_TRANSPOSE_INNER = 0x100
PACK_TRANSPOSE_OUTER = 0x200
UNPACK_TYPE_F32F32 = 0x01
UNPACK_TYPE_I32I32 = 0x03
QUERY_ROLE_MASK = 0xFF
QUERY_ROLE_LHS = 0x01
QUERY_ROLE_RHS = 0x02
QUERY_ROLE_RESULT = 0x03
QUERY_OP_MASK = 0xFF00
QUERY_OP_MATMUL_F32F32F32 = 0x0100
QUERY_OP_MATMUL_I8I8I32 = 0x0200
_QUERY_MATMUL_OPS = (0x0100, 0x0200, 0x0300, 0x0400, 0x0500, 0x0600)


# ---------------------------------------------------------------------------------------------------------
# CPU features and C math functions (what IREE's runtime on this machine uses)


@functools.cache
def _x86_features() -> frozenset[str]:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _avx2_fma() -> bool:
    return {"avx2", "fma"} <= _x86_features()


def _avx512_base() -> bool:
    return _avx2_fma() and {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"} <= _x86_features()


def _avx512_vnni() -> bool:
    return _avx512_base() and "avx512_vnni" in _x86_features()


def matmul_tile_sizes(op: int) -> tuple[int, int, int] | None:
    """(M0, K0, N0) IREE's microkernels choose for a matmul ``op`` on this CPU, None for unknown ops."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        if op == QUERY_OP_MATMUL_F32F32F32:
            if _avx512_base():
                return (16, 1, 16)
            if _avx2_fma():
                return (8, 1, 8)
            return (8, 1, 4)
        if op == QUERY_OP_MATMUL_I8I8I32:
            if _avx512_vnni():
                return (16, 2, 16)
            if _avx2_fma():
                return (8, 2, 8)
            return (8, 2, 4)
    if op in _QUERY_MATMUL_OPS:
        return (8, 4, 8)  # the generic fallback
    return None


def _f32_mmt4d_tile_is_fused(m0: int, n0: int, k0: int) -> bool:
    """Whether IREE's x86-64 code has an FMA tile function for this f32 mmt4d tile (else the generic C loop,
    built for baseline x86-64, multiplies and adds with two roundings)."""
    if k0 != 1:
        return False
    if n0 == 16 and m0 in (1, 2, 4, 8, 16):
        return _avx512_base()
    if n0 == 8 and m0 in (1, 2, 4, 8):
        return _avx2_fma()
    return False


@functools.cache
def _libm() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name or "libm.so.6")
    except OSError:
        return None
    for fn in ("expf", "logf"):
        getattr(lib, fn).restype = ctypes.c_float
        getattr(lib, fn).argtypes = [ctypes.c_float]
    return lib


def _c_unary_f32(name: str, x: np.ndarray) -> np.ndarray:
    """``expf``/``logf`` element by element through the C library (numpy's own float32 exp/log may differ
    from it in the last bit); numpy in float64 rounded to float32 where no C library can be loaded."""
    lib = _libm()
    if lib is None:
        return getattr(np, name[:-1])(x.astype(np.float64)).astype(np.float32)
    fn = getattr(lib, name)
    flat = x.reshape(-1)
    return np.fromiter((fn(float(v)) for v in flat), dtype=np.float32, count=flat.size).reshape(x.shape)


# ---------------------------------------------------------------------------------------------------------
# Strided views over VM buffers


def _buffer(ref: object, what: str) -> VmBuffer:
    if not isinstance(ref, VmBuffer):
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"{what}: expected a !vm.buffer, got {ref!r}")
    return ref


def _view(
    ref: object,
    what: str,
    dtype: np.dtype | type,
    offset: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    *,
    write: bool = False,
) -> np.ndarray:
    """A numpy view of ``shape`` elements of ``dtype`` at element ``offset`` with element ``strides``."""
    buf = _buffer(ref, what)
    if write and not buf.mutable:
        raise VmStatusError(StatusCode.PERMISSION_DENIED, f"{what}: buffer is read-only")
    dt = np.dtype(dtype)
    size = dt.itemsize
    if offset < 0 or any(n < 0 for n in shape) or any(s < 0 for s in strides):
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"{what}: negative offset, size or stride")
    if any(n == 0 for n in shape):
        return np.zeros(shape, dtype=dt)
    last = sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
    start = offset * size
    end = start + (last + 1) * size
    if end > buf.length:
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            f"{what}: elements [{offset}, {offset + last}] of {size} bytes exceed the buffer of {buf.length} bytes",
        )
    base = buf.data[start:end].view(dt)
    return as_strided(base, shape=shape, strides=tuple(s * size for s in strides), writeable=write)


def _elementwise_views(dtype, size0: int, size1: int, *operands) -> list[np.ndarray]:
    """Views of (ref, offset, stride0, stride1, name) operands; the last one is the written output."""
    views = []
    for k, (ref, off, s0, s1, name) in enumerate(operands):
        views.append(_view(ref, name, dtype, off, (size0, size1), (s0, s1), write=k == len(operands) - 1))
    return views


def _u32(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32) if a.dtype != np.uint32 else a


def _ctlz_u32(x: np.ndarray) -> np.ndarray:
    # frexp of a uint32 in float64 is exact: x = m * 2**e with m in [0.5, 1), so e is the bit length.
    _, e = np.frexp(x.astype(np.float64))
    return (32 - e.astype(np.int64)).astype(np.uint32)


def _div_signed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0) or np.any((a == -(2**31)) & (b == -1)):
        # The C kernel traps (SIGFPE) here; report it instead of crashing.
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, "divs.2d.i32: integer division overflow or by zero")
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    q = np.abs(a64) // np.abs(b64)
    return np.where((a64 < 0) != (b64 < 0), -q, q).astype(np.int32)  # C truncates toward zero


def _div_unsigned(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, "divu.2d.i32: integer division by zero")
    return a // b


def _f32_bin(op):
    def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return op(a.view(np.float32), b.view(np.float32)).astype(np.float32).view(np.uint32)

    return f


def _i32_bin(op):
    def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return op(a.view(np.int32), b.view(np.int32)).astype(np.int32).view(np.uint32)

    return f


def _shift_amount(b: np.ndarray) -> np.ndarray:
    # x86 scalar shifts use the count modulo 32 (C leaves counts >= 32 undefined).
    return b & np.uint32(31)


# x32b kernels: (uint32 lhs, uint32 rhs) -> uint32 bits.
_BINARY: dict[str, object] = {
    "add.2d.f32": _f32_bin(np.add),
    "sub.2d.f32": _f32_bin(np.subtract),
    "mul.2d.f32": _f32_bin(np.multiply),
    "div.2d.f32": _f32_bin(np.divide),
    "add.2d.i32": lambda a, b: a + b,
    "sub.2d.i32": lambda a, b: a - b,
    "mul.2d.i32": lambda a, b: a * b,
    "divs.2d.i32": _i32_bin(_div_signed),
    "divu.2d.i32": _div_unsigned,
    "and.2d.i32": lambda a, b: a & b,
    "or.2d.i32": lambda a, b: a | b,
    "xor.2d.i32": lambda a, b: a ^ b,
    "shl.2d.i32": lambda a, b: a << _shift_amount(b),
    "shrs.2d.i32": lambda a, b: (a.view(np.int32) >> _shift_amount(b).astype(np.int32)).view(np.uint32),
    "shru.2d.i32": lambda a, b: a >> _shift_amount(b),
}


def _f32_un(fn):
    def f(x: np.ndarray) -> np.ndarray:
        return np.asarray(fn(x.view(np.float32)), dtype=np.float32).view(np.uint32)

    return f


# x32u kernels: uint32 bits -> uint32 bits.
_UNARY: dict[str, object] = {
    "abs.2d.f32": lambda x: x & np.uint32(0x7FFFFFFF),  # fabsf clears the sign bit (NaN payloads kept)
    "neg.2d.f32": lambda x: x ^ np.uint32(0x80000000),  # -x flips the sign bit
    "ceil.2d.f32": _f32_un(np.ceil),
    "floor.2d.f32": _f32_un(np.floor),
    "exp.2d.f32": _f32_un(lambda x: _c_unary_f32("expf", x)),
    "log.2d.f32": _f32_un(lambda x: _c_unary_f32("logf", x)),
    "rsqrt.2d.f32": _f32_un(lambda x: np.float32(1.0) / np.sqrt(x)),
    "ctlz.2d.i32": _ctlz_u32,
}


class VmvxModule(NativeModule):
    """IREE's ``vmvx`` module (version 0): 2-D elementwise, copy and fill kernels, mmt4d, pack, unpack and
    the tile-size query. Stateless: one instance may serve every executable."""

    name = "vmvx"
    version = VMVX_MODULE_VERSION

    def __init__(self) -> None:
        super().__init__()
        # The elementwise kernels share two signatures; register them from the tables.
        for local_name, op in _BINARY.items():
            self._register(local_name, "0rIIIrIIIrIIIII_v", self._binary_kernel(local_name, op))
        for local_name, op in _UNARY.items():
            self._register(local_name, "0rIIIrIIIII_v", self._unary_kernel(local_name, op))
        for bits in (8, 16, 32, 64):
            self._register(f"copy.2d.x{bits}", "0rIIIrIIIII_v", self._copy_kernel(f"copy.2d.x{bits}", bits))

    def _register(self, local_name: str, cconv: str, fn) -> None:
        from engine.runtime.vm.native import NativeFunction

        self.functions[local_name] = NativeFunction(local_name, cconv, fn)

    @staticmethod
    def _binary_kernel(local_name: str, op):
        def kernel(
            lhs, lhs_off, lhs_s0, lhs_s1, rhs, rhs_off, rhs_s0, rhs_s1, out, out_off, out_s0, out_s1, n0, n1
        ):
            a, b, o = _elementwise_views(
                np.uint32,
                n0,
                n1,
                (lhs, lhs_off, lhs_s0, lhs_s1, f"{local_name} lhs"),
                (rhs, rhs_off, rhs_s0, rhs_s1, f"{local_name} rhs"),
                (out, out_off, out_s0, out_s1, f"{local_name} out"),
            )
            if o.size:
                with np.errstate(all="ignore"):
                    o[...] = _u32(np.asarray(op(np.ascontiguousarray(a), np.ascontiguousarray(b))))

        return kernel

    @staticmethod
    def _unary_kernel(local_name: str, op):
        def kernel(inp, in_off, in_s0, in_s1, out, out_off, out_s0, out_s1, n0, n1):
            x, o = _elementwise_views(
                np.uint32,
                n0,
                n1,
                (inp, in_off, in_s0, in_s1, f"{local_name} in"),
                (out, out_off, out_s0, out_s1, f"{local_name} out"),
            )
            if o.size:
                with np.errstate(all="ignore"):
                    o[...] = _u32(np.asarray(op(np.ascontiguousarray(x))))

        return kernel

    @staticmethod
    def _copy_kernel(local_name: str, bits: int):
        dtype = np.dtype(f"u{bits // 8}")

        def kernel(inp, in_off, in_s0, in_s1, out, out_off, out_s0, out_s1, n0, n1):
            x, o = _elementwise_views(
                dtype,
                n0,
                n1,
                (inp, in_off, in_s0, in_s1, f"{local_name} in"),
                (out, out_off, out_s0, out_s1, f"{local_name} out"),
            )
            if o.size:
                o[...] = x.copy()  # copy first: source and destination may overlap

        return kernel

    @export("fill.2d.x32", "0irIIII_v")
    def fill_2d_x32(self, value: int, out, out_off: int, row_stride: int, n0: int, n1: int) -> None:
        o = _view(out, "fill.2d.x32 out", np.int32, out_off, (n0, n1), (row_stride, 1), write=True)
        if o.size:
            o[...] = np.int32(np.uint32(value & 0xFFFFFFFF).view(np.int32))

    @export("mmt4d", "0rIIrIIrIIIIIiiii_v")
    def mmt4d(
        self,
        lhs,
        lhs_off,
        lhs_stride,
        rhs,
        rhs_off,
        rhs_stride,
        out,
        out_off,
        out_stride,
        m,
        n,
        k,
        m0,
        n0,
        k0,
        flags,
    ) -> None:
        flags &= 0xFFFFFFFF
        kind = flags & MMT4D_TYPE_MASK
        if kind == MMT4D_TYPE_F32F32F32:
            in_dt, out_dt = np.float32, np.float32
        elif kind == MMT4D_TYPE_S8S8S32:
            in_dt, out_dt = np.int8, np.int32
        else:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "unhandled flags")
        if min(m, n, k, m0, n0, k0) < 0:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "mmt4d: negative size")
        a = _view(lhs, "mmt4d lhs", in_dt, lhs_off, (m, k, m0, k0), (lhs_stride, m0 * k0, k0, 1))
        b = _view(rhs, "mmt4d rhs", in_dt, rhs_off, (n, k, n0, k0), (rhs_stride, n0 * k0, k0, 1))
        o = _view(out, "mmt4d out", out_dt, out_off, (m, n, m0, n0), (out_stride, m0 * n0, n0, 1), write=True)
        accumulate = bool(flags & MMT4D_ACCUMULATE)
        if m == 0 or n == 0 or (k == 0 and accumulate):
            return
        if kind == MMT4D_TYPE_S8S8S32:
            acc = o.astype(np.int64) if accumulate else np.zeros(o.shape, np.int64)
            acc += np.einsum("ikac,jkbc->ijab", a.astype(np.int64), b.astype(np.int64))
            o[...] = acc.astype(np.int32)  # int32 wraps; the sum mod 2**32 does not depend on order
            return
        # f32: one rounding per step, in the order of the C loops (k, then k0), fused where IREE's tile is.
        fused = _f32_mmt4d_tile_is_fused(m0, n0, k0)
        acc = o.copy() if accumulate else np.zeros(o.shape, np.float32)
        with np.errstate(all="ignore"):
            for kk in range(k):
                for c in range(k0):
                    x = a[:, kk, :, c][:, None, :, None]  # (m, 1, m0, 1)
                    y = b[:, kk, :, c][None, :, None, :]  # (1, n, 1, n0)
                    if fused:
                        # The float64 product of two float32 is exact; one rounding to float32 after the add.
                        acc = (acc.astype(np.float64) + x.astype(np.float64) * y.astype(np.float64)).astype(
                            np.float32
                        )
                    else:
                        acc = (acc + (x * y).astype(np.float32)).astype(np.float32)
        o[...] = acc

    @export("pack", "0rIIIrIIIIIIIIIIi_v")
    def pack(
        self,
        inp,
        in_off,
        in_s0,
        in_s1,
        out,
        out_off,
        out_s0,
        out_s1,
        in_n0,
        in_n1,
        o0,
        o1,
        o2,
        o3,
        padding,
        flags,
    ) -> None:
        flags &= 0xFFFFFFFF
        kind = flags & PACK_TYPE_MASK
        if kind == PACK_TYPE_F32F32 or kind == PACK_TYPE_I32I32:
            dt = np.dtype(np.uint32)
        elif kind == PACK_TYPE_I8I8:
            dt = np.dtype(np.uint8)
        else:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "unhandled flags")
        if min(in_n0, in_n1, o0, o1, o2, o3) < 0:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "pack: negative size")
        src = _view(inp, "pack in", dt, in_off, (in_n0, in_n1), (in_s0, in_s1))
        dst = _view(out, "pack out", dt, out_off, (o0, o1, o2, o3), (out_s0, out_s1, o3, 1), write=True)
        if 0 in (o0, o1, o2, o3):
            return
        outer0, outer1, tile0, tile1 = o0, o1, o2, o3
        if flags & PACK_TRANSPOSE_OUTER:
            outer0, outer1 = outer1, outer0
        if flags & PACK_TRANSPOSE_INNER:
            tile0, tile1 = tile1, tile0
        if outer0 * tile0 < in_n0 or outer1 * tile1 < in_n1:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "pack: output tiles do not cover the input")
        pad = np.asarray(padding & ((1 << (8 * dt.itemsize)) - 1), dtype=np.uint64).astype(dt)
        full = np.full((outer0 * tile0, outer1 * tile1), pad, dtype=dt)
        full[:in_n0, :in_n1] = src
        tiles = full.reshape(outer0, tile0, outer1, tile1).transpose(0, 2, 1, 3)
        if flags & PACK_TRANSPOSE_OUTER:
            tiles = tiles.transpose(1, 0, 2, 3)
        if flags & PACK_TRANSPOSE_INNER:
            tiles = tiles.transpose(0, 1, 3, 2)
        dst[...] = tiles

    @export("unpack", "0rIIIrIIIIIIIIIi_v")
    def unpack(
        self, inp, in_off, in_s0, in_s1, out, out_off, out_s0, out_s1, i0, i1, i2, i3, out_n0, out_n1, flags
    ):
        flags &= 0xFFFFFFFF
        kind = flags & PACK_TYPE_MASK
        if kind not in (UNPACK_TYPE_F32F32, UNPACK_TYPE_I32I32):
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "unhandled flags")
        if min(i0, i1, i2, i3, out_n0, out_n1) < 0:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "unpack: negative size")
        dt = np.dtype(np.uint32)
        src = _view(inp, "unpack in", dt, in_off, (i0, i1, i2, i3), (in_s0, in_s1, i3, 1))
        dst = _view(out, "unpack out", dt, out_off, (out_n0, out_n1), (out_s0, out_s1), write=True)
        if out_n0 == 0 or out_n1 == 0:
            return
        tiles = src
        if flags & PACK_TRANSPOSE_OUTER:
            tiles = tiles.transpose(1, 0, 2, 3)
        if flags & PACK_TRANSPOSE_INNER:
            tiles = tiles.transpose(0, 1, 3, 2)
        outer0, outer1, tile0, tile1 = tiles.shape
        if outer0 * tile0 < out_n0 or outer1 * tile1 < out_n1:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, "unpack: input tiles do not cover the output")
        full = tiles.transpose(0, 2, 1, 3).reshape(outer0 * tile0, outer1 * tile1)
        dst[...] = full[:out_n0, :out_n1].copy()

    @export("query_tile_sizes.2d", "0IIi_II")
    def query_tile_sizes_2d(self, size0: int, size1: int, flags: int) -> tuple[int, int]:
        flags &= 0xFFFFFFFF
        sizes = matmul_tile_sizes(flags & QUERY_OP_MASK)
        if sizes is None:
            return (0, 0)  # IREE leaves the results unset for operations it does not know
        tm, tk, tn = sizes
        role = flags & QUERY_ROLE_MASK
        if role == QUERY_ROLE_LHS:
            return (tm, tk)
        if role == QUERY_ROLE_RHS:
            return (tn, tk)
        if role == QUERY_ROLE_RESULT:
            return (tm, tn)
        return (0, 0)
