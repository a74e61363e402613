"""IREE's HAL element types (``iree_hal_element_type_t``) and their numpy counterparts.

An element type is ``numerical_type << 24 | bit_count`` (``iree/hal/buffer_view.h``). Names are the ones
IREE prints and parses (``f32``, ``i8``, ``si32``, ``ui16``, ``bf16``, ``i1``...).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UNKNOWN, INTEGER, SINT, UINT, BOOLEAN = 0x00, 0x10, 0x11, 0x12, 0x13
FLOAT_IEEE, FLOAT_BRAIN, FLOAT_COMPLEX = 0x21, 0x22, 0x23
F8_E5M2, F8_E4M3FN, F8_E5M2FNUZ, F8_E4M3FNUZ, F8_E8M0FNU = 0x24, 0x25, 0x26, 0x27, 0x28

_SPECIAL_NAMES = {
    F8_E5M2: "f8E5M2",
    F8_E4M3FN: "f8E4M3FN",
    F8_E5M2FNUZ: "f8E5M2FNUZ",
    F8_E4M3FNUZ: "f8E4M3FNUZ",
    F8_E8M0FNU: "f8E8M0FNU",
}
_PREFIX = {INTEGER: "i", SINT: "si", UINT: "ui", FLOAT_IEEE: "f", FLOAT_BRAIN: "bf", FLOAT_COMPLEX: "cf"}


@dataclass(frozen=True)
class ElementType:
    """One HAL element type: its 32-bit code, with its name, size and numpy storage dtype."""

    code: int

    @property
    def numerical_type(self) -> int:
        return (self.code >> 24) & 0xFF

    @property
    def bit_count(self) -> int:
        return self.code & 0xFF

    @property
    def byte_size(self) -> int:
        return (self.bit_count + 7) // 8

    @property
    def packed(self) -> bool:
        """Several elements share a byte (``i4``, ``ui2``, a packed ``i1``): IREE packs them densely, low bits
        first (``iree_hal_element_packed_byte_count``); numpy has no such dtype."""
        return 0 < self.bit_count < 8

    def packed_byte_count(self, element_count: int) -> int:
        return (element_count * self.bit_count + 7) // 8

    @property
    def name(self) -> str:
        nt = self.numerical_type
        if nt in _SPECIAL_NAMES:
            return _SPECIAL_NAMES[nt]
        if nt == BOOLEAN:
            return "i1"
        return f"{_PREFIX.get(nt, '*')}{self.bit_count}"

    @property
    def is_float(self) -> bool:
        return (self.numerical_type & 0x20) == 0x20

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype that stores this type (raw bits for types numpy lacks, such as bf16)."""
        nt, bits = self.numerical_type, self.bit_count
        if nt == BOOLEAN:
            return np.dtype(np.bool_) if bits == 8 else np.dtype(np.uint8)
        if nt in (INTEGER, SINT) and bits in (8, 16, 32, 64):
            return np.dtype(f"int{bits}")
        if nt == UINT and bits in (8, 16, 32, 64):
            return np.dtype(f"uint{bits}")
        if nt == FLOAT_IEEE and bits in (16, 32, 64):
            return np.dtype(f"float{bits}")
        if nt == FLOAT_COMPLEX and bits in (64, 128):
            return np.dtype(f"complex{bits}")
        for size, raw in ((1, np.uint8), (2, np.uint16), (4, np.uint32), (8, np.uint64)):
            if self.byte_size <= size:
                return np.dtype(raw)
        return np.dtype((np.void, self.byte_size))

    def __str__(self) -> str:
        return self.name


def unpack(raw: np.ndarray, element: ElementType, shape: tuple[int, ...]) -> np.ndarray:
    """The packed elements in ``raw`` (IREE's layout: element k in bits ``k*b .. k*b+b-1``, low bits first),
    one a byte and shaped: ``int8`` sign-extended for signed and signless integers, ``uint8`` for unsigned
    and booleans. ``ValueError`` when ``raw`` is too short."""
    bits = element.bit_count
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    data = np.asarray(raw).reshape(-1).view(np.uint8)
    if data.size < element.packed_byte_count(count):
        raise ValueError(f"{count} {element.name} elements need {element.packed_byte_count(count)} bytes; {data.size} given")
    at = np.arange(count, dtype=np.int64) * bits
    window = data[at // 8].astype(np.uint16)
    padded = np.concatenate([data, np.zeros(1, np.uint8)])
    window |= padded[at // 8 + 1].astype(np.uint16) << 8  # an element that straddles two bytes (i3, i5...)
    values = (window >> (at % 8).astype(np.uint16)) & ((1 << bits) - 1)
    if element.numerical_type in (INTEGER, SINT):
        signed = values.astype(np.int16)
        return np.where(signed >= 1 << (bits - 1), signed - (1 << bits), signed).astype(np.int8).reshape(shape)
    return values.astype(np.uint8).reshape(shape)


# The ml_dtypes type of each element type numpy lacks, by IREE's name: the one table for the runtime's parsing
# and printing (function_io) and the dispatch layer's typing (tensor_types). .npy keeps them as their bits.
ML_DTYPE_NAMES = {
    "bf16": "bfloat16",
    "f8E5M2": "float8_e5m2",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E5M2FNUZ": "float8_e5m2fnuz",
    "f8E4M3FNUZ": "float8_e4m3fnuz",
    "f8E8M0FNU": "float8_e8m0fnu",
}


def ml_dtype(name: str) -> np.dtype | None:
    """The ml_dtypes type of the element type IREE names ``name`` (``bf16``, ``f8E4M3FN``...); None for others."""
    attribute = ML_DTYPE_NAMES.get(name)
    if attribute is None:
        return None
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, attribute))


def make(numerical_type: int, bit_count: int) -> ElementType:
    return ElementType((numerical_type << 24) | bit_count)


F16, F32, F64, BF16 = make(FLOAT_IEEE, 16), make(FLOAT_IEEE, 32), make(FLOAT_IEEE, 64), make(FLOAT_BRAIN, 16)
I1 = make(BOOLEAN, 8)
I8, I16, I32, I64 = (make(INTEGER, b) for b in (8, 16, 32, 64))


def parse_element_type(name: str) -> ElementType:
    """The element type named ``name`` the way IREE spells it (``f32``, ``i8``, ``ui32``, ``bf16``, ``i1``)."""
    for nt, special in _SPECIAL_NAMES.items():
        if name == special:
            return make(nt, 8)
    if name == "i1":
        return I1
    for prefix, nt in (
        ("bf", FLOAT_BRAIN),
        ("cf", FLOAT_COMPLEX),
        ("si", SINT),
        ("ui", UINT),
        ("i", INTEGER),
        ("f", FLOAT_IEEE),
    ):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            return make(nt, int(name[len(prefix) :]))
    raise ValueError(f"unknown element type {name!r}")


def element_type_for_dtype(dtype: np.dtype) -> ElementType:
    """The element type IREE uses for a numpy array of ``dtype`` (signless integers, like iree-run-module)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return I1
    if dtype.kind == "i":
        return make(INTEGER, dtype.itemsize * 8)
    if dtype.kind == "u":
        return make(UINT, dtype.itemsize * 8)
    if dtype.kind == "f":
        return make(FLOAT_IEEE, dtype.itemsize * 8)
    if dtype.kind == "c":
        return make(FLOAT_COMPLEX, dtype.itemsize * 8)
    raise ValueError(f"numpy dtype {dtype} has no IREE element type")
