"""IREE's HAL replay file format (``.ireereplay``, version 2.0 of IREE 3.13): codes, names and layouts.

Everything here mirrors ``runtime/src/iree/hal/replay/format.h`` and ``format.c`` of IREE's source: the
file header, the fixed record header, the payload structs (little-endian, C layout with natural
alignment: the ``x`` pad bytes below are the compiler's padding), and the stable names that
``iree-dump-replay`` prints.
"""

from __future__ import annotations

import struct
from enum import IntEnum

MAGIC = 0x50525249  # "IRRP"
VERSION_MAJOR = 2
VERSION_MINOR = 0

FILE_HEADER = struct.Struct("<IHHIIQ")  # magic, version major/minor, header_length, flags, file_length
# record_length, payload_length, sequence_ordinal, thread_id, device_id, object_id, related_object_id,
# header_length, record_type, record_flags, payload_type, object_type, operation_code, status_code,
# reserved0, (pad), reserved1
RECORD_HEADER = struct.Struct("<7QIHHIIIII4xQ")

RECORD_FLAG_OPTIONAL = 1


class RecordType(IntEnum):
    NONE = 0
    SESSION = 1
    OBJECT = 2
    OPERATION = 3
    BLOB = 4
    UNSUPPORTED = 5


class ObjectType(IntEnum):
    NONE = 0
    DEVICE = 1
    ALLOCATOR = 2
    POOL = 3
    BUFFER = 4
    COMMAND_BUFFER = 5
    EXECUTABLE_CACHE = 6
    EXECUTABLE = 7
    SEMAPHORE = 8
    FILE = 9
    EVENT = 10
    CHANNEL = 11
    HOST_CALL = 12


class PayloadType(IntEnum):
    NONE = 0
    BUFFER_OBJECT = 1
    ALLOCATOR_ALLOCATE_BUFFER = 2
    BUFFER_RANGE = 3
    BUFFER_RANGE_DATA = 4
    COMMAND_BUFFER_OBJECT = 5
    EXECUTABLE_CACHE_OBJECT = 6
    EXECUTABLE_PREPARE = 7
    DISPATCH = 8
    DEVICE_QUEUE_EXECUTE = 9
    SEMAPHORE_OBJECT = 10
    COMMAND_BUFFER_COPY_BUFFER = 11
    DEVICE_QUEUE_ALLOCA = 12
    COMMAND_BUFFER_EXECUTION_BARRIER = 13
    DEVICE_QUEUE_DEALLOCA = 14
    DEVICE_QUEUE_FILL = 15
    DEVICE_QUEUE_UPDATE = 16
    DEVICE_QUEUE_COPY = 17
    COMMAND_BUFFER_FILL_BUFFER = 18
    COMMAND_BUFFER_UPDATE_BUFFER = 19
    EVENT_OBJECT = 20
    COMMAND_BUFFER_EVENT = 21
    COMMAND_BUFFER_WAIT_EVENTS = 22
    FILE_OBJECT = 23
    DEVICE_QUEUE_READ = 24
    DEVICE_QUEUE_WRITE = 25
    ALLOCATOR_IMPORT_BUFFER = 26
    REPLAY_SCOPE = 27


RECORD_TYPE_NAMES = {t.value: t.name.lower() for t in RecordType}
OBJECT_TYPE_NAMES = {t.value: t.name.lower() for t in ObjectType}
PAYLOAD_TYPE_NAMES = {t.value: t.name.lower() for t in PayloadType}

# iree_hal_replay_operation_code_string
OPERATION_NAMES = {
    0: "none",
    1: "device.trim",
    2: "device.query_i64",
    3: "device.query_capabilities",
    4: "device.refine_topology_edge",
    5: "device.assign_topology_info",
    6: "device.create_channel",
    7: "device.create_command_buffer",
    8: "device.create_event",
    9: "device.create_executable_cache",
    10: "device.import_file",
    11: "device.create_semaphore",
    12: "device.query_queue_pool_backend",
    13: "device.queue_alloca",
    14: "device.queue_dealloca",
    15: "device.queue_fill",
    16: "device.queue_update",
    17: "device.queue_copy",
    18: "device.queue_read",
    19: "device.queue_write",
    20: "device.queue_host_call",
    21: "device.queue_dispatch",
    22: "device.queue_execute",
    23: "device.queue_flush",
    24: "device.profiling_begin",
    25: "device.profiling_flush",
    26: "device.profiling_end",
    27: "device.external_capture_begin",
    28: "device.external_capture_end",
    50: "replay.scope_begin",
    51: "replay.scope_end",
    100: "allocator.trim",
    101: "allocator.query_memory_heaps",
    102: "allocator.allocate_buffer",
    103: "allocator.import_buffer",
    104: "allocator.export_buffer",
    105: "allocator.virtual_memory_query_granularity",
    106: "allocator.virtual_memory_reserve",
    107: "allocator.virtual_memory_release",
    108: "allocator.physical_memory_allocate",
    109: "allocator.physical_memory_free",
    110: "allocator.virtual_memory_map",
    111: "allocator.virtual_memory_unmap",
    112: "allocator.virtual_memory_protect",
    113: "allocator.virtual_memory_advise",
    200: "buffer.map_range",
    201: "buffer.unmap_range",
    202: "buffer.invalidate_range",
    203: "buffer.flush_range",
    300: "command_buffer.begin",
    301: "command_buffer.end",
    302: "command_buffer.begin_debug_group",
    303: "command_buffer.end_debug_group",
    304: "command_buffer.execution_barrier",
    305: "command_buffer.signal_event",
    306: "command_buffer.reset_event",
    307: "command_buffer.wait_events",
    308: "command_buffer.advise_buffer",
    309: "command_buffer.fill_buffer",
    310: "command_buffer.update_buffer",
    311: "command_buffer.copy_buffer",
    312: "command_buffer.collective",
    313: "command_buffer.dispatch",
    400: "executable_cache.infer_format",
    401: "executable_cache.can_prepare_format",
    402: "executable_cache.prepare_executable",
    500: "executable.function_count",
    501: "executable.function_info",
    502: "executable.function_parameters",
    503: "executable.lookup_function_by_name",
}
OP = {name: code for code, name in OPERATION_NAMES.items()}

# iree_status_code_string
STATUS_NAMES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
    "DEFERRED",
    "INCOMPATIBLE",
)

FILE_REFERENCE_NAMES = {0: "none", 1: "external_path", 2: "inline_bytes", 3: "captured_ranges"}
FILE_VALIDATION_NAMES = {0: "none", 1: "identity", 2: "digest"}


def record_type_name(code: int) -> str:
    return RECORD_TYPE_NAMES.get(code, "unknown")


def object_type_name(code: int) -> str:
    return OBJECT_TYPE_NAMES.get(code, "unknown")


def operation_name(code: int) -> str:
    return OPERATION_NAMES.get(code, "unknown")


def payload_type_name(code: int) -> str:
    return PAYLOAD_TYPE_NAMES.get(code, "unknown")


def status_name(code: int) -> str:
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else "UNKNOWN_STATUS"


# -- payload structs

BUFFER_REF = struct.Struct("<3QII")  # buffer_id, offset, length, buffer_slot, reserved0
TIMEPOINT = struct.Struct("<QQ")  # semaphore_id, value
MEMORY_BARRIER = struct.Struct("<II")
BUFFER_BARRIER_SIZE = 8 + BUFFER_REF.size
OBJECT_ID = struct.Struct("<Q")

BUFFER_OBJECT = struct.Struct("<4QIIIHHI4x")
ALLOCATE_BUFFER = struct.Struct(
    "<3QIIHHI"
)  # allocation_size, queue_affinity, min_alignment, usage, type, access
IMPORT_BUFFER = struct.Struct("<3QIIHHI" + "IIQ")
BUFFER_RANGE = struct.Struct("<QQIHHI4x")
BUFFER_RANGE_DATA = struct.Struct("<3QIHHI4x")
COMMAND_BUFFER_OBJECT = struct.Struct("<IIQQ")
EXECUTABLE_CACHE_OBJECT = struct.Struct("<QQ")
# queue_affinity, executable_data_length, constant_count, caching_mode, format_length, metadata_length, reserved
EXECUTABLE_PREPARE = struct.Struct("<3Q4I")
METADATA_HEADER = struct.Struct("<4Q")  # function_count, parameter_count, name_storage_length, reserved1
# flags, workgroup_size[3], constant_count, binding_count, parameter_count, name_length
FUNCTION_METADATA = struct.Struct("<Q3I4H4x")
PARAMETER_METADATA = struct.Struct("<HHBBH")  # offset, flags, type, size, reserved0
SEMAPHORE_OBJECT = struct.Struct("<4Q")
# queue_affinity, file_length, file_device, file_inode, file_mtime_ns, reference_length, access, flags,
# handle_type, reference_type, validation_type, digest_type, reserved0, reserved1, digest
FILE_OBJECT = struct.Struct("<6Q5IHHI32s4x")
EVENT_OBJECT = struct.Struct("<QIIQ")
SCOPE = struct.Struct("<QIIQ")  # name_length, flags, reserved0, reserved1
COMMAND_BUFFER_EVENT = struct.Struct("<QQ")
WAIT_EVENTS = struct.Struct("<6Q")
EXECUTION_BARRIER = struct.Struct("<5Q")
# executable_id, queue_affinity, function_ordinal, flags, workgroup_size[3], workgroup_count[3],
# workgroup_count_ref, dynamic_workgroup_local_memory, reserved0, wait, signal, constants_length, bindings
DISPATCH = struct.Struct("<QQII3I3I" + "3QII" + "II4Q")
QUEUE_EXECUTE = struct.Struct("<6Q")
QUEUE_ALLOCA = struct.Struct("<3QIIHHI" + "4Q")
QUEUE_DEALLOCA = struct.Struct("<3QII" + "4Q")
QUEUE_FILL = struct.Struct("<3QII" + "5Q")
QUEUE_UPDATE = struct.Struct("<3QII" + "6Q")
QUEUE_COPY = struct.Struct("<3QII3QII" + "4Q")
QUEUE_READ = struct.Struct("<QQ3QII" + "5Q")
QUEUE_WRITE = struct.Struct("<3QIIQQ" + "4Q")
CB_FILL = struct.Struct("<3QIIIIQ")
CB_UPDATE = struct.Struct("<3QIIIIQQ")
CB_COPY = struct.Struct("<3QII3QIIIIQ")

assert DISPATCH.size == 120 and FILE_OBJECT.size == 112 and BUFFER_OBJECT.size == 56
assert QUEUE_ALLOCA.size == 72 and QUEUE_READ.size == 88 and CB_COPY.size == 80
