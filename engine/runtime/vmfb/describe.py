"""Describing a module as text or JSON: ``iree-dump-module --output=metadata`` layout, and plain JSON."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.runtime.vmfb.cconv import parse_cconv
from engine.runtime.vmfb.module import FEATURE_BITS, VmfbModule, feature_names

_RULE = "//===" + "-" * 110 + "===//"


def _section(title: str) -> Iterator[str]:
    yield _RULE
    yield f"// {title}"
    yield _RULE


def tool_feature_bits(bits: int) -> str:
    """FeatureBits as iree-dump-module prints them: EXT_F32/EXT_F64 by name, the rest as %08X."""
    parts = []
    for bit, name in ((1, "EXT_F32"), (2, "EXT_F64")):
        if bits & bit:
            parts.append(name)
            bits &= ~bit
    if bits:
        parts.append(f"{bits:08X}")
    return " | ".join(parts)


def _feature_width(bits: int) -> int:
    # The tool pads by the printed length of the names, not counting the " | " separators.
    text = tool_feature_bits(bits)
    return len(text.replace(" | ", ""))


def _cconv_text(cc: str) -> str:
    try:
        return parse_cconv(cc).describe()
    except Exception:  # noqa: BLE001 - a bad cconv is shown raw rather than failing the listing
        return f"<cconv {cc!r}>"


def _c_isprint_prefix(data: memoryview) -> str | None:
    raw = bytes(data)
    end = raw.find(b"\0")
    if end < 0:
        end = len(raw)
    head = raw[:end]
    if any(not 0x20 <= c < 0x7F for c in head):
        return None
    return head.decode("ascii")


def metadata_lines(module: VmfbModule) -> Iterator[str]:
    """The lines of ``iree-dump-module --output=metadata``."""
    root = module.root
    yield from _section(f"@{module.name} : version {module.version}")
    yield ""
    if root.has(2):
        yield f"Requirements: {tool_feature_bits(module.requirements)}"
        yield ""
    if root.has(3):
        yield "Attributes:"
        for k, v in module.attrs.items():
            yield f"  {k}: {v}"
        yield ""
    if root.has(4):
        yield "Required Types:"
        for i, t in enumerate(module.types):
            yield f"  [{i:3d}] {t}"
        yield ""
    if root.has(5):
        yield "Module Dependencies:"
        for d in module.dependencies:
            yield f"  {d.name}, version >= {d.minimum_version}, {'optional' if d.optional else 'required'}"
        yield ""
    if root.has(6):
        yield "Imported Functions:"
        for imp in module.imports:
            cc = imp.signature.calling_convention
            yield f"  [{imp.ordinal:3d}] {'?' if imp.optional else ''}{imp.full_name}{_cconv_text(cc) if cc else ''}"
            for k, v in imp.signature.attrs.items():
                yield f"        {k}: {v}"
        yield ""
    if root.has(7):
        yield "Exported Functions:"
        for e in module.exports:
            cc = e.signature.calling_convention
            yield f"  [{e.ordinal:3d}] {e.name}{_cconv_text(cc) if cc else ''}"
            for k, v in e.signature.attrs.items():
                yield f"        {k}: {v}"
        yield ""
    yield from _section("Sections")
    yield ""
    if root.has(11):
        st = module.module_state
        yield "Module State:"
        yield (
            f"  {st.global_bytes_capacity} bytes, {st.global_ref_count} refs, "
            f"~{st.global_bytes_capacity + 16 * st.global_ref_count} bytes total"
        )
        yield ""
    yield f"FlatBuffer: {module.layout.size_prefix} bytes"
    if root.has(14):
        yield f"  Bytecode: {len(module.bytecode)} bytes"
    external = 0
    for seg, t in zip(module.rodata_segments, root.tables(9, "rodata_segments")):
        comp = "uncompressed " if t.scalar(0, "u8", 0) == 1 else ""
        if seg.embedded:
            line = f"  .rodata[{seg.ordinal:3d}] {comp}embedded {seg.length:8d} bytes"
            text = _c_isprint_prefix(seg.data)
            if text is not None:
                line += f" `{text[:32]}`" + ("..." if len(text) >= 32 else "")
        else:
            off = seg.external_offset or 0
            external += seg.length
            line = (
                f"  .rodata[{seg.ordinal:3d}] {comp}external {seg.length:8d} bytes "
                f"(offset {off} / {off:X}h to {off + seg.length:X}h)"
            )
        yield line
    for i, t in enumerate(root.tables(10, "rwdata_segments")):
        yield f"  .rwdata[{i:3d}] {t.scalar(0, 'i32', 0)} bytes"
    yield ""
    if external:
        yield f"External .rodata: ~{external} bytes"
        yield ""
    yield from _section(f"Bytecode : version {module.version}")
    yield ""
    if root.has(12):
        yield "  # | Offset   |   Length | Blocks | i32 # | ref # | Requirements | Aliases"
        yield "----+----------+----------+--------+-------+-------+--------------+-" + "-" * 52
        for f in module.functions:
            bits = tool_feature_bits(f.requirements)
            pad = " " * max(0, 12 - _feature_width(f.requirements))
            yield (
                f"{f.ordinal:3d} | {f.bytecode_offset:08X} | {f.bytecode_length:8d} | {f.block_count:6d} | "
                f"{f.i32_register_count:5d} | {f.ref_register_count:5d} | {bits}{pad} | {', '.join(f.aliases)}"
            )
    yield ""
    if module.debug_database is not None:
        yield from _section("Debug Information")
        yield "// NOTE: debug databases are large and should be stripped in deployed artifacts."
        yield ""
        yield f"Locations: {len(module.debug_database.locations)}"
        yield ""


def metadata_text(module: VmfbModule) -> str:
    return "".join(line + "\n" for line in metadata_lines(module))


def _signature_json(sig) -> dict[str, Any]:
    return {"calling_convention": sig.calling_convention, "attrs": dict(sig.attrs)}


def module_json(module: VmfbModule) -> dict[str, Any]:
    """Everything about a module as plain JSON-able data (no bytes of rodata or code)."""
    return {
        "source": module.source,
        "name": module.name,
        "version": module.version,
        "requirements": feature_names(module.requirements),
        "requirements_bits": module.requirements,
        "bytecode_version": module.bytecode_version,
        "attrs": dict(module.attrs),
        "types": list(module.types),
        "dependencies": [
            {"name": d.name, "minimum_version": d.minimum_version, "flags": d.flags}
            for d in module.dependencies
        ],
        "imported_functions": [
            {
                "ordinal": i.ordinal,
                "full_name": i.full_name,
                "signature": _signature_json(i.signature),
                "flags": i.flags,
            }
            for i in module.imports
        ],
        "exported_functions": [
            {
                "ordinal": e.ordinal,
                "local_name": e.name,
                "internal_ordinal": e.internal_ordinal,
                "signature": _signature_json(e.signature),
            }
            for e in module.exports
        ],
        "functions": [
            {
                "ordinal": f.ordinal,
                "name": f.name,
                "aliases": list(f.aliases),
                "debug_name": f.debug_name,
                "bytecode_offset": f.bytecode_offset,
                "bytecode_length": f.bytecode_length,
                "requirements": f.requirements,
                "requirement_names": feature_names(f.requirements),
                "block_count": f.block_count,
                "i32_register_count": f.i32_register_count,
                "ref_register_count": f.ref_register_count,
                "signature": _signature_json(f.signature),
            }
            for f in module.functions
        ],
        "rodata_segments": [
            {
                "ordinal": s.ordinal,
                "embedded": s.embedded,
                "file_offset": s.file_offset,
                "length": s.length,
                "external_offset": s.external_offset,
                "zip_name": s.zip_name,
                "alignment": s.alignment,
                "detected_format": s.detected_format,
                "text": s.text() if s.embedded else None,
            }
            for s in module.rodata_segments
        ],
        "module_state": {
            "global_bytes_capacity": module.module_state.global_bytes_capacity,
            "global_ref_count": module.module_state.global_ref_count,
        },
        "bytecode_size": len(module.bytecode),
        "debug_database": None
        if module.debug_database is None
        else {
            "locations": list(module.debug_database.location_texts),
            "functions": [f.local_name for f in module.debug_database.functions],
        },
        "executables": [
            {
                "ordinal": x.ordinal,
                "format": x.format,
                "name": x.name,
                "rodata_ordinal": x.rodata_ordinal,
                "size": len(x.data),
                "found_by": x.found_by,
            }
            for x in module.executables
        ],
        "feature_bits": {str(k): v for k, v in FEATURE_BITS.items()},
    }
