"""Byte-level patches of IREE containers: one rodata segment of a ``.vmfb``, one shader module of a ``VKE1``.

Both are FlatBuffers whose tables cannot grow in place, so:

* a ``.vmfb`` executable lives in an *external* rodata segment (after the FlatBuffer, at
  ``rodata_base + external_data_offset``): a smaller replacement is written in place; a larger one makes room
  by moving every later segment down (their offsets are non-zero, so each is stored in its table and can be
  rewritten in place). IREE's loader reads only the first ZIP local header, not the central directory, so
  the archive index going stale does not matter to it.
* a ``VKE1`` shader module's SPIR-V is a vector inside the FlatBuffer: the new words are appended at the end
  of the FlatBuffer and the vector's offset (a forward ``uoffset``) is pointed at them; the header's content
  size grows with it.
"""

from __future__ import annotations

import struct

import numpy as np

from engine.runtime.vmfb.container import locate
from engine.runtime.vmfb.executable_flatbuffer import HEADER_SIZE
from engine.runtime.vmfb.flatbuffer import FlatBuffer
from engine.runtime.vmfb.vke1 import SPIRV_MAGIC, VKE1_MAGIC
from engine.substitute.errors import SubstitutionError

SEGMENT_ALIGNMENT = 64


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def replace_rodata(vmfb: bytes, rodata_ordinal: int, data: bytes) -> bytes:
    """``vmfb`` with rodata segment ``rodata_ordinal`` holding ``data`` (the executable's new binary)."""
    original = bytes(vmfb)
    buf = bytearray(original)  # written; the FlatBuffer reads the unchanged copy
    layout = locate(memoryview(original))
    fb = FlatBuffer(memoryview(original), layout.flatbuffer_start, layout.flatbuffer_end)
    root = fb.root("module", expect_identifier=b"IREE")
    segments = list(root.tables(9, "rodata_segments"))
    if not 0 <= rodata_ordinal < len(segments):
        raise SubstitutionError(f"module has no rodata segment {rodata_ordinal}")
    seg = segments[rodata_ordinal]
    span = seg.vector_span(2, 1, "embedded_data")
    if span is not None:  # embedded in the FlatBuffer: only an equal or smaller binary fits
        start, length = span
        if len(data) > length:
            raise SubstitutionError(
                f"the executable is embedded in the module FlatBuffer ({length} bytes); a {len(data)}-byte "
                "replacement does not fit"
            )
        buf[start : start + len(data)] = data
        struct.pack_into("<I", buf, start - 4, len(data))
        return bytes(buf)
    len_pos = seg.field_pos(4)
    if not len_pos:
        raise SubstitutionError(f"rodata segment {rodata_ordinal} has neither embedded nor external data")
    old_off = seg.scalar(3, "u64", 0)
    old_len = seg.scalar(4, "u64", 0)
    base = layout.rodata_base
    start = base + old_off
    if len(data) <= old_len:
        buf[start : start + old_len] = data + bytes(old_len - len(data))
        struct.pack_into("<Q", buf, len_pos, len(data))
        return bytes(buf)
    # Make room: every segment stored after this one moves down by `grow`.
    grow = _align(len(data) - old_len, SEGMENT_ALIGNMENT)
    end = start + old_len
    for other in segments:
        if other.vector_span(2, 1) is not None:
            continue
        o = other.scalar(3, "u64", 0)
        if base + o >= end and other is not seg:
            pos = other.field_pos(3)
            if not pos:
                raise SubstitutionError("a later rodata segment has no stored offset; cannot move it")
            struct.pack_into("<Q", buf, pos, o + grow)
    struct.pack_into("<Q", buf, len_pos, len(data))
    return bytes(buf[:start]) + data + bytes(grow - (len(data) - old_len)) + bytes(buf[end:])


def replace_shader_module(vke1: bytes, module_index: int, words: np.ndarray) -> bytes:
    """``vke1`` (a ``VKE1`` executable) with shader module ``module_index`` holding SPIR-V ``words``."""
    if bytes(vke1[:4]) != VKE1_MAGIC:
        raise SubstitutionError("not a VKE1 executable")
    words = np.ascontiguousarray(words, dtype="<u4")
    if words.size < 5 or int(words[0]) != SPIRV_MAGIC:
        raise SubstitutionError("the replacement is not a SPIR-V module (no magic number)")
    (content_size,) = struct.unpack_from("<Q", vke1, 8)
    end = HEADER_SIZE + content_size
    head = bytes(vke1[:end])
    fb = FlatBuffer(memoryview(head), HEADER_SIZE, end)
    root = fb.root("ExecutableDef")
    modules = list(root.tables(3, "shader_modules"))
    if not 0 <= module_index < len(modules):
        raise SubstitutionError(f"the executable has {len(modules)} shader modules, not {module_index + 1}")
    field = modules[module_index].field_pos(0)
    if not field:
        raise SubstitutionError(f"shader module {module_index} has no SPIR-V code")
    buf = bytearray(head)
    # Append [u32 count][words] 8-byte aligned (after the count the words are 4-byte aligned anyway).
    while (len(buf) - HEADER_SIZE) % 8 != 4:
        buf += b"\0"
    vector = len(buf)
    buf += struct.pack("<I", int(words.size)) + words.tobytes()
    struct.pack_into("<I", buf, field, vector - field)
    struct.pack_into("<Q", buf, 8, len(buf) - HEADER_SIZE)
    return bytes(buf)
