"""What the module tree shows: plain nodes built from an engine ``VmfbModule`` (no widgets here).

Each :class:`TreeNode` holds a label, a value column, what the detail pane shows for it and a
``children`` callable that runs only when the node is first expanded. Lists longer than
:data:`RANGE_SIZE` are split into ranges so no single expand creates thousands of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from app import engine_adapter as executable_details
from app.views.disassembly_view import ListingLine
from engine.runtime.vmfb.executables import read_elf
from engine.runtime.vmfb.vke1 import read_vke1

RANGE_SIZE = 500


class DetailKind(Enum):
    INFO = "info"
    GROUP = "group"
    RANGE = "range"
    FUNCTION = "function"
    RODATA = "rodata"
    EXECUTABLE = "executable"


@dataclass(eq=False)
class TreeNode:
    label: str
    value: str = ""
    kind: DetailKind = DetailKind.INFO
    children: Callable[[], list[TreeNode]] | None = None
    details: Callable[[], str] | None = None  # text of the Details tab
    payload: Any = None  # the engine object the node stands for
    function_name: str | None = None  # FUNCTION nodes: the name the context uses
    data: Callable[[], tuple[Any, int]] | None = None  # RODATA/EXECUTABLE: (bytes, file offset)
    decode: Callable[[], str] | None = None  # runs on the worker: decoded text
    decode_title: str = "Decoded"
    tooltip: str = ""
    expanded_by_default: bool = False


def _leaf(label: str, value: Any = "", tooltip: str = "") -> TreeNode:
    return TreeNode(label, str(value), tooltip=tooltip or (str(value) if len(str(value)) > 60 else ""))


def _group(
    label: str, items: Callable[[], Sequence[Any]], make: Callable[[Any], TreeNode], count: int, **kw: Any
) -> TreeNode:
    """A group of ``count`` items; children are built on expand, in ranges for long lists."""

    def children() -> list[TreeNode]:
        seq = items()
        if len(seq) <= RANGE_SIZE:
            return [make(x) for x in seq]
        return [
            TreeNode(
                f"[{lo}..{min(lo + RANGE_SIZE, len(seq)) - 1}]",
                kind=DetailKind.RANGE,
                children=lambda lo=lo: [make(x) for x in seq[lo : lo + RANGE_SIZE]],
            )
            for lo in range(0, len(seq), RANGE_SIZE)
        ]

    return TreeNode(label, str(count), kind=DetailKind.GROUP, children=children, **kw)


def _count(get: Callable[[], Sequence[Any]]) -> int:
    try:
        return len(get())
    except Exception:  # noqa: BLE001 - the group shows the error when expanded
        return 0


def _attrs_nodes(attrs: dict[str, str]) -> list[TreeNode]:
    return [_leaf(k, v) for k, v in attrs.items()]


def _signature_text(sig: Any) -> str:
    try:
        return sig.cconv.describe()
    except Exception:  # noqa: BLE001 - a bad cconv string is shown as it is
        return sig.calling_convention


# -- the module ------------------------------------------------------------------------------------


def module_nodes(module: Any, path: Path) -> list[TreeNode]:
    m = module
    return [
        TreeNode(
            f"@{m.name}",
            f"version {m.version}",
            kind=DetailKind.GROUP,
            children=lambda: _metadata_nodes(m, path),
            details=lambda: metadata_text(m, path),
            expanded_by_default=True,
        ),
        _group(
            "Types", lambda: m.types, lambda t: _leaf(f"[{m.types.index(t)}]", t), _count(lambda: m.types)
        ),
        _group("Dependencies", lambda: m.dependencies, _dependency_node, _count(lambda: m.dependencies)),
        _group("Imports", lambda: m.imports, _import_node, _count(lambda: m.imports)),
        _group(
            "Exports",
            lambda: m.exports,
            lambda e: _export_node(m, e),
            _count(lambda: m.exports),
            expanded_by_default=True,
        ),
        _group(
            "Functions",
            lambda: m.functions,
            lambda f: _function_node(m, f),
            _count(lambda: m.functions),
            expanded_by_default=True,
        ),
        _group(
            "Rodata",
            lambda: m.rodata_segments,
            lambda s: _rodata_node(m, s),
            _count(lambda: m.rodata_segments),
        ),
        _group(
            "Executables",
            lambda: m.executables,
            lambda x: _executable_node(m, x),
            _count(lambda: m.executables),
            expanded_by_default=True,
        ),
    ]


def metadata_text(m: Any, path: Path) -> str:
    lines = [
        f"module @{m.name} : version {m.version}",
        f"file: {path} ({path.stat().st_size:,} bytes)",
        f"bytecode version: {m.bytecode_version_text}",
        f"requirements: {' | '.join(m.requirement_names) or 'none'} ({m.requirements:#010x})",
        f"module state: {m.module_state.global_bytes_capacity} bytes of globals, "
        f"{m.module_state.global_ref_count} refs",
        f"functions: {len(m.functions)} ({len(m.exports)} exported), imports: {len(m.imports)}, "
        f"rodata segments: {len(m.rodata_segments)}, executables: {len(m.executables)}",
    ]
    if m.attrs:
        lines.append("attributes:")
        lines += [f"  {k} = {v}" for k, v in m.attrs.items()]
    return "\n".join(lines)


def _metadata_nodes(m: Any, path: Path) -> list[TreeNode]:
    nodes = [
        _leaf("name", m.name),
        _leaf("version", m.version),
        _leaf("bytecode version", m.bytecode_version_text),
        _leaf("requirements", f"{' | '.join(m.requirement_names) or 'none'} ({m.requirements:#x})"),
        _leaf(
            "globals", f"{m.module_state.global_bytes_capacity} bytes, {m.module_state.global_ref_count} refs"
        ),
        _leaf("file", f"{path.stat().st_size:,} bytes", tooltip=str(path)),
    ]
    attrs = m.attrs
    nodes.append(
        TreeNode("attributes", str(len(attrs)), kind=DetailKind.GROUP, children=lambda: _attrs_nodes(attrs))
    )
    db = m.debug_database
    if db is not None:
        nodes.append(
            TreeNode(
                "debug database",
                f"{len(db.locations)} locations, {len(db.functions)} source maps",
                kind=DetailKind.GROUP,
                children=lambda: [
                    _leaf(f"source map [{i}]", f"@{f.local_name}: {len(f.locations)} locations")
                    for i, f in enumerate(db.functions)
                ],
            )
        )
    return nodes


def _dependency_node(d: Any) -> TreeNode:
    return _leaf(d.name, f"version >= {d.minimum_version}, {'optional' if d.optional else 'required'}")


def _import_node(imp: Any) -> TreeNode:
    sig = imp.signature

    def details() -> str:
        lines = [
            f"import [{imp.ordinal}] {imp.full_name}",
            f"calling convention: {sig.calling_convention}",
            f"signature: {_signature_text(sig)}",
            f"flags: {'optional' if imp.optional else 'required'}",
        ]
        lines += [f"{k}: {v}" for k, v in sig.attrs.items()]
        return "\n".join(lines)

    return TreeNode(
        f"[{imp.ordinal}] {imp.full_name}",
        sig.calling_convention,
        children=lambda: [
            _leaf("calling convention", sig.calling_convention),
            _leaf("signature", _signature_text(sig)),
            _leaf("flags", "optional" if imp.optional else "required"),
            *_attrs_nodes(sig.attrs),
        ],
        details=details,
        tooltip=_signature_text(sig),
    )


def _export_node(m: Any, e: Any) -> TreeNode:
    fn = m.functions[e.internal_ordinal]
    node = _function_node(m, fn, label=f"[{e.ordinal}] {e.name}", name=e.name)
    node.value = f"→ function {e.internal_ordinal}"
    return node


def _function_node(m: Any, f: Any, label: str | None = None, name: str | None = None) -> TreeNode:
    sig = f.signature

    def details() -> str:
        lines = [
            f"function [{f.ordinal}] @{f.name}",
            f"exported as: {', '.join(f.aliases) or '(internal)'}",
            f"calling convention: {sig.calling_convention}",
            f"signature: {_signature_text(sig)}",
            f"bytecode: offset {f.bytecode_offset}, {f.bytecode_length} bytes",
            f"blocks: {f.block_count}, i32 registers: {f.i32_register_count}, ref registers: {f.ref_register_count}",
            f"requirements: {f.requirements:#x}",
        ]
        if f.debug_name and f.debug_name != f.name:
            lines.append(f"debug database name: {f.debug_name} (IREE 3.13 writes it for one function only)")
        for k, v in sig.attrs.items():
            lines.append(f"{k}: {v}")
        return "\n".join(lines)

    return TreeNode(
        label or f"[{f.ordinal}] {f.name}",
        _signature_text(sig),
        kind=DetailKind.FUNCTION,
        children=(lambda: _attrs_nodes(sig.attrs)) if sig.attrs else None,
        details=details,
        payload=f,
        function_name=name or f.name,
        tooltip=sig.attrs.get("iree.abi.declaration", ""),
    )


def _preview(seg: Any) -> str:
    text = seg.text()
    if text is not None:
        return repr(text[:40]) + ("..." if len(text) > 40 else "")
    return seg.detected_format or ""


def _rodata_node(m: Any, seg: Any) -> TreeNode:
    where = "embedded" if seg.embedded else "external"

    def details() -> str:
        lines = [
            f"rodata [{seg.ordinal}]: {where}, {seg.length:,} bytes",
            f"file offset: {seg.file_offset:#x} ({seg.file_offset})",
            f"alignment: {seg.alignment}",
        ]
        if seg.external_offset is not None:
            lines.append(f"external_data_offset: {seg.external_offset:#x} (from the rodata base)")
        if seg.zip_name:
            lines.append(f"archive entry: {seg.zip_name}")
        lines.append(f"content: {seg.detected_format or 'binary'}")
        return "\n".join(lines)

    return TreeNode(
        f"[{seg.ordinal}] {where}",
        f"{seg.length:,} B  {_preview(seg)}",
        kind=DetailKind.RODATA,
        details=details,
        payload=seg,
        data=lambda: (seg.data, seg.file_offset),
        decode=lambda: executable_details.describe_rodata(m, seg),
        tooltip=seg.zip_name or "",
    )


def _executable_node(m: Any, x: Any) -> TreeNode:
    return TreeNode(
        f"[{x.ordinal}] {x.name}",
        x.format,
        kind=DetailKind.EXECUTABLE,
        details=lambda: executable_details.executable_summary(m, x),
        payload=x,
        data=lambda: (x.data, m.rodata_segments[x.rodata_ordinal].file_offset),
        decode=lambda: executable_details.executable_text(m, x),
        decode_title=executable_details.text_title(x),
        children=lambda: executable_children(m, x),
    )


def executable_children(m: Any, x: Any) -> list[TreeNode]:
    """Tree children of an executable node: entry points, and per format its sections/functions."""
    nodes = [_leaf(f"entry point {i}", name) for i, name in enumerate(executable_details.executable_entry_points(x))]
    if x.format.startswith("vmvx"):
        nested = executable_details.nested_module(x.data)
        nodes += [_function_node(nested, f) for f in nested.functions]
    elif bytes(x.data[:4]) == b"\x7fELF":
        info = read_elf(x.data, x.name)
        nodes.append(
            TreeNode(
                "sections",
                str(len(info.sections)),
                children=lambda: [
                    _leaf(s.name or "(null)", f"{s.type}, {s.size:,} B at {s.offset:#x}") for s in info.sections
                ],
            )
        )
        nodes.append(
            TreeNode(
                "symbols",
                str(len(info.symbols)),
                children=lambda: [_leaf(s.name, f"{s.type} {s.value:#x} size {s.size}") for s in info.symbols],
            )
        )
    elif x.format.startswith("vulkan"):
        exe = read_vke1(x.data)
        nodes += [
            _leaf(f"shader module {i}", f"{mod.byte_size:,} bytes of SPIR-V") for i, mod in enumerate(exe.shader_modules)
        ]
    elif x.format.startswith("cuda"):
        from engine.runtime.vmfb.cda1 import read_cda1

        nodes += [_leaf(f"PTX module {i}", f"{len(mod.ptx):,} characters") for i, mod in enumerate(read_cda1(x.data).modules)]
    elif x.format.startswith("rocm"):
        from engine.runtime.vmfb.hip1 import read_hip1

        nodes += [
            _leaf(f"code object {i}", f"{len(mod.hsaco):,} bytes, {mod.architecture or 'not an AMDGPU ELF'}")
            for i, mod in enumerate(read_hip1(x.data).modules)
        ]
    return nodes


# -- disassembly ---------------------------------------------------------------------------------


def function_listing(module: Any, function: Any, names: Any = None) -> list[ListingLine]:
    """The disassembly of ``function`` as listing lines (runs on the worker); ``names``: the module's
    ``GlobalNames``, which end each global access with ``// @name``."""
    return executable_details.function_listing(module, function, names)
