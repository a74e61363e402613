"""Payload decoding of replay records, check for check as IREE's dumper (``dump.c``) makes them.

``decode_payload`` returns the fields ``iree-dump-replay --format=jsonl`` prints for a payload, in its
order, with byte ranges of the replay file as ``FileRange`` and buffer references as ``BufferRef``.
Variable-length parts (semaphore lists, constants, bindings, captured bytes) are located by the same
layout rules and must end exactly at the payload's end, so every count is bounded by the file's size.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from engine.errors import ReplayFormatError
from engine.replay import format as f
from engine.replay.reader import BufferRef, FileRange, FunctionMetadata, Record

if TYPE_CHECKING:
    from engine.replay.reader import ReplayFile

P = f.PayloadType


def _fail(record: Record, message: str, source: str | None) -> ReplayFormatError:
    return ReplayFormatError(
        message, path=source, where=f"record #{record.sequence_ordinal} (byte {record.offset})"
    )


def _ref(values) -> BufferRef:
    buffer_id, offset, length, slot, _reserved = values
    return BufferRef(buffer_id, offset, length, slot)


class _Layout:
    """Consecutive parts of a payload after its fixed header; ``end`` must equal the payload length."""

    def __init__(self, base: int, start: int):
        self.base = base  # file offset of the payload
        self.offset = start

    def take(self, length: int) -> FileRange:
        r = FileRange(self.base + self.offset, length)
        self.offset += length
        return r


def decode_payload(replay: ReplayFile, record: Record) -> dict | None:
    if record.payload_type == P.NONE:
        return None
    data = replay.payload(record)
    n = len(data)
    base = record.payload_offset
    src = replay.source

    def fixed(s: struct.Struct, exact: bool = True, what: str = "payload") -> tuple:
        if (n != s.size) if exact else (n < s.size):
            raise _fail(
                record, f"replay {record.payload_type_name} {what} has {n} bytes; expected {s.size}", src
            )
        return s.unpack_from(data, 0)

    def layout(header: int, *lengths: int, what: str) -> list[FileRange]:
        lay = _Layout(base, header)
        ranges = [lay.take(length) for length in lengths]
        if lay.offset != n:
            raise _fail(record, f"replay {what} payload length mismatch", src)
        return ranges

    t = record.payload_type
    if t == P.REPLAY_SCOPE:
        name_length, flags, r0, r1 = fixed(f.SCOPE, exact=False)
        if flags or r0 or r1:
            raise _fail(record, "replay scope payload reserved fields must be zero", src)
        if name_length == 0 or f.SCOPE.size + name_length != n:
            raise _fail(record, "replay scope payload name length mismatch", src)
        return {"name": bytes(data[f.SCOPE.size :]).decode("utf-8", errors="replace")}
    if t == P.BUFFER_OBJECT:
        v = fixed(f.BUFFER_OBJECT)
        keys = ("allocation_size", "byte_offset", "byte_length", "queue_affinity", "placement_flags",
                "memory_type", "allowed_usage", "allowed_access")  # fmt: skip
        return dict(zip(keys, v[:8]))
    if t == P.ALLOCATOR_ALLOCATE_BUFFER:
        v = fixed(f.ALLOCATE_BUFFER)
        return dict(
            zip(("allocation_size", "queue_affinity", "min_alignment", "usage", "type", "access"), v[:6])
        )
    if t == P.ALLOCATOR_IMPORT_BUFFER:
        v = fixed(f.IMPORT_BUFFER, exact=False)
        data_length = v[10]
        if data_length > n - f.IMPORT_BUFFER.size:
            raise _fail(record, "replay import buffer data extends past record", src)
        out = dict(
            zip(("allocation_size", "queue_affinity", "min_alignment", "usage", "type", "access"), v[:6])
        )
        out.update(external_type=v[8], external_flags=v[9])
        out["data_range"] = FileRange(base + f.IMPORT_BUFFER.size, data_length)
        return out
    if t == P.BUFFER_RANGE:
        v = fixed(f.BUFFER_RANGE)
        return dict(zip(("byte_offset", "byte_length", "mapping_mode", "memory_access"), v[:4]))
    if t == P.BUFFER_RANGE_DATA:
        byte_offset, byte_length, data_length, mapping_mode, memory_access, _, _ = fixed(
            f.BUFFER_RANGE_DATA, exact=False
        )
        if data_length > n - f.BUFFER_RANGE_DATA.size:
            raise _fail(record, "replay buffer range data extends past record", src)
        return {
            "byte_offset": byte_offset,
            "byte_length": byte_length,
            "mapping_mode": mapping_mode,
            "memory_access": memory_access,
            "data_range": FileRange(base + f.BUFFER_RANGE_DATA.size, data_length),
        }
    if t == P.COMMAND_BUFFER_OBJECT:
        v = fixed(f.COMMAND_BUFFER_OBJECT)
        return dict(zip(("mode", "command_categories", "queue_affinity", "binding_capacity"), v))
    if t == P.EXECUTABLE_CACHE_OBJECT:
        identifier_length, _ = fixed(f.EXECUTABLE_CACHE_OBJECT, exact=False)
        if identifier_length > n - f.EXECUTABLE_CACHE_OBJECT.size:
            raise _fail(record, "replay executable cache identifier extends past record", src)
        return {
            "identifier_length": identifier_length,
            "identifier_range": FileRange(base + f.EXECUTABLE_CACHE_OBJECT.size, identifier_length),
        }
    if t == P.EXECUTABLE_PREPARE:
        return _executable_prepare(replay, record, data, fixed)[0]
    if t == P.SEMAPHORE_OBJECT:
        v = fixed(f.SEMAPHORE_OBJECT)
        return dict(zip(("queue_affinity", "initial_value", "flags"), v[:3]))
    if t == P.EVENT_OBJECT:
        v = fixed(f.EVENT_OBJECT)
        return {"queue_affinity": v[0], "flags": v[1]}
    if t == P.FILE_OBJECT:
        v = fixed(f.FILE_OBJECT, exact=False)
        (affinity, length, device, inode, mtime, reference_length, access, flags, handle_type, ref_type,
         validation, digest_type, _r0, _r1, digest) = v  # fmt: skip
        if f.FILE_OBJECT.size + reference_length != n:
            raise _fail(record, "replay file object payload length mismatch", src)
        return {
            "queue_affinity": affinity,
            "file_length": length,
            "file_device": device,
            "file_inode": inode,
            "file_mtime_ns": mtime,
            "reference_length": reference_length,
            "access": access,
            "flags": flags,
            "handle_type": handle_type,
            "reference_type": ref_type,
            "reference_type_name": f.FILE_REFERENCE_NAMES.get(ref_type, "unknown"),
            "validation_type": validation,
            "validation_type_name": f.FILE_VALIDATION_NAMES.get(validation, "unknown"),
            "digest_type": digest_type,
            "digest_fnv1a64": f"0x{int.from_bytes(digest[:8], 'little'):016x}",
            "reference_range": FileRange(base + f.FILE_OBJECT.size, reference_length),
        }
    if t == P.DISPATCH:
        v = fixed(f.DISPATCH, exact=False, what="dispatch payload")
        (executable_id, affinity, ordinal, flags, sx, sy, sz, cx, cy, cz, rb, ro, rl, rs, _rr, local_memory,
         _r0, waits, signals, constants_length, bindings) = v  # fmt: skip
        wait_r, signal_r, const_r, bind_r = layout(
            f.DISPATCH.size,
            waits * f.TIMEPOINT.size,
            signals * f.TIMEPOINT.size,
            constants_length,
            bindings * f.BUFFER_REF.size,
            what="dispatch",
        )
        return {
            "executable_id": executable_id,
            "queue_affinity": affinity,
            "function_ordinal": ordinal,
            "flags": flags,
            "workgroup_count": [cx, cy, cz],
            "workgroup_size": [sx, sy, sz],
            "dynamic_workgroup_local_memory": local_memory,
            "wait_semaphore_count": waits,
            "signal_semaphore_count": signals,
            "constants_length": constants_length,
            "binding_count": bindings,
            "workgroup_count_ref": BufferRef(rb, ro, rl, rs),
            "wait_semaphores_range": wait_r,
            "signal_semaphores_range": signal_r,
            "constants_range": const_r,
            "bindings_range": bind_r,
        }
    if t == P.DEVICE_QUEUE_EXECUTE:
        cb, affinity, flags, waits, signals, bindings = fixed(f.QUEUE_EXECUTE, exact=False)
        wait_r, signal_r, bind_r = layout(
            f.QUEUE_EXECUTE.size,
            waits * f.TIMEPOINT.size,
            signals * f.TIMEPOINT.size,
            bindings * f.BUFFER_REF.size,
            what="queue execute",
        )
        return {
            "command_buffer_id": cb,
            "queue_affinity": affinity,
            "flags": flags,
            "wait_semaphore_count": waits,
            "signal_semaphore_count": signals,
            "binding_count": bindings,
            "wait_semaphores_range": wait_r,
            "signal_semaphores_range": signal_r,
            "bindings_range": bind_r,
            "wait_semaphores": replay.timepoints(wait_r),
            "signal_semaphores": replay.timepoints(signal_r),
            "bindings": replay.buffer_refs(bind_r),
        }
    if t == P.DEVICE_QUEUE_ALLOCA:
        v = fixed(f.QUEUE_ALLOCA, exact=False)
        size, alloc_affinity, alignment, usage, mtype, access, _r0, _r1, affinity, flags, waits, signals = v
        wait_r, signal_r = layout(
            f.QUEUE_ALLOCA.size, waits * f.TIMEPOINT.size, signals * f.TIMEPOINT.size, what="queue alloca"
        )
        return {
            "allocation_size": size,
            "allocation_queue_affinity": alloc_affinity,
            "min_alignment": alignment,
            "usage": usage,
            "type": mtype,
            "access": access,
            "queue_affinity": affinity,
            "flags": flags,
            "wait_semaphore_count": waits,
            "signal_semaphore_count": signals,
            "wait_semaphores_range": wait_r,
            "signal_semaphores_range": signal_r,
        }
    if t in (P.DEVICE_QUEUE_DEALLOCA, P.DEVICE_QUEUE_FILL, P.DEVICE_QUEUE_UPDATE):
        s = {P.DEVICE_QUEUE_DEALLOCA: f.QUEUE_DEALLOCA, P.DEVICE_QUEUE_FILL: f.QUEUE_FILL}.get(
            t, f.QUEUE_UPDATE
        )
        v = fixed(s, exact=False)
        ref = _ref(v[:5])
        out: dict = {"queue_affinity": v[5], "flags": v[6]}
        if t == P.DEVICE_QUEUE_DEALLOCA:
            waits, signals, trailing = v[7], v[8], 0
            out.update(wait_semaphore_count=waits, signal_semaphore_count=signals, buffer_ref=ref)
        elif t == P.DEVICE_QUEUE_FILL:
            waits, signals, trailing = v[7], v[8], v[9]
            out.update(wait_semaphore_count=waits, signal_semaphore_count=signals, pattern_length=trailing)
            out["target_ref"] = ref
        else:
            source_offset, trailing, waits, signals = v[7], v[8], v[9], v[10]
            out.update(
                source_offset=source_offset, wait_semaphore_count=waits, signal_semaphore_count=signals
            )
            out.update(data_length=trailing, target_ref=ref)
        wait_r, signal_r, trail_r = layout(
            s.size, waits * f.TIMEPOINT.size, signals * f.TIMEPOINT.size, trailing, what="queue"
        )
        out.update(wait_semaphores_range=wait_r, signal_semaphores_range=signal_r)
        if t == P.DEVICE_QUEUE_FILL:
            out["pattern_range"] = trail_r
        elif t == P.DEVICE_QUEUE_UPDATE:
            out["data_range"] = trail_r
        return out
    if t == P.DEVICE_QUEUE_COPY:
        v = fixed(f.QUEUE_COPY, exact=False)
        affinity, flags, waits, signals = v[10:14]
        wait_r, signal_r, _ = layout(
            f.QUEUE_COPY.size, waits * f.TIMEPOINT.size, signals * f.TIMEPOINT.size, 0, what="queue"
        )
        return {
            "queue_affinity": affinity,
            "flags": flags,
            "wait_semaphore_count": waits,
            "signal_semaphore_count": signals,
            "source_ref": _ref(v[0:5]),
            "target_ref": _ref(v[5:10]),
            "wait_semaphores_range": wait_r,
            "signal_semaphores_range": signal_r,
        }
    if t == P.DEVICE_QUEUE_READ:
        v = fixed(f.QUEUE_READ, exact=False)
        file_id, source_offset = v[0], v[1]
        affinity, flags, captured, waits, signals = v[7:12]
        wait_r, signal_r, data_r = layout(
            f.QUEUE_READ.size, waits * f.TIMEPOINT.size, signals * f.TIMEPOINT.size, captured, what="queue"
        )
        return {
            "source_file_id": file_id,
            "source_offset": source_offset,
            "queue_affinity": affinity,
            "flags": flags,
            "captured_data_length": captured,
            "wait_semaphore_count": waits,
            "signal_semaphore_count": signals,
            "target_ref": _ref(v[2:7]),
            "wait_semaphores_range": wait_r,
            "signal_semaphores_range": signal_r,
            "captured_data_range": data_r,
        }
    if t == P.DEVICE_QUEUE_WRITE:
        v = fixed(f.QUEUE_WRITE, exact=False)
        file_id, target_offset, affinity, flags, waits, signals = v[5:11]
        wait_r, signal_r, _ = layout(
            f.QUEUE_WRITE.size, waits * f.TIMEPOINT.size, signals * f.TIMEPOINT.size, 0, what="queue"
        )
        return {
            "target_file_id": file_id,
            "target_offset": target_offset,
            "queue_affinity": affinity,
            "flags": flags,
            "wait_semaphore_count": waits,
            "signal_semaphore_count": signals,
            "source_ref": _ref(v[0:5]),
            "wait_semaphores_range": wait_r,
            "signal_semaphores_range": signal_r,
        }
    if t == P.COMMAND_BUFFER_EXECUTION_BARRIER:
        source, target, flags, memory, buffers = fixed(f.EXECUTION_BARRIER, exact=False)
        mem_r, buf_r = layout(
            f.EXECUTION_BARRIER.size,
            memory * f.MEMORY_BARRIER.size,
            buffers * f.BUFFER_BARRIER_SIZE,
            what="execution barrier",
        )
        return {
            "source_stage_mask": source,
            "target_stage_mask": target,
            "flags": flags,
            "memory_barrier_count": memory,
            "buffer_barrier_count": buffers,
            "memory_barriers_range": mem_r,
            "buffer_barriers_range": buf_r,
        }
    if t == P.COMMAND_BUFFER_EVENT:
        event_id, source = fixed(f.COMMAND_BUFFER_EVENT)
        return {"event_id": event_id, "source_stage_mask": source}
    if t == P.COMMAND_BUFFER_WAIT_EVENTS:
        source, target, events, memory, buffers, _ = fixed(f.WAIT_EVENTS, exact=False)
        ev_r, mem_r, buf_r = layout(
            f.WAIT_EVENTS.size, events * 8, memory * f.MEMORY_BARRIER.size, buffers * f.BUFFER_BARRIER_SIZE,
            what="wait events",
        )  # fmt: skip
        return {
            "source_stage_mask": source,
            "target_stage_mask": target,
            "event_count": events,
            "memory_barrier_count": memory,
            "buffer_barrier_count": buffers,
            "events_range": ev_r,
            "memory_barriers_range": mem_r,
            "buffer_barriers_range": buf_r,
        }
    if t == P.COMMAND_BUFFER_FILL_BUFFER:
        v = fixed(f.CB_FILL, exact=False)
        flags, pattern_length = v[5], v[7]
        if f.CB_FILL.size + pattern_length != n:
            raise _fail(record, "replay command buffer fill payload length mismatch", src)
        return {
            "flags": flags,
            "pattern_length": pattern_length,
            "target": _ref(v[0:5]),
            "pattern_range": FileRange(base + f.CB_FILL.size, pattern_length),
        }
    if t == P.COMMAND_BUFFER_UPDATE_BUFFER:
        v = fixed(f.CB_UPDATE, exact=False)
        flags, source_offset, data_length = v[5], v[7], v[8]
        if f.CB_UPDATE.size + data_length != n:
            raise _fail(record, "replay command buffer update payload length mismatch", src)
        return {
            "flags": flags,
            "source_offset": source_offset,
            "data_length": data_length,
            "target": _ref(v[0:5]),
            "data_range": FileRange(base + f.CB_UPDATE.size, data_length),
        }
    if t == P.COMMAND_BUFFER_COPY_BUFFER:
        v = fixed(f.CB_COPY)
        return {"flags": v[10], "source": _ref(v[0:5]), "target": _ref(v[5:10])}
    return {}  # a payload type this version does not know: IREE prints null


def _executable_prepare(
    replay: ReplayFile, record: Record, data: memoryview, fixed
) -> tuple[dict, FileRange]:
    affinity, data_length, constant_count, caching, format_length, metadata_length, _ = fixed(
        f.EXECUTABLE_PREPARE, exact=False
    )
    n = len(data)
    base = record.payload_offset
    format_offset = f.EXECUTABLE_PREPARE.size
    data_offset = format_offset + format_length
    constants_offset = data_offset + data_length
    metadata_offset = constants_offset + constant_count * 4
    if metadata_offset + metadata_length != n:
        raise _fail(record, "replay executable prepare payload length mismatch", replay.source)
    out = {
        "queue_affinity": affinity,
        "caching_mode": caching,
        "executable_format_length": format_length,
        "executable_data_length": data_length,
        "constant_count": constant_count,
        "executable_metadata_length": metadata_length,
        "format_range": FileRange(base + format_offset, format_length),
        "data_range": FileRange(base + data_offset, data_length),
        "constants_range": FileRange(base + constants_offset, constant_count * 4),
        "metadata_range": FileRange(base + metadata_offset, metadata_length),
    }
    metadata = FileRange(base + metadata_offset, metadata_length)
    header = _metadata_header(replay, record, metadata)
    if header is not None:
        out["metadata_function_count"] = header[0]
        out["metadata_parameter_count"] = header[1]
        out["metadata_function_name_storage_length"] = header[2]
    return out, metadata


def _metadata_header(replay: ReplayFile, record: Record, metadata: FileRange) -> tuple[int, int, int] | None:
    if metadata.length < f.METADATA_HEADER.size:
        if metadata.length == 0:
            return None
        raise _fail(record, "replay executable metadata is too short", replay.source)
    functions, parameters, names, reserved = f.METADATA_HEADER.unpack_from(replay.data, metadata.offset)
    if reserved:
        raise _fail(record, "replay executable metadata reserved fields must be zero", replay.source)
    expected = (
        f.METADATA_HEADER.size
        + functions * f.FUNCTION_METADATA.size
        + parameters * f.PARAMETER_METADATA.size
        + names
    )
    if expected != metadata.length:
        raise _fail(record, "replay executable metadata length mismatch", replay.source)
    return functions, parameters, names


def decode_executable_metadata(replay: ReplayFile, record: Record) -> list[FunctionMetadata] | None:
    if record.payload_type != P.EXECUTABLE_PREPARE:
        return None
    data = replay.payload(record)

    def fixed(s: struct.Struct, exact: bool = True, what: str = "payload") -> tuple:
        if len(data) < s.size:
            raise _fail(record, "replay executable prepare payload is short", replay.source)
        return s.unpack_from(data, 0)

    _, metadata = _executable_prepare(replay, record, data, fixed)
    header = _metadata_header(replay, record, metadata)
    if header is None:
        return None
    count, parameter_total, name_bytes = header
    at = metadata.offset + f.METADATA_HEADER.size
    rows = []
    for _ in range(count):
        rows.append(f.FUNCTION_METADATA.unpack_from(replay.data, at))
        at += f.FUNCTION_METADATA.size
    params = []
    for _ in range(parameter_total):
        params.append(f.PARAMETER_METADATA.unpack_from(replay.data, at)[:4])
        at += f.PARAMETER_METADATA.size
    names_end = at + name_bytes
    out = []
    next_param = 0
    for flags, sx, sy, sz, constant_count, binding_count, parameter_count, name_length in rows:
        if at + name_length > names_end or next_param + parameter_count > parameter_total:
            raise _fail(record, "replay executable metadata names or parameters overrun", replay.source)
        name = bytes(replay.data[at : at + name_length]).decode("utf-8", errors="replace")
        at += name_length
        out.append(
            FunctionMetadata(
                name,
                flags,
                (sx, sy, sz),
                constant_count,
                binding_count,
                tuple(params[next_param : next_param + parameter_count]),
            )
        )
        next_param += parameter_count
    return out
