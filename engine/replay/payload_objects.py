"""Typed payloads of the records that create HAL objects or move host bytes: scopes, buffers and their
mappings, command buffers, executables (with their ABI metadata, read when asked), semaphores, events,
files. Field names and order are ``iree-dump-replay --format=jsonl``'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from engine.errors import ReplayFormatError
from engine.replay import format as f
from engine.replay.payload_base import Payload, PayloadBytes, payload, replay_field
from engine.replay.reader import FileRange, FunctionMetadata

if TYPE_CHECKING:
    from engine.replay.reader import ReplayFile

T = f.PayloadType


@payload(T.REPLAY_SCOPE)
@dataclass(frozen=True)
class ScopePayload(Payload):
    """``replay.scope_begin``: the name of a host scope (IREE's tools: ``execute``, a function...)."""

    name: str

    @classmethod
    def read(cls, raw: PayloadBytes) -> ScopePayload:
        name_length, flags, r0, r1 = raw.fixed(f.SCOPE, exact=False)
        if flags or r0 or r1:
            raise raw.fail("replay scope payload reserved fields must be zero")
        if name_length == 0 or f.SCOPE.size + name_length != raw.length:
            raise raw.fail("replay scope payload name length mismatch")
        return cls(bytes(raw.data[f.SCOPE.size :]).decode("utf-8", errors="replace"))


@payload(T.BUFFER_OBJECT)
@dataclass(frozen=True)
class BufferObject(Payload):
    allocation_size: int
    byte_offset: int
    byte_length: int
    queue_affinity: int
    placement_flags: int
    memory_type: int
    allowed_usage: int
    allowed_access: int

    @classmethod
    def read(cls, raw: PayloadBytes) -> BufferObject:
        return cls(*raw.fixed(f.BUFFER_OBJECT)[:8])


@payload(T.ALLOCATOR_ALLOCATE_BUFFER)
@dataclass(frozen=True)
class AllocateBuffer(Payload):
    allocation_size: int
    queue_affinity: int
    min_alignment: int
    usage: int
    type: int  # the memory type (IREE's key)
    access: int

    @classmethod
    def read(cls, raw: PayloadBytes) -> AllocateBuffer:
        return cls(*raw.fixed(f.ALLOCATE_BUFFER)[:6])


@payload(T.ALLOCATOR_IMPORT_BUFFER)
@dataclass(frozen=True)
class ImportBuffer(Payload):
    """A host allocation imported as a buffer: its bytes at import are in ``data_range``."""

    allocation_size: int
    queue_affinity: int
    min_alignment: int
    usage: int
    type: int
    access: int
    external_type: int
    external_flags: int
    data_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> ImportBuffer:
        v = raw.fixed(f.IMPORT_BUFFER, exact=False)
        data = raw.tail(f.IMPORT_BUFFER.size, v[10], "import buffer data")
        return cls(*v[:6], v[8], v[9], data)


@payload(T.BUFFER_RANGE)
@dataclass(frozen=True)
class BufferRange(Payload):
    """``buffer.map_range`` and the like: a range and how it was mapped (nothing written)."""

    byte_offset: int
    byte_length: int
    mapping_mode: int
    memory_access: int

    @classmethod
    def read(cls, raw: PayloadBytes) -> BufferRange:
        return cls(*raw.fixed(f.BUFFER_RANGE)[:4])


@payload(T.BUFFER_RANGE_DATA)
@dataclass(frozen=True)
class BufferRangeData(Payload):
    """``buffer.unmap_range`` / ``flush_range`` of a written mapping: the bytes the host wrote."""

    byte_offset: int
    byte_length: int
    mapping_mode: int
    memory_access: int
    data_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> BufferRangeData:
        offset, length, data_length, mode, access, _, _ = raw.fixed(f.BUFFER_RANGE_DATA, exact=False)
        return cls(
            offset, length, mode, access, raw.tail(f.BUFFER_RANGE_DATA.size, data_length, "buffer range data")
        )


@payload(T.COMMAND_BUFFER_OBJECT)
@dataclass(frozen=True)
class CommandBufferObject(Payload):
    mode: int
    command_categories: int
    queue_affinity: int
    binding_capacity: int

    @classmethod
    def read(cls, raw: PayloadBytes) -> CommandBufferObject:
        return cls(*raw.fixed(f.COMMAND_BUFFER_OBJECT))


@payload(T.EXECUTABLE_CACHE_OBJECT)
@dataclass(frozen=True)
class ExecutableCacheObject(Payload):
    identifier_length: int
    identifier_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> ExecutableCacheObject:
        length, _ = raw.fixed(f.EXECUTABLE_CACHE_OBJECT, exact=False)
        return cls(length, raw.tail(f.EXECUTABLE_CACHE_OBJECT.size, length, "executable cache identifier"))


@payload(T.SEMAPHORE_OBJECT)
@dataclass(frozen=True)
class SemaphoreObject(Payload):
    queue_affinity: int
    initial_value: int
    flags: int

    @classmethod
    def read(cls, raw: PayloadBytes) -> SemaphoreObject:
        return cls(*raw.fixed(f.SEMAPHORE_OBJECT)[:3])


@payload(T.EVENT_OBJECT)
@dataclass(frozen=True)
class EventObject(Payload):
    queue_affinity: int
    flags: int

    @classmethod
    def read(cls, raw: PayloadBytes) -> EventObject:
        return cls(*raw.fixed(f.EVENT_OBJECT)[:2])


@payload(T.FILE_OBJECT)
@dataclass(frozen=True)
class FileObject(Payload):
    """A file the program imported: by path, inline in the replay, or as the ranges its reads captured."""

    JSON_EXTRA = ("reference_type_name", "validation_type_name", "digest_fnv1a64")

    queue_affinity: int
    file_length: int
    file_device: int
    file_inode: int
    file_mtime_ns: int
    reference_length: int
    access: int
    flags: int
    handle_type: int
    reference_type: int  # 1 external path, 2 inline bytes, 3 captured ranges
    validation_type: int
    digest_type: int
    digest: bytes = field(metadata={"json": False})  # printed as digest_fnv1a64
    reference_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> FileObject:
        v = raw.fixed(f.FILE_OBJECT, exact=False)
        reference_length = v[5]
        if f.FILE_OBJECT.size + reference_length != raw.length:
            raise raw.fail("replay file object payload length mismatch")
        return cls(*v[:12], v[14], raw.range(f.FILE_OBJECT.size, reference_length))

    @property
    def reference_type_name(self) -> str:
        return f.FILE_REFERENCE_NAMES.get(self.reference_type, "unknown")

    @property
    def validation_type_name(self) -> str:
        return f.FILE_VALIDATION_NAMES.get(self.validation_type, "unknown")

    @property
    def digest_fnv1a64(self) -> str:
        return f"0x{int.from_bytes(self.digest[:8], 'little'):016x}"


@payload(T.EXECUTABLE_PREPARE)
@dataclass(frozen=True)
class ExecutablePrepare(Payload):
    """``executable_cache.prepare_executable``: the binary, its format, constants and the ABI metadata
    IREE appends (header checked here; the functions read when asked: ``functions``)."""

    queue_affinity: int
    caching_mode: int
    executable_format_length: int
    executable_data_length: int
    constant_count: int
    executable_metadata_length: int
    format_range: FileRange
    data_range: FileRange
    constants_range: FileRange
    metadata_range: FileRange
    metadata_function_count: int | None  # None (and not printed): the capture has no metadata
    metadata_parameter_count: int | None
    metadata_function_name_storage_length: int | None
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> ExecutablePrepare:
        affinity, data_length, constant_count, caching, format_length, metadata_length, _ = raw.fixed(
            f.EXECUTABLE_PREPARE, exact=False
        )
        format_r, data_r, constants_r, metadata_r = raw.parts(
            f.EXECUTABLE_PREPARE.size, format_length, data_length, constant_count * 4, metadata_length,
            what="executable prepare",
        )  # fmt: skip
        header = _metadata_header(raw, metadata_r) or (None, None, None)
        return cls(
            affinity, caching, format_length, data_length, constant_count, metadata_length,
            format_r, data_r, constants_r, metadata_r, *header, replay=raw.replay,
        )  # fmt: skip

    def to_json(self) -> dict | None:
        out = super().to_json() or {}
        return {k: v for k, v in out.items() if v is not None}

    @cached_property
    def format(self) -> str:
        """The executable format the capture names (``embedded-elf-x86_64``, ``vulkan-spirv-fb``...)."""
        return bytes(self.replay.range_bytes(self.format_range)).decode("utf-8", errors="replace")

    @cached_property
    def constants(self) -> tuple[int, ...]:
        return self.replay.u32s(self.constants_range)

    @cached_property
    def functions(self) -> tuple[FunctionMetadata, ...]:
        """The exported functions the ABI metadata names, in ordinal order (none without metadata)."""
        if self.metadata_function_count is None:
            return ()
        return _functions(self)


def _metadata_header(raw: PayloadBytes, metadata: FileRange) -> tuple[int, int, int] | None:
    if metadata.length < f.METADATA_HEADER.size:
        if metadata.length == 0:
            return None
        raise raw.fail("replay executable metadata is too short")
    functions, parameters, names, reserved = f.METADATA_HEADER.unpack_from(raw.replay.data, metadata.offset)
    if reserved:
        raise raw.fail("replay executable metadata reserved fields must be zero")
    expected = (
        f.METADATA_HEADER.size
        + functions * f.FUNCTION_METADATA.size
        + parameters * f.PARAMETER_METADATA.size
        + names
    )
    if expected != metadata.length:
        raise raw.fail("replay executable metadata length mismatch")
    return functions, parameters, names


def _functions(p: ExecutablePrepare) -> tuple[FunctionMetadata, ...]:
    data, at = p.replay.data, p.metadata_range.offset + f.METADATA_HEADER.size
    rows = [
        f.FUNCTION_METADATA.unpack_from(data, at + k * f.FUNCTION_METADATA.size)
        for k in range(p.metadata_function_count or 0)
    ]
    at += len(rows) * f.FUNCTION_METADATA.size
    parameter_total = p.metadata_parameter_count or 0
    params = [
        f.PARAMETER_METADATA.unpack_from(data, at + k * f.PARAMETER_METADATA.size)[:4]
        for k in range(parameter_total)
    ]
    at += parameter_total * f.PARAMETER_METADATA.size
    names_end = at + (p.metadata_function_name_storage_length or 0)
    out, next_param = [], 0
    for flags, sx, sy, sz, constant_count, binding_count, parameter_count, name_length in rows:
        if at + name_length > names_end or next_param + parameter_count > parameter_total:
            raise ReplayFormatError(
                "replay executable metadata names or parameters overrun",
                path=p.replay.source,
                where=f"byte {p.metadata_range.offset}",
            )
        name = bytes(data[at : at + name_length]).decode("utf-8", errors="replace")
        at += name_length
        parameters = tuple(params[next_param : next_param + parameter_count])
        out.append(FunctionMetadata(name, flags, (sx, sy, sz), constant_count, binding_count, parameters))
        next_param += parameter_count
    return tuple(out)


__all__ = [
    "AllocateBuffer",
    "BufferObject",
    "BufferRange",
    "BufferRangeData",
    "CommandBufferObject",
    "EventObject",
    "ExecutableCacheObject",
    "ExecutablePrepare",
    "FileObject",
    "ImportBuffer",
    "ScopePayload",
    "SemaphoreObject",
]
