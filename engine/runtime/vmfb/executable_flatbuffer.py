"""What IREE's FlatBuffer executables share: the ``iree_flatbuffer_file_header_t`` and the debug info.

IREE's GPU executables (``VKE1`` Vulkan, ``CDA1`` CUDA) are a 64-byte header (4-byte magic, a u32
version that must be 0, a u64 content size) followed by a FlatBuffer whose file identifier is the same
magic; their exports carry an ``ExportDebugInfo`` table (name, then a source location). The readers of
each format (``vke1.py``, ``cda1.py``) open the buffer here and read their own tables.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from engine.errors import ExecutableFormatError
from engine.runtime.vmfb.flatbuffer import FlatBuffer, Table

HEADER_SIZE = 64


@dataclass(frozen=True)
class SourceLocation:
    filename: str
    line: int


def open_headed_flatbuffer(
    data: bytes | bytearray | memoryview | np.ndarray, magic: bytes, kind: str
) -> tuple[FlatBuffer, Table]:
    """Check the file header of a ``magic`` executable and open its FlatBuffer: (buffer, root table).

    ``kind`` names the format in errors (``"VKE1"``, ``"CDA1 (CUDA)"``); a header that does not fit
    raises :class:`ExecutableFormatError` with the byte offset of the bad field.
    """
    name = magic.decode("ascii")
    mv = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else memoryview(data.view(np.uint8))
    if len(mv) < HEADER_SIZE:
        raise ExecutableFormatError(
            f"{name} executable is {len(mv)} bytes, shorter than its {HEADER_SIZE}-byte header", where="byte 0"
        )
    found = bytes(mv[:4])
    if found != magic:
        raise ExecutableFormatError(f"not a {kind} executable (magic {found!r})", where="byte 0")
    version, content_size = struct.unpack_from("<IQ", mv, 4)
    if version != 0:
        raise ExecutableFormatError(f"unsupported {name} header version {version}", where="byte 4")
    if content_size > len(mv) - HEADER_SIZE or content_size < 8:
        raise ExecutableFormatError(
            f"{name} content size {content_size} does not fit the {len(mv) - HEADER_SIZE} bytes after the header",
            where="byte 8",
        )
    fb = FlatBuffer(mv, HEADER_SIZE, HEADER_SIZE + content_size, error=ExecutableFormatError)
    return fb, fb.root("ExecutableDef", expect_identifier=magic)


def read_debug_info(debug: Table | None, line_kind: str) -> tuple[str | None, SourceLocation | None]:
    """An export's ``ExportDebugInfo`` table as (name, source location); ``None`` for what it lacks.

    ``line_kind`` is the location's line field type, which differs between the schemas (``"u32"`` in
    VKE1, ``"i32"`` in CDA1).
    """
    if debug is None:
        return None, None
    loc = debug.table(1, "location")
    location = None
    if loc is not None:
        location = SourceLocation(loc.string(0, "filename") or "", loc.scalar(1, line_kind, name="line"))
    return debug.string(0, "name"), location
