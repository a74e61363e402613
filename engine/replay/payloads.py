"""Typed payloads of replay records, check for check as IREE's dumper (``dump.c``) makes them.

One frozen dataclass per payload type (``payload_objects``: HAL objects and host bytes;
``payload_operations``: dispatches, queue operations, recorded commands), found through one table from
payload type to record class (``DECODERS``); ``decode_payload`` verifies the fixed part and locates the
variable parts, which each record reads when asked (pyelftools' lazy typed reader is the model). A record's
``to_json()`` is what ``iree-dump-replay --format=jsonl`` prints as the record's ``payload``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.replay import format as f
from engine.replay.payload_base import DECODERS, Payload, PayloadBytes, UnknownPayload, json_value
from engine.replay.payload_objects import (
    AllocateBuffer,
    BufferObject,
    BufferRange,
    BufferRangeData,
    CommandBufferObject,
    EventObject,
    ExecutableCacheObject,
    ExecutablePrepare,
    FileObject,
    ImportBuffer,
    ScopePayload,
    SemaphoreObject,
)
from engine.replay.payload_operations import (
    CommandBufferCopy,
    CommandBufferEvent,
    CommandBufferFill,
    CommandBufferUpdate,
    Dispatch,
    ExecutionBarrier,
    QueueAlloca,
    QueueCopy,
    QueueDealloca,
    QueueExecute,
    QueueFill,
    QueueRead,
    QueueSemaphores,
    QueueUpdate,
    QueueWrite,
    WaitEvents,
)

if TYPE_CHECKING:
    from engine.replay.reader import Record, ReplayFile


def decode_payload(replay: ReplayFile, record: Record) -> Payload | None:
    """The record's payload as its typed record; None when the record has none, ``UnknownPayload`` for a
    payload type this version does not know. A damaged payload is a ``ReplayFormatError``."""
    if record.payload_type == f.PayloadType.NONE:
        return None
    kind = DECODERS.get(record.payload_type)
    if kind is None:
        return UnknownPayload(record.payload_type)
    return kind.read(PayloadBytes(replay, record, replay.payload(record)))


__all__ = [
    "DECODERS",
    "AllocateBuffer",
    "BufferObject",
    "BufferRange",
    "BufferRangeData",
    "CommandBufferCopy",
    "CommandBufferEvent",
    "CommandBufferFill",
    "CommandBufferObject",
    "CommandBufferUpdate",
    "Dispatch",
    "EventObject",
    "ExecutableCacheObject",
    "ExecutablePrepare",
    "ExecutionBarrier",
    "FileObject",
    "ImportBuffer",
    "Payload",
    "QueueAlloca",
    "QueueCopy",
    "QueueDealloca",
    "QueueExecute",
    "QueueFill",
    "QueueRead",
    "QueueSemaphores",
    "QueueUpdate",
    "QueueWrite",
    "ScopePayload",
    "SemaphoreObject",
    "UnknownPayload",
    "WaitEvents",
    "decode_payload",
    "json_value",
]
