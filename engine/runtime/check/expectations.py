"""The comparisons of IREE's ``check`` module, as pure functions over plain data.

These follow ``runtime/src/iree/modules/check/module.cc`` of IREE 3.13: which element types each expectation
accepts, how values are compared (bytes for ``expect_eq``; NumPy-``isclose``-like with an asymmetric
tolerance for ``expect_almost_eq``) and the text of the failure messages. Each function returns ``None``
when the expectation holds and the failure message when it does not; an operand the expectation cannot
read (an unsupported element type) raises ``CheckError``, which IREE reports as an INVALID_ARGUMENT status
that stops the program.

The compiler passes ``expect_almost_eq`` its tolerances as two ``f32`` arguments; when the source omits
them it passes its defaults, ``atol 1e-4`` and ``rtol 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from engine.errors import LensError
from engine.runtime import element_types as et
from engine.runtime.element_types import ElementType
from engine.runtime.function_io import Tensor, format_tensor
from engine.runtime.hal.constants import format_shape_and_type

# What the compiler passes when ``check.expect_almost_eq`` is written without tolerances (CheckOps.td).
DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 0.0
# ``iree_hal_buffer_view_format`` as the check module calls it.
FORMAT_MAX_ELEMENTS = 1024


class CheckError(LensError):
    """An expectation was given an operand it cannot compare (IREE: INVALID_ARGUMENT, the call fails)."""


@dataclass(frozen=True)
class Operand:
    """A buffer view's contents on the host: element type, shape and its ``byte_length`` raw bytes."""

    element_type: ElementType
    shape: tuple[int, ...]
    data: np.ndarray  # uint8, dense row-major

    @classmethod
    def from_tensor(cls, tensor: Tensor) -> Operand:
        raw = np.ascontiguousarray(tensor.array).reshape(-1).view(np.uint8)
        return cls(tensor.element_type, tuple(tensor.array.shape), raw)

    @classmethod
    def from_bytes(cls, element_type: int | ElementType, shape, data) -> Operand:
        if not isinstance(element_type, ElementType):
            element_type = ElementType(int(element_type) & 0xFFFFFFFF)
        raw = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data
        return cls(element_type, tuple(int(d) for d in shape), raw.reshape(-1).view(np.uint8))


# ------------------------------------------------------------------------------------------ element types

# expect_all_true reads these types, with these storage dtypes (IREE: a switch over element types;
# note that IREE lists neither bool (i1) nor f16 here).
_TRUTH_DTYPES = {
    et.make(et.INTEGER, 8).code: "<i1",
    et.make(et.SINT, 8).code: "<i1",
    et.make(et.UINT, 8).code: "<u1",
    et.make(et.INTEGER, 16).code: "<i2",
    et.make(et.SINT, 16).code: "<i2",
    et.make(et.UINT, 16).code: "<u2",
    et.make(et.INTEGER, 32).code: "<i4",
    et.make(et.SINT, 32).code: "<i4",
    et.make(et.UINT, 32).code: "<u4",
    et.make(et.INTEGER, 64).code: "<i8",
    et.make(et.SINT, 64).code: "<i8",
    et.make(et.UINT, 64).code: "<u8",
    et.F32.code: "<f4",
    et.F64.code: "<f8",
}

# 8-bit float formats: (exponent bits, mantissa bits, exponent bias, special-value rule).
_F8_FORMATS = {
    et.make(et.F8_E5M2, 8).code: (5, 2, 15, "ieee"),
    et.make(et.F8_E4M3FN, 8).code: (4, 3, 7, "fn"),
    et.make(et.F8_E5M2FNUZ, 8).code: (5, 2, 16, "fnuz"),
    et.make(et.F8_E4M3FNUZ, 8).code: (4, 3, 8, "fnuz"),
    et.make(et.F8_E8M0FNU, 8).code: (8, 0, 127, "e8m0"),
}


@cache
def _f8_values(code: int) -> np.ndarray:
    """float32 value of each of the 256 encodings of an 8-bit float format."""
    exp_bits, man_bits, bias, rule = _F8_FORMATS[code]
    out = np.empty(256, dtype=np.float32)
    exp_max, man_max = (1 << exp_bits) - 1, (1 << man_bits) - 1
    for bits in range(256):
        if rule == "e8m0":  # unsigned powers of two; all ones is NaN
            out[bits] = math.nan if bits == 0xFF else math.ldexp(1.0, bits - bias)
            continue
        sign = -1.0 if bits & 0x80 else 1.0
        exponent = (bits >> man_bits) & exp_max
        mantissa = bits & man_max
        if rule == "fnuz" and bits == 0x80:  # the only NaN; there is no negative zero
            value = math.nan
        elif rule == "ieee" and exponent == exp_max:
            value = sign * math.inf if mantissa == 0 else math.nan
        elif rule == "fn" and exponent == exp_max and mantissa == man_max:
            value = math.nan
        elif exponent == 0:
            value = sign * math.ldexp(mantissa / (1 << man_bits), 1 - bias)
        else:
            value = sign * math.ldexp(1.0 + mantissa / (1 << man_bits), exponent - bias)
        out[bits] = value
    return out


def _floats(operand: Operand) -> np.ndarray | None:
    """The operand's values as float64 through the arithmetic type IREE loads them into, or None."""
    with np.errstate(invalid="ignore"):  # signalling NaNs stay NaNs
        return _floats_of(operand.element_type.code, operand.data)


def _floats_of(code: int, raw: np.ndarray) -> np.ndarray | None:
    if code == et.F64.code:
        return raw.view("<f8").astype(np.float64)
    if code == et.F32.code:
        return raw.view("<f4").astype(np.float64)
    if code == et.F16.code:
        return raw.view("<f2").astype(np.float64)
    if code == et.BF16.code:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if code in _F8_FORMATS:
        return _f8_values(code)[raw].astype(np.float64)
    return None


def _unsupported(element_type: ElementType) -> CheckError:
    return CheckError(f"unsupported element type {element_type.name}")


# --------------------------------------------------------------------------------------------- formatting


def format_operand(operand: Operand) -> str:
    """``2x3xf32=[1 2 3][4 5 6]`` as ``iree_hal_buffer_view_format`` prints it (at most 1024 elements)."""
    element_type, shape = operand.element_type, operand.shape
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    floats = _floats(operand) if element_type.code in _F8_FORMATS else None
    if floats is not None:
        # format_tensor prints f32 values; only the type in the prefix differs.
        text = format_tensor(Tensor(floats.astype(np.float32).reshape(shape), et.F32), FORMAT_MAX_ELEMENTS)
        return text.replace("f32=", f"{element_type.name}=", 1)
    dtype = element_type.dtype
    if element_type.bit_count % 8 or dtype.itemsize * count != operand.data.size:
        # Sub-byte or odd-sized types: show the raw bytes.
        return f"{format_shape_and_type(shape, element_type.name)}=<{operand.data.tobytes().hex()}>"
    array = operand.data.view(dtype).reshape(shape)
    return format_tensor(Tensor(array, element_type), FORMAT_MAX_ELEMENTS)


def _lhs_rhs(lhs: Operand, rhs: Operand) -> str:
    return f"\n  lhs:\n    {format_operand(lhs)}\n  rhs:\n    {format_operand(rhs)}"


# -------------------------------------------------------------------------------------------- expectations


def _i32(value: int) -> int:
    value = int(value) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def expect_true(operand: int) -> str | None:
    """``check.expect_true(%i32)``: the value is nonzero."""
    value = _i32(operand)
    return None if value != 0 else f"Expected {value} to be nonzero."


def expect_false(operand: int) -> str | None:
    """``check.expect_false(%i32)``: the value is zero."""
    value = _i32(operand)
    return None if value == 0 else f"Expected {value} to be zero."


def expect_all_true(operand: Operand) -> str | None:
    """``check.expect_all_true(%tensor)``: every element is nonzero (integer, f32 or f64 elements)."""
    dtype = _TRUTH_DTYPES.get(operand.element_type.code)
    if dtype is None:
        raise _unsupported(operand.element_type)
    itemsize = np.dtype(dtype).itemsize
    values = operand.data[: operand.data.size - operand.data.size % itemsize].view(dtype)
    zero = np.flatnonzero(values == 0)
    if zero.size == 0:
        return None
    return (
        f"Expected all elements to be nonzero. Element #{int(zero[0])} is zero "
        f"({zero.size} of {values.size} are).\n  operand:\n    {format_operand(operand)}"
    )


def expect_eq(lhs: Operand, rhs: Operand) -> str | None:
    """``check.expect_eq``: same element type, same shape and the same bytes."""
    types_eq = lhs.element_type.code == rhs.element_type.code
    shapes_eq = lhs.shape == rhs.shape
    contents_eq = lhs.data.size == rhs.data.size and np.array_equal(lhs.data, rhs.data)
    if types_eq and shapes_eq and contents_eq:
        return None
    text = "Expected equality of these values."
    if not types_eq:
        text += " Element types do not match."
    if not shapes_eq:
        text += " Shapes do not match."
    if not contents_eq:
        text += " Contents does not match."
    return text + _lhs_rhs(lhs, rhs)


def fuzzy_equal(actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Element-wise ``iree_math_fuzzy_compare_f64``: equal, both NaN, or ``|a - e| <= atol + rtol * |e|``
    with a finite expected (rhs) value; the rtol term scales with the expected value only."""
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isfinite(expected) & (np.abs(actual - expected) <= atol + rtol * np.abs(expected))
        return (actual == expected) | (np.isnan(actual) & np.isnan(expected)) | close


def expect_almost_eq(
    lhs: Operand, rhs: Operand, atol: float = DEFAULT_ATOL, rtol: float = DEFAULT_RTOL
) -> str | None:
    """``check.expect_almost_eq``: same element type and shape, float values within ``atol``/``rtol``.

    The tolerances are f32 in IREE (the import's arguments); the comparison runs in double precision.
    """
    atol, rtol = float(np.float32(atol)), float(np.float32(rtol))
    types_eq = lhs.element_type.code == rhs.element_type.code
    shapes_eq = lhs.shape == rhs.shape
    first_bad = None
    if types_eq and shapes_eq:
        actual, expected = _floats(lhs), _floats(rhs)
        if actual is None or expected is None:
            raise _unsupported(lhs.element_type)
        n = min(actual.size, expected.size)
        ok = fuzzy_equal(actual[:n], expected[:n], atol, rtol)
        if not ok.all():
            i = int(np.argmin(ok))
            first_bad = (i, float(actual[i]), float(expected[i]))
    if types_eq and shapes_eq and first_bad is None:
        return None
    text = "Expected near equality of these values."
    if not types_eq:
        text += " Element types do not match."
    if not shapes_eq:
        text += " Shapes do not match."
    if first_bad is not None:
        i, a, e = first_bad
        text += (
            f" Contents does not match to tolerance parameters atol={atol:g}, rtol={rtol:g}. The first failure "
            f"occurs at index {i} as the lhs value {a:g} differs from the rhs value {e:g} by {e - a:.3e}."
        )
    return text + _lhs_rhs(lhs, rhs)
