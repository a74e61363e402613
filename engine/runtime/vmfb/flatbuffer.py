"""A small, lazy, bounds-checked FlatBuffer reader.

Nothing is parsed until asked for and nothing big is copied: byte and scalar vectors come back as
``memoryview``/numpy views of the underlying buffer (which may be a memory map). Every access is
checked against the buffer, and a bad offset raises the error class the caller chose (by default
:class:`~engine.errors.VmfbFormatError`) naming the absolute offset and the field path, e.g.
``BytecodeModuleDef.function_descriptors[3]``.

Used for IREE's ``IREE`` module flatbuffer and for the ``VKE1`` Vulkan executable flatbuffer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from engine.errors import FormatError, VmfbFormatError

# Reads are metered: a damaged buffer can make many tables share one long vector or string (each table
# small, the shared data read once per table), so walking it takes time quadratic in the file's size.
# Every vector element, string byte and table read is charged against a budget proportional to the
# buffer's size; a valid file's readers read each part a few times at most, far below it.
READ_BUDGET_PER_BYTE = 16
READ_BUDGET_MINIMUM = 1 << 16

_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")

# Scalar kinds accepted by Table.scalar and the vector readers: struct format and numpy dtype.
SCALAR_FORMATS: dict[str, str] = {
    "bool": "<?",
    "i8": "<b",
    "u8": "<B",
    "i16": "<h",
    "u16": "<H",
    "i32": "<i",
    "u32": "<I",
    "i64": "<q",
    "u64": "<Q",
    "f32": "<f",
    "f64": "<d",
}
_STRUCTS = {k: struct.Struct(v) for k, v in SCALAR_FORMATS.items()}
_DTYPES = {k: np.dtype(v) for k, v in SCALAR_FORMATS.items()}


class FlatBuffer:
    """A FlatBuffer held in ``data`` (bytes, bytearray, memoryview or mmap), starting at ``start``.

    Offsets inside a FlatBuffer are relative to its start; error messages name absolute offsets in
    ``data`` plus ``origin`` (where ``data`` itself sits in the file, for nested buffers).
    """

    __slots__ = ("buf", "start", "end", "error", "origin", "source", "budget", "declared_end")

    def __init__(
        self,
        data: Any,
        start: int = 0,
        end: int | None = None,
        *,
        error: type[FormatError] = VmfbFormatError,
        origin: int = 0,
        source: str | None = None,
        declared_end: int | None = None,
    ):
        self.buf = data if isinstance(data, memoryview) else memoryview(data)
        if self.buf.ndim != 1 or self.buf.itemsize != 1:
            self.buf = self.buf.cast("B")
        n = len(self.buf)
        self.end = n if end is None else end
        self.start = start
        self.error = error
        self.origin = origin
        self.source = source
        # Where the container says the flatbuffer ends; past ``end`` (the file's end) the file is truncated.
        self.declared_end = self.end if declared_end is None else max(declared_end, self.end)
        if not (0 <= start <= self.end <= n):
            self.fail(f"flatbuffer extent [{start}, {end}) lies outside the {n}-byte buffer", start, "root")
        self.budget = READ_BUDGET_PER_BYTE * (self.end - self.start) + READ_BUDGET_MINIMUM

    # -- errors -------------------------------------------------------------------------------------------

    def fail(self, message: str, offset: int, path: str) -> None:
        raise self.error(message, path=self.source, where=f"offset {offset + self.origin} ({path})")

    def check(self, pos: int, size: int, path: str) -> None:
        if pos < self.start or size < 0 or pos + size > self.end:
            truncated = pos + size > self.end and self.declared_end > self.end
            self.fail(
                (f"the file is truncated: it ends at byte {self.end + self.origin} of the "
                 f"{self.declared_end + self.origin} its module flatbuffer declares; " if truncated else "")
                + f"read of {size} bytes at offset {pos + self.origin} is outside the flatbuffer "
                f"[{self.start + self.origin}, {self.end + self.origin})",
                pos,
                path,
            )

    def charge(self, units: int, pos: int, path: str) -> None:
        """Count ``units`` elements (or bytes) read; fail once the reads exceed the buffer's budget."""
        self.budget -= units
        if self.budget < 0:
            self.fail(
                f"reading needs more than {READ_BUDGET_PER_BYTE}x the flatbuffer's size "
                "(tables share data: a damaged or hostile file)",
                pos,
                path,
            )

    # -- raw reads (absolute positions in buf) ------------------------------------------------------------

    def read(self, kind: str, pos: int, path: str) -> Any:
        s = _STRUCTS[kind]
        self.check(pos, s.size, path)
        return s.unpack_from(self.buf, pos)[0]

    def u32(self, pos: int, path: str) -> int:
        self.check(pos, 4, path)
        return _U32.unpack_from(self.buf, pos)[0]

    def identifier(self) -> bytes:
        """The 4-byte file identifier after the root offset."""
        self.check(self.start + 4, 4, "file_identifier")
        return bytes(self.buf[self.start + 4 : self.start + 8])

    def root(self, name: str = "root", expect_identifier: bytes | None = None) -> Table:
        if expect_identifier is not None and self.identifier() != expect_identifier:
            self.fail(
                f"flatbuffer identifier is {self.identifier()!r}, expected {expect_identifier!r}",
                self.start + 4,
                "file_identifier",
            )
        off = self.u32(self.start, "root_offset")
        return Table(self, self.start + off, name)


class Table:
    """A lazily read FlatBuffer table at absolute position ``pos``; ``path`` names it in errors."""

    __slots__ = ("fb", "pos", "path", "_vt", "_vt_len")

    def __init__(self, fb: FlatBuffer, pos: int, path: str):
        self.fb = fb
        self.pos = pos
        self.path = path
        fb.check(pos, 4, path)
        vt = pos - _I32.unpack_from(fb.buf, pos)[0]
        fb.check(vt, 4, f"{path}.vtable")
        vt_len, tbl_len = struct.unpack_from("<HH", fb.buf, vt)
        if vt_len < 4 or vt_len & 1:
            fb.fail(f"vtable length {vt_len} is invalid", vt, f"{path}.vtable")
        fb.check(vt, vt_len, f"{path}.vtable")
        fb.check(pos, max(tbl_len, 4), path)
        self._vt = vt
        self._vt_len = vt_len
        fb.charge(1, pos, path)

    def __repr__(self) -> str:
        return f"<Table {self.path} @ {self.pos + self.fb.origin}>"

    # -- fields -------------------------------------------------------------------------------------------

    def field_pos(self, field_id: int) -> int:
        """Absolute position of field ``field_id`` or 0 when it is absent (default value)."""
        slot = 4 + 2 * field_id
        if slot + 2 > self._vt_len:
            return 0
        off = _U16.unpack_from(self.fb.buf, self._vt + slot)[0]
        return self.pos + off if off else 0

    def has(self, field_id: int) -> bool:
        return self.field_pos(field_id) != 0

    def scalar(self, field_id: int, kind: str, default: Any = 0, name: str | None = None) -> Any:
        p = self.field_pos(field_id)
        if not p:
            return default
        return self.fb.read(kind, p, self._name(field_id, name))

    def _name(self, field_id: int, name: str | None) -> str:
        return f"{self.path}.{name if name else f'field{field_id}'}"

    def _indirect(self, field_id: int, name: str | None) -> tuple[int, str] | None:
        p = self.field_pos(field_id)
        if not p:
            return None
        path = self._name(field_id, name)
        return p + self.fb.u32(p, path), path

    def string(self, field_id: int, name: str | None = None, default: str | None = None) -> str | None:
        r = self._indirect(field_id, name)
        if r is None:
            return default
        return read_string(self.fb, *r)

    def table(self, field_id: int, name: str | None = None) -> Table | None:
        r = self._indirect(field_id, name)
        if r is None:
            return None
        return Table(self.fb, r[0], r[1])

    def _vector(self, field_id: int, name: str | None, elem_size: int) -> tuple[int, int, str] | None:
        r = self._indirect(field_id, name)
        if r is None:
            return None
        pos, path = r
        n = self.fb.u32(pos, path)
        if n * elem_size > self.fb.end - pos - 4:
            self.fb.fail(f"vector of {n} x {elem_size}-byte elements runs past the flatbuffer end", pos, path)
        self.fb.check(pos + 4, n * elem_size, path)
        self.fb.charge(n, pos, path)
        return pos + 4, n, path

    def vector_len(self, field_id: int, name: str | None = None) -> int:
        r = self._indirect(field_id, name)
        if r is None:
            return 0
        return self.fb.u32(r[0], r[1])

    def vector_span(self, field_id: int, elem_size: int, name: str | None = None) -> tuple[int, int] | None:
        """(absolute position of element 0, element count) of a vector field, or None when absent."""
        r = self._vector(field_id, name, elem_size)
        return None if r is None else (r[0], r[1])

    def byte_vector(self, field_id: int, name: str | None = None) -> memoryview | None:
        """A ``[ubyte]`` vector as a zero-copy memoryview (None when absent)."""
        r = self._vector(field_id, name, 1)
        if r is None:
            return None
        pos, n, _ = r
        return self.fb.buf[pos : pos + n]

    def scalars(self, field_id: int, kind: str, name: str | None = None) -> np.ndarray:
        """A vector of scalars as a read-only numpy view (empty when absent)."""
        dt = _DTYPES[kind]
        r = self._vector(field_id, name, dt.itemsize)
        if r is None:
            return np.zeros(0, dt)
        pos, n, _ = r
        return np.frombuffer(self.fb.buf, dtype=dt, count=n, offset=pos)

    def structs(self, field_id: int, dtype: np.dtype, name: str | None = None) -> np.ndarray:
        """A vector of structs as a numpy structured-array view (empty when absent)."""
        dtype = np.dtype(dtype)
        r = self._vector(field_id, name, dtype.itemsize)
        if r is None:
            return np.zeros(0, dtype)
        pos, n, _ = r
        return np.frombuffer(self.fb.buf, dtype=dtype, count=n, offset=pos)

    def tables(self, field_id: int, name: str | None = None) -> TableVector:
        """A vector of tables, read lazily element by element."""
        r = self._vector(field_id, name, 4)
        if r is None:
            return TableVector(self.fb, 0, 0, self._name(field_id, name))
        return TableVector(self.fb, *r)

    def strings(self, field_id: int, name: str | None = None) -> list[str]:
        r = self._vector(field_id, name, 4)
        if r is None:
            return []
        pos, n, path = r
        out = []
        for i in range(n):
            p = pos + 4 * i
            out.append(read_string(self.fb, p + _U32.unpack_from(self.fb.buf, p)[0], f"{path}[{i}]"))
        return out

    def union(self, type_field_id: int, name: str | None = None) -> tuple[int, Table | None]:
        """A union stored as ``(u8 type at type_field_id, offset at type_field_id + 1)``."""
        tag = self.scalar(type_field_id, "u8", 0, f"{name}_type" if name else None)
        if tag == 0:
            return 0, None
        return tag, self.table(type_field_id + 1, name)

    def union_vector(self, type_field_id: int, name: str | None = None) -> list[tuple[int, Table | None]]:
        """A vector of unions: ``[u8]`` tags at type_field_id, ``[offset]`` values at type_field_id + 1."""
        tags = self.scalars(type_field_id, "u8", f"{name}_type" if name else None)
        values = self.tables(type_field_id + 1, name)
        if len(values) != len(tags):
            self.fb.fail(
                f"union vector has {len(tags)} tags but {len(values)} values",
                self.field_pos(type_field_id),
                self._name(type_field_id, name),
            )
        return [(int(t), values[i] if t else None) for i, t in enumerate(tags)]


def read_string(fb: FlatBuffer, pos: int, path: str) -> str:
    n = fb.u32(pos, path)
    if n > fb.end - pos - 4:
        fb.fail(f"string of {n} bytes runs past the flatbuffer end", pos, path)
    fb.check(pos + 4, n, path)
    fb.charge(n, pos, path)
    raw = fb.buf[pos + 4 : pos + 4 + n]
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError:
        fb.fail("string is not valid UTF-8", pos, path)
        raise  # unreachable: fail raises


class TableVector(Sequence[Table]):
    """A lazily read vector of tables; ``tv[i]`` reads element i (negative indices allowed)."""

    __slots__ = ("fb", "pos", "n", "path")

    def __init__(self, fb: FlatBuffer, pos: int, n: int, path: str):
        self.fb = fb
        self.pos = pos
        self.n = n
        self.path = path

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"{self.path}[{i}] out of range (length {self.n})")
        p = self.pos + 4 * i
        return Table(self.fb, p + _U32.unpack_from(self.fb.buf, p)[0], f"{self.path}[{i}]")

    def __iter__(self) -> Iterator[Table]:
        for i in range(self.n):
            yield self[i]
