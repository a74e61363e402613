"""HAL enum values as compiled programs pass them, and IREE's ways of printing and matching them.

Values are those of ``iree/hal/buffer.h``, ``command_buffer.h`` and ``buffer_view.h`` (docs/iree-3.13-runtime-facts.md §4.3).
``format_memory_type``/``format_buffer_usage`` print bitfields exactly like ``iree_bitfield_format`` so error
messages match IREE's; ``match_pattern`` is ``iree_string_view_match_pattern`` (``hal.device.id`` queries).
"""

from __future__ import annotations

# -- memory types (iree_hal_memory_type_t)
MEMORY_TYPE_NONE = 0
MEMORY_TYPE_OPTIMAL = 1 << 0
MEMORY_TYPE_HOST_VISIBLE = 1 << 1
MEMORY_TYPE_HOST_COHERENT = 1 << 2
MEMORY_TYPE_HOST_CACHED = 1 << 3
MEMORY_TYPE_HOST_LOCAL = MEMORY_TYPE_HOST_VISIBLE | MEMORY_TYPE_HOST_COHERENT | (1 << 6)
MEMORY_TYPE_DEVICE_VISIBLE = 1 << 4
MEMORY_TYPE_DEVICE_LOCAL = MEMORY_TYPE_DEVICE_VISIBLE | (1 << 5)

# -- memory access (iree_hal_memory_access_t)
MEMORY_ACCESS_READ = 1 << 0
MEMORY_ACCESS_WRITE = 1 << 1
MEMORY_ACCESS_DISCARD = 1 << 2
MEMORY_ACCESS_MAY_ALIAS = 1 << 3
MEMORY_ACCESS_UNALIGNED = 1 << 4
MEMORY_ACCESS_ANY = 1 << 5
MEMORY_ACCESS_ALL = MEMORY_ACCESS_READ | MEMORY_ACCESS_WRITE | MEMORY_ACCESS_DISCARD

# -- buffer usage (iree_hal_buffer_usage_t)
BUFFER_USAGE_TRANSFER_SOURCE = 1 << 0
BUFFER_USAGE_TRANSFER_TARGET = 1 << 1
BUFFER_USAGE_TRANSFER = BUFFER_USAGE_TRANSFER_SOURCE | BUFFER_USAGE_TRANSFER_TARGET
BUFFER_USAGE_DISPATCH_INDIRECT_PARAMETERS = 1 << 8
BUFFER_USAGE_DISPATCH_UNIFORM_READ = 1 << 9
BUFFER_USAGE_DISPATCH_STORAGE_READ = 1 << 10
BUFFER_USAGE_DISPATCH_STORAGE_WRITE = 1 << 11
BUFFER_USAGE_DISPATCH_STORAGE = BUFFER_USAGE_DISPATCH_STORAGE_READ | BUFFER_USAGE_DISPATCH_STORAGE_WRITE
BUFFER_USAGE_DISPATCH_IMAGE_READ = 1 << 12
BUFFER_USAGE_DISPATCH_IMAGE_WRITE = 1 << 13
BUFFER_USAGE_DISPATCH_IMAGE = BUFFER_USAGE_DISPATCH_IMAGE_READ | BUFFER_USAGE_DISPATCH_IMAGE_WRITE
BUFFER_USAGE_DISPATCH = (
    BUFFER_USAGE_DISPATCH_INDIRECT_PARAMETERS
    | BUFFER_USAGE_DISPATCH_UNIFORM_READ
    | BUFFER_USAGE_DISPATCH_STORAGE
    | BUFFER_USAGE_DISPATCH_IMAGE
)
BUFFER_USAGE_SHARING_EXPORT = 1 << 16
BUFFER_USAGE_SHARING_REPLICATE = 1 << 17
BUFFER_USAGE_SHARING_CONCURRENT = 1 << 18
BUFFER_USAGE_SHARING_IMMUTABLE = 1 << 19
BUFFER_USAGE_MAPPING_SCOPED = 1 << 24
BUFFER_USAGE_MAPPING_PERSISTENT = 1 << 25
BUFFER_USAGE_MAPPING_OPTIONAL = 1 << 26
BUFFER_USAGE_MAPPING_ACCESS_RANDOM = 1 << 27
BUFFER_USAGE_MAPPING_ACCESS_SEQUENTIAL_WRITE = 1 << 28
BUFFER_USAGE_MAPPING = BUFFER_USAGE_MAPPING_SCOPED | BUFFER_USAGE_MAPPING_ACCESS_RANDOM
BUFFER_USAGE_DEFAULT = BUFFER_USAGE_TRANSFER | BUFFER_USAGE_DISPATCH_STORAGE

# -- command buffers
COMMAND_BUFFER_MODE_ONE_SHOT = 1 << 0
COMMAND_BUFFER_MODE_ALLOW_INLINE_EXECUTION = 1 << 4
COMMAND_BUFFER_MODE_UNVALIDATED = 1 << 5
COMMAND_CATEGORY_TRANSFER = 1 << 0
COMMAND_CATEGORY_DISPATCH = 1 << 1
DISPATCH_FLAG_DYNAMIC_INDIRECT_PARAMETERS = 1 << 0
DISPATCH_FLAG_STATIC_INDIRECT_PARAMETERS = 1 << 1

# -- encodings
ENCODING_TYPE_OPAQUE = 0
ENCODING_TYPE_DENSE_ROW_MAJOR = 1

WHOLE_BUFFER = -1  # IREE_HAL_WHOLE_BUFFER as the VM passes it (i64 -1)
QUEUE_AFFINITY_ANY = -1
INFINITE_TIMEOUT_MS = 0xFFFFFFFF

_MEMORY_TYPE_NAMES = [
    (MEMORY_TYPE_HOST_LOCAL, "HOST_LOCAL"),
    (MEMORY_TYPE_DEVICE_LOCAL, "DEVICE_LOCAL"),
    (MEMORY_TYPE_OPTIMAL, "OPTIMAL"),
    (MEMORY_TYPE_HOST_VISIBLE, "HOST_VISIBLE"),
    (MEMORY_TYPE_HOST_COHERENT, "HOST_COHERENT"),
    (MEMORY_TYPE_HOST_CACHED, "HOST_CACHED"),
    (MEMORY_TYPE_DEVICE_VISIBLE, "DEVICE_VISIBLE"),
]
_BUFFER_USAGE_NAMES = [
    (BUFFER_USAGE_TRANSFER, "TRANSFER"),
    (BUFFER_USAGE_DISPATCH, "DISPATCH"),
    (BUFFER_USAGE_DISPATCH_STORAGE, "DISPATCH_STORAGE"),
    (BUFFER_USAGE_DISPATCH_IMAGE, "DISPATCH_IMAGE"),
    (BUFFER_USAGE_MAPPING, "MAPPING"),
    (BUFFER_USAGE_TRANSFER_SOURCE, "TRANSFER_SOURCE"),
    (BUFFER_USAGE_TRANSFER_TARGET, "TRANSFER_TARGET"),
    (BUFFER_USAGE_DISPATCH_INDIRECT_PARAMETERS, "DISPATCH_INDIRECT_PARAMETERS"),
    (BUFFER_USAGE_DISPATCH_UNIFORM_READ, "DISPATCH_UNIFORM_READ"),
    (BUFFER_USAGE_DISPATCH_STORAGE_READ, "DISPATCH_STORAGE_READ"),
    (BUFFER_USAGE_DISPATCH_STORAGE_WRITE, "DISPATCH_STORAGE_WRITE"),
    (BUFFER_USAGE_DISPATCH_IMAGE_READ, "DISPATCH_IMAGE_READ"),
    (BUFFER_USAGE_DISPATCH_IMAGE_WRITE, "DISPATCH_IMAGE_WRITE"),
    (BUFFER_USAGE_SHARING_EXPORT, "SHARING_EXPORT"),
    (BUFFER_USAGE_SHARING_REPLICATE, "SHARING_REPLICATE"),
    (BUFFER_USAGE_SHARING_CONCURRENT, "SHARING_CONCURRENT"),
    (BUFFER_USAGE_SHARING_IMMUTABLE, "SHARING_IMMUTABLE"),
    (BUFFER_USAGE_MAPPING_SCOPED, "MAPPING_SCOPED"),
    (BUFFER_USAGE_MAPPING_PERSISTENT, "MAPPING_PERSISTENT"),
    (BUFFER_USAGE_MAPPING_OPTIONAL, "MAPPING_OPTIONAL"),
    (BUFFER_USAGE_MAPPING_ACCESS_RANDOM, "MAPPING_ACCESS_RANDOM"),
    (BUFFER_USAGE_MAPPING_ACCESS_SEQUENTIAL_WRITE, "MAPPING_ACCESS_SEQUENTIAL_WRITE"),
]


def _format_bitfield(value: int, names: list[tuple[int, str]]) -> str:
    # iree_bitfield_format: greedy over the table (combined names first), leftover bits as `%Xh`.
    remaining = value & 0xFFFFFFFF
    parts = []
    for bits, name in names:
        if remaining & bits == bits:
            parts.append(name)
            remaining &= ~bits
    if remaining:
        parts.append(f"{remaining:X}h")
    return "|".join(parts)


def format_memory_type(value: int) -> str:
    return _format_bitfield(value, _MEMORY_TYPE_NAMES)


def format_buffer_usage(value: int) -> str:
    return _format_bitfield(value, _BUFFER_USAGE_NAMES)


_MAX_PATTERN_WILDCARDS = 16


def match_pattern(value: str, pattern: str) -> bool:
    """``iree_string_view_match_pattern``: ``*`` matches any run of characters, ``?`` exactly one."""
    if sum(pattern.count(c) for c in "*?") > _MAX_PATTERN_WILDCARDS:
        return False
    return _match(value, pattern)


def _match(value: str, pattern: str) -> bool:
    wild = min((i for i in (pattern.find("*"), pattern.find("?")) if i >= 0), default=-1)
    if wild < 0:
        return value == pattern
    if wild > 0:
        if value[:wild] != pattern[:wild]:
            return False
        value, pattern = value[wild:], pattern[wild:]
    # A run of wildcards is "at least `min_chars` characters, more if it holds a `*`".
    skip = min_chars = 0
    has_star = False
    while skip < len(pattern) and pattern[skip] in "*?":
        if pattern[skip] == "*":
            has_star = True
        else:
            min_chars += 1
        skip += 1
    rest = pattern[skip:]
    if len(value) < min_chars:
        return False
    if not has_star:
        return _match(value[min_chars:], rest)
    if not rest:
        return True
    return any(_match(value[i:], rest) for i in range(min_chars, len(value) + 1))


def format_shape(shape: tuple[int, ...] | list[int]) -> str:
    """``iree_hal_format_shape``: dims joined by ``x`` (empty for a scalar)."""
    return "x".join(str(int(d)) for d in shape)


def format_shape_and_type(shape: tuple[int, ...] | list[int], element_type: str) -> str:
    """``2x3xf32``, or ``i32`` for rank 0, as ``iree_hal_buffer_view_format`` writes a tensor's head."""
    return f"{format_shape(shape)}x{element_type}" if len(shape) else element_type
