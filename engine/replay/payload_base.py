"""What every typed replay payload shares: the checked view of a payload's bytes, the base record, and the
table from payload type to record class.

A payload record is a frozen dataclass whose fields are what ``iree-dump-replay --format=jsonl`` prints for
that payload, by the same names (byte ranges of the file as ``FileRange``, buffer references as
``BufferRef``); what costs a walk of the file (bindings, semaphore lists, constants, ABI metadata) is read
when asked for, from the ranges the fixed header located (pyelftools' sections read their data the same
way). ``to_json`` gives IREE's projection: the fields, then the lazily read parts it prints (``JSON_EXTRA``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from engine.errors import ReplayFormatError
from engine.replay.reader import BufferRef, FileRange, Record, Timepoint

if TYPE_CHECKING:
    from engine.replay.reader import ReplayFile


def json_value(value: Any) -> Any:
    """A payload field as IREE's dumper prints it."""
    if isinstance(value, FileRange | BufferRef):
        return value.to_json()
    if isinstance(value, Timepoint):
        return {"semaphore_id": value.semaphore_id, "value": value.value}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class PayloadBytes:
    """One record's payload bytes with the checks IREE's dumper (``dump.c``) makes on them: a fixed header,
    then variable parts that must end exactly at the payload's end (so no count outgrows the file)."""

    replay: ReplayFile
    record: Record
    data: memoryview

    @property
    def length(self) -> int:
        return len(self.data)

    def fail(self, message: str) -> ReplayFormatError:
        r = self.record
        return ReplayFormatError(
            message, path=self.replay.source, where=f"record #{r.sequence_ordinal} (byte {r.offset})"
        )

    def fixed(self, s: struct.Struct, *, exact: bool = True, what: str = "payload") -> tuple:
        """The fixed header; ``exact``: the whole payload (else variable parts follow it)."""
        n = self.length
        if (n != s.size) if exact else (n < s.size):
            raise self.fail(f"replay {self.record.payload_type_name} {what} has {n} bytes; expected {s.size}")
        return s.unpack_from(self.data, 0)

    def range(self, start: int, length: int) -> FileRange:
        """``length`` bytes at ``start`` of the payload, as a range of the file."""
        return FileRange(self.record.payload_offset + start, length)

    def parts(self, header: int, *lengths: int, what: str) -> list[FileRange]:
        """Consecutive parts after a ``header``-byte header, which must end at the payload's end."""
        ranges, at = [], header
        for length in lengths:
            ranges.append(self.range(at, length))
            at += length
        if at != self.length:
            raise self.fail(f"replay {what} payload length mismatch")
        return ranges

    def tail(self, header: int, length: int, what: str) -> FileRange:
        """``length`` bytes after the header that may not run past the payload (more may follow)."""
        if length > self.length - header:
            raise self.fail(f"replay {what} extends past record")
        return self.range(header, length)


def buffer_ref(values: tuple) -> BufferRef:
    """``iree_hal_replay_buffer_ref_payload_t`` from its five unpacked words (the last reserved)."""
    buffer_id, offset, length, slot, _reserved = values
    return BufferRef(buffer_id, offset, length, slot)


def replay_field() -> Any:
    """The replay a record reads its lazy parts from: not printed, not compared."""
    return field(kw_only=True, repr=False, compare=False, metadata={"json": False})


@dataclass(frozen=True)
class Payload:
    """A decoded payload. Subclasses are registered for one payload type with ``@payload(type)``."""

    PAYLOAD_TYPE: ClassVar[int] = -1
    JSON_EXTRA: ClassVar[tuple[str, ...]] = ()  # properties IREE's projection prints after the fields

    @classmethod
    def read(cls, raw: PayloadBytes) -> Payload:
        raise NotImplementedError

    def to_json(self) -> dict | None:
        out = {
            f.name: json_value(getattr(self, f.name)) for f in fields(self) if f.metadata.get("json", True)
        }
        for name in self.JSON_EXTRA:
            out[name] = json_value(getattr(self, name))
        return out


@dataclass(frozen=True)
class UnknownPayload(Payload):
    """A payload type this version does not know: IREE's dumper prints ``null``."""

    payload_type: int

    def to_json(self) -> dict | None:
        return None


P = TypeVar("P", bound=type[Payload])
DECODERS: dict[int, type[Payload]] = {}


def payload(payload_type: int) -> Callable[[P], P]:
    """Register the class as the record of ``payload_type`` (the table ``decode_payload`` reads)."""

    def register(cls: P) -> P:
        if payload_type in DECODERS:
            raise ValueError(f"payload type {payload_type} has two records")
        cls.PAYLOAD_TYPE = payload_type
        DECODERS[payload_type] = cls
        return cls

    return register


__all__ = [
    "DECODERS",
    "Payload",
    "PayloadBytes",
    "UnknownPayload",
    "buffer_ref",
    "json_value",
    "payload",
    "replay_field",
]
