"""Numeric semantics of IREE's VM (``runtime/src/iree/vm/ops.h``) on raw register words.

Registers hold unsigned 32-bit words (Python ints in ``0 .. 2**32-1``); an f32 is its IEEE bits, an
i64/f64 is a pair of words, low word first. These helpers convert between words and Python values with
C's rounding, so results are bit-identical to the C runtime:

* f32 add/sub/mul/div/sqrt are computed in double and rounded once to float32, which is exact for
  these operations (a double has more than 2*24+2 mantissa bits);
* transcendentals call the C library's ``*f`` functions through ctypes (the same glibc libm IREE's
  runtime uses), not numpy's vectorised approximations;
* float→int casts are ``lroundf``/``llroundf`` (round half away from zero), ``rem`` is IEEE ``remainder``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF
SIGN32 = 0x80000000
SIGN64 = 0x8000000000000000

_U32 = struct.Struct("<I")
_F32 = struct.Struct("<f")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")

F32_INF_BITS = 0x7F800000
F32_NEG_INF_BITS = 0xFF800000


def s32(word: int) -> int:
    """The signed value of a 32-bit word."""
    return word - 0x100000000 if word & SIGN32 else word


def s64(value: int) -> int:
    """The signed value of a 64-bit unsigned integer."""
    return value - 0x10000000000000000 if value & SIGN64 else value


def f32_of(bits: int) -> float:
    """The float value of f32 bits."""
    return _F32.unpack(_U32.pack(bits))[0]


def f32_bits(value: float) -> int:
    """The bits of ``value`` rounded to float32 the way a C ``(float)`` cast rounds (overflow gives ±inf)."""
    try:
        return _U32.unpack(_F32.pack(value))[0]
    except OverflowError:  # struct refuses finite values that round to inf; C gives inf
        return F32_INF_BITS if value > 0 else F32_NEG_INF_BITS


def f32_round(value: float) -> float:
    """``value`` rounded to the nearest float32, as a Python float."""
    return f32_of(f32_bits(value))


def f64_of(bits: int) -> float:
    return _F64.unpack(_U64.pack(bits))[0]


def f64_bits(value: float) -> int:
    return _U64.unpack(_F64.pack(value))[0]


# ---------------------------------------------------------------------------------------------------
# libm: the C functions IREE's ops.h calls.

_libm_path = ctypes.util.find_library("m") or "libm.so.6"
_libm = ctypes.CDLL(_libm_path)


def _libm_fn(name: str, nargs: int, ctype: type) -> object:
    fn = getattr(_libm, name)
    fn.restype = ctype
    fn.argtypes = [ctype] * nargs
    return fn


_F32_UNARY_NAMES = {
    "atan": "atanf",
    "cos": "cosf",
    "sin": "sinf",
    "exp": "expf",
    "exp2": "exp2f",
    "expm1": "expm1f",
    "log": "logf",
    "log10": "log10f",
    "log1p": "log1pf",
    "log2": "log2f",
    "tanh": "tanhf",
    "erf": "erff",
    "sqrt": "sqrtf",
    "ceil": "ceilf",
    "floor": "floorf",
    "round": "roundf",
}
_F64_UNARY_NAMES = {k: v[:-1] for k, v in _F32_UNARY_NAMES.items()}

LIBM_F32 = {k: _libm_fn(v, 1, ctypes.c_float) for k, v in _F32_UNARY_NAMES.items()}
LIBM_F64 = {k: _libm_fn(v, 1, ctypes.c_double) for k, v in _F64_UNARY_NAMES.items()}
LIBM_F32["atan2"] = _libm_fn("atan2f", 2, ctypes.c_float)
LIBM_F32["pow"] = _libm_fn("powf", 2, ctypes.c_float)
LIBM_F64["atan2"] = _libm_fn("atan2", 2, ctypes.c_double)
LIBM_F64["pow"] = _libm_fn("pow", 2, ctypes.c_double)


# ---------------------------------------------------------------------------------------------------
# Rounding and casts (ops.h L520-600).


def c_round(x: float) -> float:
    """C ``round``: half away from zero (exact for doubles; for float32 inputs equals ``roundf``)."""
    if math.isnan(x) or math.isinf(x):
        return x
    r = math.floor(abs(x) + 0.5)
    # abs(x)+0.5 can round up for the largest doubles below .5; guard as C does.
    if r - abs(x) > 0.5:
        r -= 1.0
    return math.copysign(r, x)


def round_even(x: float) -> float:
    """``roundeven`` (ops.h's fallback computes the same result)."""
    if math.isnan(x) or math.isinf(x):
        return x
    return math.copysign(float(round(x)), x)


_LONG_MIN = -(1 << 63)


def llround(x: float) -> int:
    """C ``llround``/``lround`` on x86-64: NaN and out-of-range values give ``LONG_MIN``."""
    if math.isnan(x) or math.isinf(x):
        return _LONG_MIN
    r = int(c_round(x))
    if r < _LONG_MIN or r >= (1 << 63):
        return _LONG_MIN
    return r


def cast_f32_si32(x: float) -> int:
    """``(int32_t)lroundf(x)`` as a 32-bit word."""
    return llround(x) & M32


def cast_f32_si64(x: float) -> int:
    """``(int64_t)llroundf(x)`` as a 64-bit unsigned value."""
    return llround(x) & M64


def cast_f32_ui64(x: float) -> int:
    """``(uint64_t)roundf(x)``: x86-64 float→u64 conversion (out of range: 0x8000000000000000)."""
    r = c_round(x)
    if math.isnan(r) or r >= 18446744073709551616.0 or r <= -9223372036854775809.0:
        return SIGN64
    return int(r) & M64


def ctlz(value: int, width: int) -> int:
    return width - value.bit_length()


def c_div(a: int, b: int) -> int:
    """C truncating division of signed values."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_rem(a: int, b: int) -> int:
    """C remainder (sign of the dividend)."""
    return a - b * c_div(a, b)


def ieee_remainder(a: float, b: float) -> float:
    """``remainder``/``remainderf``: exact, so the double computation equals the float32 one."""
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or b == 0.0:
        return math.nan
    if math.isinf(b):
        return a
    return math.remainder(a, b)

