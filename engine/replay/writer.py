"""Writing ``.ireereplay`` files that IREE's ``iree-run-replay`` accepts.

* ``ReplayWriter`` writes records one after another (sequence ordinals counted here) and finalizes the
  header's length, as IREE's recorder does when it closes a capture;
* ``rewrite_replay`` copies a capture record for record, replacing the binaries of substituted
  executables (what the debug run ran) and appending records (``readback_records``);
* ``readback_records`` makes the replayed device write buffers to a file (``device.import_file`` of an
  external path, then ``device.queue_write``s that signal a semaphore ``iree-run-replay`` waits for): how a
  test reads what ``iree-run-replay`` computed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ReplayFormatError
from engine.replay import format as f
from engine.replay.payloads import ExecutablePrepare
from engine.replay.reader import Record, ReplayFile

ANY_QUEUE = (1 << 64) - 1


@dataclass(frozen=True)
class NewRecord:
    """A record to write: its header fields (the sequence ordinal is given by the writer) and payload."""

    record_type: int
    payload: bytes = b""
    payload_type: int = 0
    object_type: int = 0
    operation_code: int = 0
    device_id: int = 0
    object_id: int = 0
    related_object_id: int = 0
    status_code: int = 0
    thread_id: int = 0
    record_flags: int = 0


class ReplayWriter:
    """Writes a replay file: header, records, and the final length in the header on ``close``."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._file = open(self.path, "wb")  # noqa: SIM115 (closed by close)
        self._file.write(
            f.FILE_HEADER.pack(f.MAGIC, f.VERSION_MAJOR, f.VERSION_MINOR, f.FILE_HEADER.size, 0, 0)
        )
        self.length = f.FILE_HEADER.size
        self.sequence = 0

    def append(self, r: NewRecord) -> None:
        header = f.RECORD_HEADER.pack(
            f.RECORD_HEADER.size + len(r.payload),
            len(r.payload),
            self.sequence,
            r.thread_id,
            r.device_id,
            r.object_id,
            r.related_object_id,
            f.RECORD_HEADER.size,
            r.record_type,
            r.record_flags,
            r.payload_type,
            r.object_type,
            r.operation_code,
            r.status_code,
            0,
            0,
        )
        self._file.write(header)
        self._file.write(r.payload)
        self.length += len(header) + len(r.payload)
        self.sequence += 1

    def close(self) -> Path:
        self._file.seek(16)
        self._file.write(struct.pack("<Q", self.length))
        self._file.close()
        return self.path

    def discard(self) -> None:
        """Stop writing and remove the file: a run that failed leaves no replay a tool would take as whole."""
        if not self._file.closed:
            self._file.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> ReplayWriter:
        return self

    def __exit__(self, *exc) -> None:
        if not self._file.closed:
            self.close()


def copied(replay: ReplayFile, r: Record, payload: bytes | None = None) -> NewRecord:
    """Record ``r`` of ``replay`` as a ``NewRecord`` (with another payload if given)."""
    return NewRecord(
        r.record_type,
        bytes(replay.payload(r)) if payload is None else payload,
        r.payload_type,
        r.object_type,
        r.operation_code,
        r.device_id,
        r.object_id,
        r.related_object_id,
        r.status_code,
        r.thread_id,
        r.record_flags,
    )


def substituted_prepare(replay: ReplayFile, r: Record, data: bytes, executable_format: str | None) -> bytes:
    """The payload of prepare_executable record ``r`` with ``data`` as the executable binary (and another
    format string if given); the constants and the ABI metadata stay the capture's."""
    p = replay.decode_as(r, ExecutablePrepare)
    fmt = executable_format.encode() if executable_format else bytes(replay.range_bytes(p.format_range))
    constants = bytes(replay.range_bytes(p.constants_range))
    metadata = bytes(replay.range_bytes(p.metadata_range))
    head = f.EXECUTABLE_PREPARE.pack(
        p.queue_affinity, len(data), p.constant_count, p.caching_mode, len(fmt), len(metadata), 0
    )
    return head + fmt + data + constants + metadata


def rewrite_replay(
    replay: ReplayFile,
    out: str | os.PathLike,
    *,
    substitutions: dict[int | None, tuple[bytes, str | None]] | None = None,
    append: Iterable[NewRecord] = (),
) -> Path:
    """Copy ``replay`` to ``out`` with executable ``id -> (binary, format)`` substituted (``None`` = all)
    and ``append`` written after its records."""
    substitutions = substitutions or {}
    with ReplayWriter(out) as w:
        for r in replay.records():
            payload = None
            if r.operation_code == f.OP["executable_cache.prepare_executable"] and r.status_code == 0:
                sub = substitutions.get(r.related_object_id, substitutions.get(None))
                if sub is not None:
                    payload = substituted_prepare(replay, r, sub[0], sub[1])
            w.append(copied(replay, r, payload))
        for extra in append:
            w.append(extra)
        return w.close()


def _device_of(replay: ReplayFile) -> tuple[int, int]:
    """(device_id, device object id) of the replay's first device operation."""
    for r in replay.records():
        if r.object_type == f.ObjectType.DEVICE and r.record_type == f.RecordType.OPERATION:
            return r.device_id, r.object_id
    raise ReplayFormatError("the replay has no device operation", path=replay.source)


def _next_object_id(replay: ReplayFile) -> int:
    return 1 + max((max(r.object_id, r.related_object_id) for r in replay.records()), default=0)


def readback_records(
    replay: ReplayFile, ranges: list[tuple[int, int, int]], file_path: str | os.PathLike
) -> tuple[list[NewRecord], int]:
    """Records that write each ``(buffer id, offset, length)`` one after another into ``file_path``
    (which must exist with exactly the total length: IREE checks an external file's length); returns
    them and the total length."""
    device_id, device_object = _device_of(replay)
    file_id = _next_object_id(replay)
    total = sum(length for _, _, length in ranges)
    path = os.fsencode(os.fspath(file_path))
    file_payload = (
        f.FILE_OBJECT.pack(ANY_QUEUE, total, 0, 0, 0, len(path), 0x3, 0, 0, 1, 0, 0, 0, 0, bytes(32)) + path
    )
    # Each write signals a semaphore iree-run-replay then waits for: on an asynchronous device (local-task)
    # a write nothing waited for could still be running when the replay ended, leaving the file short.
    semaphore_id = file_id + 1
    semaphore = f.SEMAPHORE_OBJECT.pack(ANY_QUEUE, 0, 0xA, 0)  # IREE_HAL_SEMAPHORE_FLAG_DEFAULT
    records = [
        NewRecord(
            f.RecordType.OPERATION,
            file_payload,
            f.PayloadType.FILE_OBJECT,
            f.ObjectType.DEVICE,
            f.OP["device.import_file"],
            device_id,
            device_object,
            file_id,
        ),
        NewRecord(
            f.RecordType.OBJECT,
            file_payload,
            f.PayloadType.FILE_OBJECT,
            f.ObjectType.FILE,
            0,
            device_id,
            file_id,
        ),
        NewRecord(
            f.RecordType.OPERATION,
            semaphore,
            f.PayloadType.SEMAPHORE_OBJECT,
            f.ObjectType.DEVICE,
            f.OP["device.create_semaphore"],
            device_id,
            device_object,
            semaphore_id,
        ),
        NewRecord(
            f.RecordType.OBJECT,
            semaphore,
            f.PayloadType.SEMAPHORE_OBJECT,
            f.ObjectType.SEMAPHORE,
            0,
            device_id,
            semaphore_id,
        ),
    ]
    at = 0
    for i, (buffer_id, offset, length) in enumerate(ranges):
        payload = f.QUEUE_WRITE.pack(
            buffer_id, offset, length, 0, 0, file_id, at, ANY_QUEUE, 0, 0, 1
        ) + f.TIMEPOINT.pack(semaphore_id, i + 1)
        records.append(
            NewRecord(
                f.RecordType.OPERATION,
                payload,
                f.PayloadType.DEVICE_QUEUE_WRITE,
                f.ObjectType.DEVICE,
                f.OP["device.queue_write"],
                device_id,
                device_object,
                0,
            )
        )
        at += length
    return records, total
