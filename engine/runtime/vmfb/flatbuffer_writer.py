"""A small FlatBuffer writer, the counterpart of ``flatbuffer.FlatBuffer`` for the few containers IREE Lens
writes back (a ``CDA1`` CUDA executable with an edited PTX module or with another build's kernels merged in).

Objects are laid out front to back: a table's vtable, then the table, then what its offset fields point at
(strings, vectors, child tables), so every ``uoffset`` points forward as FlatBuffers require. Scalars are
aligned to their size and vectors of 8-byte scalars to 8, relative to the buffer's start (IREE's verifier,
flatcc, checks alignment); a buffer placed after IREE's 64-byte executable header keeps that alignment.
No deduplication of vtables or strings: the containers written here are small.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.runtime.vmfb.flatbuffer import SCALAR_FORMATS


@dataclass(frozen=True)
class Scalar:
    kind: str  # a key of SCALAR_FORMATS: "u32", "i32", "u64"...
    value: int | float


@dataclass(frozen=True)
class Struct:
    """An inline struct: its bytes and their alignment."""

    data: bytes
    align: int = 4


@dataclass(frozen=True)
class String:
    value: str | bytes


@dataclass(frozen=True)
class ScalarVector:
    kind: str
    values: Sequence[int | float]


@dataclass(frozen=True)
class TableVector:
    tables: Sequence[TableValue]


@dataclass
class TableValue:
    """A table: ``fields[i]`` is field id ``i`` (None: absent, the reader sees its default)."""

    fields: list[Scalar | Struct | String | ScalarVector | TableVector | TableValue | None] = field(default_factory=list)


def build(root: TableValue, identifier: bytes | None = None) -> bytes:
    """The FlatBuffer whose root table is ``root`` (with a 4-byte file ``identifier`` when given)."""
    if identifier is not None and len(identifier) != 4:
        raise ValueError("a FlatBuffer file identifier is 4 bytes")
    out = bytearray(8 if identifier is not None else 4)
    if identifier is not None:
        out[4:8] = identifier
    position = _write_table(out, root)
    struct.pack_into("<I", out, 0, position)
    while len(out) % 8:
        out += b"\0"
    return bytes(out)


def _pad_to(out: bytearray, alignment: int, shift: int = 0) -> None:
    """Pad until ``(len(out) + shift) % alignment == 0``."""
    while (len(out) + shift) % alignment:
        out += b"\0"


def _inline_size(value) -> tuple[int, int]:
    """(size, alignment) of a field's inline part: offsets are 4 bytes."""
    if isinstance(value, Scalar):
        size = struct.calcsize(SCALAR_FORMATS[value.kind])
        return size, size
    if isinstance(value, Struct):
        return len(value.data), value.align
    return 4, 4


def _write_table(out: bytearray, table: TableValue) -> int:
    present = [(i, v) for i, v in enumerate(table.fields) if v is not None]
    # Inline layout after the 4-byte soffset: biggest alignment first; the table starts 8-aligned, so an
    # offset that is a multiple of a field's alignment is aligned in the buffer too.
    layout: dict[int, int] = {}
    at = 4
    for i, v in sorted(present, key=lambda p: -_inline_size(p[1])[1]):
        size, align = _inline_size(v)
        at = (at + align - 1) // align * align
        layout[i] = at
        at += size
    table_size = (at + 3) // 4 * 4
    field_count = len(table.fields)
    _pad_to(out, 2)
    vtable = len(out)
    out += struct.pack(f"<HH{field_count}H", 4 + 2 * field_count, table_size, *(layout.get(i, 0) for i in range(field_count)))
    _pad_to(out, 8)
    start = len(out)
    out += bytes(table_size)
    struct.pack_into("<i", out, start, start - vtable)
    children = []
    for i, v in present:
        slot = start + layout[i]
        if isinstance(v, Scalar):
            struct.pack_into(SCALAR_FORMATS[v.kind], out, slot, v.value)
        elif isinstance(v, Struct):
            out[slot : slot + len(v.data)] = v.data
        else:
            children.append((slot, v))
    for slot, v in children:
        struct.pack_into("<I", out, slot, _write_child(out, v) - slot)
    return start


def _write_child(out: bytearray, value) -> int:
    """Write what an offset field points at; its position."""
    if isinstance(value, TableValue):
        return _write_table(out, value)
    if isinstance(value, String):
        data = value.value.encode("utf-8") if isinstance(value.value, str) else bytes(value.value)
        _pad_to(out, 4)
        start = len(out)
        out += struct.pack("<I", len(data)) + data + b"\0"
        return start
    if isinstance(value, ScalarVector):
        fmt = SCALAR_FORMATS[value.kind]
        size = struct.calcsize(fmt)
        _pad_to(out, max(size, 4), shift=4)  # the elements after the 4-byte count are aligned
        start = len(out)
        out += struct.pack("<I", len(value.values))
        if isinstance(value.values, (bytes, bytearray, memoryview)):
            out += bytes(value.values)  # a byte vector (its kind is "u8")
        else:
            out += b"".join(struct.pack(fmt, x) for x in value.values)
        return start
    if isinstance(value, TableVector):
        _pad_to(out, 4)
        start = len(out)
        out += struct.pack("<I", len(value.tables)) + bytes(4 * len(value.tables))
        for k, t in enumerate(value.tables):
            slot = start + 4 + 4 * k
            struct.pack_into("<I", out, slot, _write_table(out, t) - slot)
        return start
    raise TypeError(f"not a FlatBuffer value: {value!r}")
