"""The listing of a replay as ``iree-dump-replay`` prints it: its JSONL rows (``jsonl_rows``, equal to
``iree-dump-replay --format=jsonl`` line for line once parsed; each record's payload is its typed record's
``to_json``).

Rows stream: one record is decoded at a time, so listing a large capture holds one row in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

from engine.errors import ReplayFormatError
from engine.replay import format as f
from engine.replay.payloads import FileObject
from engine.replay.reader import FileRange, Record, ReplayFile


@dataclass
class Summary:
    """What ``iree-dump-replay`` says about a capture before its records."""

    record_count: int = 0
    object_count: int = 0
    operation_count: int = 0
    unsupported_count: int = 0
    scope_begin_count: int = 0
    scope_end_count: int = 0
    file_object_count: int = 0
    external_file_count: int = 0
    inline_file_count: int = 0
    range_file_count: int = 0
    unknown_file_reference_count: int = 0
    external_file_total_length: int = 0
    inline_file_total_length: int = 0
    range_file_total_length: int = 0
    captured_read_total_length: int = 0
    identity_validation: int = 0
    digest_validation: int = 0
    no_validation: int = 0
    unknown_validation: int = 0

    @property
    def environment_referenced(self) -> bool:
        return self.external_file_count != 0

    @property
    def hermetic(self) -> bool:
        return not self.environment_referenced and self.unknown_file_reference_count == 0

    @property
    def strict_replay_supported(self) -> bool:
        return (
            self.unsupported_count == 0
            and self.unknown_file_reference_count == 0
            and self.unknown_validation == 0
        )

    def to_json(self) -> dict:
        counts = {x.name: getattr(self, x.name) for x in fields(self)}
        out: dict = {
            "kind": "summary",
            "hermetic": self.hermetic,
            "environment_referenced": self.environment_referenced,
            "strict_replay_supported": self.strict_replay_supported,
        }
        for key in list(counts)[:15]:
            out[key] = counts[key]
        out["file_validation"] = {
            "identity": self.identity_validation,
            "digest": self.digest_validation,
            "none": self.no_validation,
            "unknown": self.unknown_validation,
        }
        return out


def summarize(replay: ReplayFile) -> Summary:
    s = Summary()
    P = f.PayloadType
    for r in replay.records():
        s.record_count += 1
        if r.record_type == f.RecordType.OBJECT:
            s.object_count += 1
            if r.payload_type == P.FILE_OBJECT:
                file = replay.decode_as(r, FileObject)
                s.file_object_count += 1
                kind = file.reference_type
                if kind == 1:
                    s.external_file_count += 1
                    s.external_file_total_length += file.file_length
                elif kind == 2:
                    s.inline_file_count += 1
                    s.inline_file_total_length += file.reference_length
                elif kind == 3:
                    s.range_file_count += 1
                    s.range_file_total_length += file.file_length
                else:
                    s.unknown_file_reference_count += 1
                v = file.validation_type
                if v == 0:
                    s.no_validation += 1
                elif v == 1:
                    s.identity_validation += 1
                elif v == 2:
                    s.digest_validation += 1
                else:
                    s.unknown_validation += 1
        elif r.record_type == f.RecordType.OPERATION:
            s.operation_count += 1
            if r.operation_code == f.OP["replay.scope_begin"]:
                s.scope_begin_count += 1
            elif r.operation_code == f.OP["replay.scope_end"]:
                s.scope_end_count += 1
            if r.payload_type == P.DEVICE_QUEUE_READ:
                if r.payload_length < f.QUEUE_READ.size:
                    raise ReplayFormatError("replay queue read payload is short", path=replay.source)
                s.captured_read_total_length += f.QUEUE_READ.unpack_from(replay.payload(r), 0)[9]
        elif r.record_type == f.RecordType.UNSUPPORTED:
            s.unsupported_count += 1
    return s


def record_row(replay: ReplayFile, r: Record) -> dict:
    """One record as ``iree-dump-replay --format=jsonl`` prints it."""
    row = {
        "kind": r.kind,
        "file_offset": r.offset,
        "record_length": r.record_length,
        "payload_length": r.payload_length,
        "sequence_ordinal": r.sequence_ordinal,
        "thread_id": r.thread_id,
        "device_id": r.device_id,
        "object_id": r.object_id,
        "related_object_id": r.related_object_id,
        "record_type_code": r.record_type,
        "record_flags": r.record_flags,
        "object_type": r.object_type_name,
        "object_type_code": r.object_type,
        "operation": r.operation,
        "operation_code": r.operation_code,
        "status_code": r.status_code,
        "status": r.status,
        "payload_type": r.payload_type_name,
        "payload_type_code": r.payload_type,
        "payload_range": FileRange(r.payload_offset, r.payload_length).to_json(),
    }
    payload = replay.decode(r)
    if payload is not None:
        row["payload"] = payload.to_json()  # None (null) for a payload type this version does not know
    return row


def file_row(replay: ReplayFile) -> dict:
    return {
        "kind": "file",
        "version_major": replay.version[0],
        "version_minor": replay.version[1],
        "header_length": replay.header_length,
        "flags": replay.flags,
        "file_length": replay.file_length,
    }


def jsonl_rows(replay: ReplayFile) -> Iterator[dict]:
    """The file row, the summary row, then one row per record (the summary walks the file once first,
    as IREE's dumper does, so a damaged record fails before any record row)."""
    yield file_row(replay)
    yield summarize(replay).to_json()
    for r in replay.records():
        yield record_row(replay, r)
