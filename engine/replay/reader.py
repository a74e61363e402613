"""Reading an IREE HAL replay (``.ireereplay``): memory-mapped, records parsed as they are walked.

``open_replay(path)`` maps the file; ``ReplayFile.records()`` walks the records one fixed header at a
time (nothing is copied: payloads are views of the mapping); ``decode(record)`` gives one payload as its
typed record (``payloads.py``).
Every check IREE's reader (``file_reader.c``) and dumper (``dump.c``) make is made here, and a damaged
file ends in ``ReplayFormatError`` naming the byte offset; counts in payloads are checked against the
payload's length before anything is sized by them, so no input makes this allocate more than the file.

``projection.py`` turns records into the rows ``iree-dump-replay`` prints; this module gives the typed
view the replay executor uses.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from engine.errors import ReplayFormatError
from engine.replay import format as f

if TYPE_CHECKING:
    from engine.replay.payload_base import Payload

PayloadT = TypeVar("PayloadT", bound="Payload")


@dataclass(frozen=True)
class Record:
    """One record's fixed header, at byte ``offset`` of the file."""

    offset: int
    record_length: int
    payload_length: int
    sequence_ordinal: int
    thread_id: int
    device_id: int
    object_id: int
    related_object_id: int
    header_length: int
    record_type: int
    record_flags: int
    payload_type: int
    object_type: int
    operation_code: int
    status_code: int

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_length

    @property
    def kind(self) -> str:
        return f.record_type_name(self.record_type)

    @property
    def operation(self) -> str:
        return f.operation_name(self.operation_code)

    @property
    def object_type_name(self) -> str:
        return f.object_type_name(self.object_type)

    @property
    def payload_type_name(self) -> str:
        return f.payload_type_name(self.payload_type)

    @property
    def status(self) -> str:
        return f.status_name(self.status_code)


@dataclass(frozen=True)
class FileRange:
    """Bytes of the replay file: ``length`` bytes at ``offset`` (stored uncompressed, no digest)."""

    offset: int
    length: int

    def to_json(self) -> dict:
        return {
            "offset": self.offset,
            "length": self.length,
            "uncompressed_length": self.length,
            "compression_type": 0,
            "digest_type": 0,
        }


@dataclass(frozen=True)
class BufferRef:
    """``iree_hal_replay_buffer_ref_payload_t``: a buffer object (0 = binding-table ``slot``) range."""

    buffer_id: int
    offset: int
    length: int
    slot: int

    def to_json(self) -> dict:
        return {
            "buffer_id": self.buffer_id,
            "offset": self.offset,
            "length": self.length,
            "buffer_slot": self.slot,
        }


@dataclass(frozen=True)
class Timepoint:
    semaphore_id: int
    value: int


@dataclass(frozen=True)
class FunctionMetadata:
    """One exported function of a captured executable, from the ABI metadata IREE appends."""

    name: str
    flags: int
    workgroup_size: tuple[int, int, int]
    constant_count: int
    binding_count: int
    parameters: tuple[tuple[int, int, int, int], ...]  # (offset, flags, type, size)


def _err(message: str, where: int | str | None = None, path: str | None = None) -> ReplayFormatError:
    return ReplayFormatError(
        message,
        path=path,
        where=None if where is None else f"byte {where}" if isinstance(where, int) else where,
    )


class ReplayFile:
    """A ``.ireereplay`` held in ``data`` (bytes, memoryview or a mapping); the header is checked here."""

    def __init__(self, data, *, source: str | None = None, _mapping: mmap.mmap | None = None):
        self.data = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
        self.source = source
        self._mapping = _mapping
        if len(self.data) < f.FILE_HEADER.size:
            raise _err("replay file is too small for header", 0, source)
        magic, vmaj, vmin, header_length, flags, file_length = f.FILE_HEADER.unpack_from(self.data, 0)
        if magic != f.MAGIC:
            raise _err("not an IREE HAL replay (bad magic)", 0, source)
        if vmaj != f.VERSION_MAJOR:
            raise _err(f"unsupported IREE HAL replay version {vmaj}.{vmin} (IREE 3.13 writes 2.x)", 4, source)
        if header_length < f.FILE_HEADER.size or header_length > len(self.data):
            raise _err(f"replay file header length {header_length} is invalid", 8, source)
        if flags != 0:
            raise _err("replay file reserved flags must be zero", 12, source)
        if file_length != 0 and file_length < header_length:
            raise _err("replay file length is before the first record", 16, source)
        if file_length > len(self.data):
            raise _err(f"replay file is truncated: {len(self.data)} of {file_length} bytes", 16, source)
        self.version = (vmaj, vmin)
        self.header_length = header_length
        self.flags = flags
        self.recorded_length = file_length
        # A capture still open when it was copied says 0: then the whole file is the valid contents.
        self.file_length = file_length or len(self.data)
        self._record_offsets: list[int] | None = None

    @classmethod
    def from_bytes(cls, data: bytes, *, name: str | None = None) -> ReplayFile:
        return cls(memoryview(data), source=name)

    def close(self) -> None:
        """Unmap the file (views handed out before must not be used after)."""
        if self._mapping is not None:
            try:
                self.data.release()
                self._mapping.close()
            except BufferError:  # a payload view is still alive: the mapping goes with the last one
                pass
            self._mapping = None

    def __enter__(self) -> ReplayFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- records

    def record_at(self, offset: int) -> Record:
        """Parse and check the record header at ``offset`` (``iree_hal_replay_file_parse_record``)."""
        end = self.file_length
        if offset >= end:
            raise _err("replay record offset is outside the file", offset, self.source)
        if end - offset < f.RECORD_HEADER.size:
            raise _err("replay record is too small for header", offset, self.source)
        # The header's fields in ``Record``'s order, then two reserved words that must be zero.
        *header, reserved0, reserved1 = f.RECORD_HEADER.unpack_from(self.data, offset)
        record = Record(offset, *header)
        if record.record_flags & ~f.RECORD_FLAG_OPTIONAL:
            raise _err("replay record reserved flags must be zero", offset, self.source)
        if record.record_type not in f.RECORD_TYPE_NAMES or record.record_type == 0:
            if not record.record_flags & f.RECORD_FLAG_OPTIONAL:
                raise _err(f"unknown required replay record type {record.record_type}", offset, self.source)
        if reserved0 or reserved1:
            raise _err("replay record reserved fields must be zero", offset, self.source)
        if record.record_length > end - offset:
            raise _err("replay record extends past file end", offset, self.source)
        if record.header_length < f.RECORD_HEADER.size or record.header_length > record.record_length:
            raise _err("replay record header length is invalid", offset, self.source)
        if record.payload_length != record.record_length - record.header_length:
            raise _err("replay record payload length does not match", offset, self.source)
        return record

    def records(self) -> Iterator[Record]:
        """Every record in file order; sequence ordinals must count from 0 as IREE's dumper requires."""
        offset = self.header_length
        expected = 0
        while offset < self.file_length:
            record = self.record_at(offset)
            if record.sequence_ordinal != expected:
                raise _err(
                    f"replay record sequence ordinal {record.sequence_ordinal} (expected {expected})",
                    offset,
                    self.source,
                )
            expected += 1
            yield record
            offset += record.record_length

    @property
    def record_offsets(self) -> list[int]:
        """Offsets of every record (one walk of the headers, then kept: 8 bytes a record)."""
        if self._record_offsets is None:
            self._record_offsets = [r.offset for r in self.records()]
        return self._record_offsets

    def __len__(self) -> int:
        return len(self.record_offsets)

    def __getitem__(self, index: int) -> Record:
        return self.record_at(self.record_offsets[index])

    # -- bytes

    def payload(self, record: Record) -> memoryview:
        return self.data[record.payload_offset : record.payload_offset + record.payload_length]

    def range_bytes(self, r: FileRange) -> memoryview:
        if r.offset + r.length > self.file_length:
            raise _err("replay file range extends past file contents", r.offset, self.source)
        return self.data[r.offset : r.offset + r.length]

    def buffer_refs(self, r: FileRange) -> list[BufferRef]:
        raw = self.range_bytes(r)
        return [
            BufferRef(*f.BUFFER_REF.unpack_from(raw, i)[:4]) for i in range(0, len(raw), f.BUFFER_REF.size)
        ]

    def timepoints(self, r: FileRange) -> list[Timepoint]:
        raw = self.range_bytes(r)
        return [Timepoint(*f.TIMEPOINT.unpack_from(raw, i)) for i in range(0, len(raw), f.TIMEPOINT.size)]

    def u32s(self, r: FileRange) -> tuple[int, ...]:
        raw = self.range_bytes(r)
        return tuple(int.from_bytes(raw[i : i + 4], "little") for i in range(0, len(raw) - len(raw) % 4, 4))

    # -- payloads

    def decode(self, record: Record) -> Payload | None:
        """The record's payload as its typed record (``engine.replay.payloads``): None when the record has
        no payload type, ``UnknownPayload`` for one this version does not know (IREE prints ``null``)."""
        from engine.replay.payloads import decode_payload

        return decode_payload(self, record)

    def decode_as(self, record: Record, kind: type[PayloadT]) -> PayloadT:
        """``decode`` for a record whose operation implies its payload (a scope marker carries a
        ``ScopePayload``...); another payload type is a damaged file."""
        if record.payload_type != kind.PAYLOAD_TYPE:
            raise _err(
                f"record #{record.sequence_ordinal} ({record.operation}) has a {record.payload_type_name} payload;"
                f" expected {f.payload_type_name(kind.PAYLOAD_TYPE)}",
                record.offset,
                self.source,
            )
        out = self.decode(record)
        if not isinstance(out, kind):
            raise _err(f"record #{record.sequence_ordinal} did not decode as {kind.__name__}", record.offset, self.source)
        return out


def open_replay(path: str | os.PathLike) -> ReplayFile:
    """Open a ``.ireereplay`` memory-mapped (read-only)."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return ReplayFile(b"", source=str(p))
            mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ReplayFormatError.cannot_open(p, e) from e
    return ReplayFile(memoryview(mapping), source=str(p), _mapping=mapping)
