"""The ``.vmfb`` container: where the module FlatBuffer and the external rodata lie in the file.

IREE writes a ZIP64 archive with STORED entries whose first entry (``module.fb``, local header at
offset 0) holds the size-prefixed FlatBuffer; the runtime needs nothing else from the ZIP structures.
Without the polyglot ZIP the size-prefixed FlatBuffer starts at offset 0. The central directory is
read only to name external rodata files (``mlp_linked_embedded_elf_x86_64.so``), and a damaged one
is ignored, exactly as the runtime ignores it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from engine.errors import VmfbFormatError

SEGMENT_ALIGNMENT = 64  # IREE_VM_ARCHIVE_SEGMENT_ALIGNMENT

_LOCAL_MAGIC = b"PK\x03\x04"
_EOCD_MAGIC = b"PK\x05\x06"
_EOCD64_LOCATOR_MAGIC = b"PK\x06\x07"
_EOCD64_MAGIC = b"PK\x06\x06"
_CENTRAL_MAGIC = b"PK\x01\x02"


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass(frozen=True)
class ContainerLayout:
    """Where the pieces of a .vmfb are (absolute file offsets)."""

    is_zip: bool
    flatbuffer_start: int  # the FlatBuffer's root offset (after the u32 size prefix)
    flatbuffer_end: int  # flatbuffer_start + size prefix, clamped to the file
    size_prefix: int
    rodata_base: int  # external_data_offset values are relative to this
    zip_entries: tuple[tuple[str, int, int], ...]  # (name, data offset, size) from the central directory


def locate(buf: memoryview, source: str | None = None) -> ContainerLayout:
    """Find the module FlatBuffer in ``buf`` following the runtime's rules (archive.c)."""
    n = len(buf)
    if n == 0:
        raise VmfbFormatError("file is empty", path=source, where="offset 0")
    is_zip = n >= 4 and bytes(buf[:4]) == _LOCAL_MAGIC
    off = 0
    if is_zip:
        if n < 30:
            raise VmfbFormatError("ZIP local header is truncated", path=source, where="offset 0")
        name_len, extra_len = struct.unpack_from("<HH", buf, 26)
        off = 30 + name_len + extra_len
        name = bytes(buf[30 : 30 + name_len])
        if name != b"module.fb":
            raise VmfbFormatError(
                f"a ZIP archive whose first entry is {name.decode('utf-8', 'replace')!r}, not an IREE "
                "module (expected 'module.fb')",
                path=source,
                where="offset 30",
            )
    if off + 8 > n:
        raise VmfbFormatError(
            f"file is too short ({n} bytes) to hold a module flatbuffer", path=source, where=f"offset {off}"
        )
    (size_prefix,) = struct.unpack_from("<I", buf, off)
    start = off + 4
    if bytes(buf[start + 4 : start + 8]) != b"IREE":
        raise VmfbFormatError(
            f"not an IREE VM module: flatbuffer identifier is {bytes(buf[start + 4 : start + 8])!r}, "
            f"expected b'IREE'{_looks_like(buf, source)}",
            path=source,
            where=f"offset {start + 4}",
        )
    if size_prefix < 8:
        raise VmfbFormatError(
            f"module flatbuffer size {size_prefix} is too small", path=source, where=f"offset {off}"
        )
    # The declared extent may run a few bytes past the ZIP entry into padding (a writer quirk), and
    # a truncated file may end inside it: clamp, and let bounds checks catch real reads past the end.
    end = min(start + size_prefix, n)
    rodata_base = align(start + size_prefix, SEGMENT_ALIGNMENT)
    entries = _zip_entries(buf) if is_zip else ()
    return ContainerLayout(is_zip, start, end, size_prefix, rodata_base, entries)


def _looks_like(buf: memoryview, source: str | None) -> str:
    """What a file that is not a module seems to be, as a hint to add to the error (or nothing)."""
    head = bytes(buf[:4096])
    if head.startswith(b"\x93NUMPY"):
        return " (this is a NumPy .npy array: give it as an input, --input=@FILE)"
    compile_first = ": compile it first, with iree-compile or iree-lens phases, then open the .vmfb)"
    if head.startswith(b"ML\xefR"):
        return " (this is MLIR bytecode" + compile_first
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    mlir_words = ("func.func", "util.func", "module @", "module {", "hal.executable", "torch.vtensor")
    if (source or "").endswith(".mlir") or any(word in text for word in mlir_words):
        return " (this is MLIR text" + compile_first
    return " (this is a text file, not a compiled .vmfb)"


def _zip_entries(buf: memoryview) -> tuple[tuple[str, int, int], ...]:
    """(name, data offset, size) of every entry, from the central directory; () if it cannot be read."""
    try:
        return tuple(_read_central_directory(buf))
    except (struct.error, ValueError, UnicodeDecodeError):
        return ()


def _read_central_directory(buf: memoryview) -> list[tuple[str, int, int]]:
    n = len(buf)
    tail_start = max(0, n - (65535 + 22))
    tail = bytes(buf[tail_start:])
    i = tail.rfind(_EOCD_MAGIC)
    if i < 0:
        return []
    eocd = tail_start + i
    count, cd_size, cd_offset = struct.unpack_from("<HII", buf, eocd + 10)
    if (count == 0xFFFF or cd_offset == 0xFFFFFFFF) and eocd >= 20:
        loc = eocd - 20
        if bytes(buf[loc : loc + 4]) == _EOCD64_LOCATOR_MAGIC:
            (eocd64,) = struct.unpack_from("<Q", buf, loc + 8)
            if bytes(buf[eocd64 : eocd64 + 4]) == _EOCD64_MAGIC:
                count, cd_size, cd_offset = struct.unpack_from("<QQQ", buf, eocd64 + 32)
    out = []
    p = cd_offset
    for _ in range(min(count, 1 << 16)):
        if bytes(buf[p : p + 4]) != _CENTRAL_MAGIC:
            break
        size32, usize32 = struct.unpack_from("<II", buf, p + 20)
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", buf, p + 28)
        (local32,) = struct.unpack_from("<I", buf, p + 42)
        name = bytes(buf[p + 46 : p + 46 + name_len]).decode("utf-8")
        size, local = usize32, local32
        extra = bytes(buf[p + 46 + name_len : p + 46 + name_len + extra_len])
        q = 0
        while q + 4 <= len(extra):
            tag, ln = struct.unpack_from("<HH", extra, q)
            if tag == 0x0001:
                vals = list(struct.unpack_from(f"<{ln // 8}Q", extra, q + 4))
                if usize32 == 0xFFFFFFFF and vals:
                    size = vals.pop(0)
                if size32 == 0xFFFFFFFF and vals:
                    vals.pop(0)
                if local32 == 0xFFFFFFFF and vals:
                    local = vals.pop(0)
            q += 4 + ln
        if bytes(buf[local : local + 4]) == _LOCAL_MAGIC:
            lname, lextra = struct.unpack_from("<HH", buf, local + 26)
            out.append((name, local + 30 + lname + lextra, size))
        p += 46 + name_len + extra_len + comment_len
    return out
