"""What IREE's own ``iree-dump-module --output=flatbuffer-json`` says about a module's debug database,
rendered as MLIR-like text independently of the project's reader (the expected values of tests)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from support import iree_tool


def iree_flatbuffer_json(path: str | Path) -> dict[str, Any]:
    proc = subprocess.run(
        [iree_tool("iree-dump-module"), "--output=flatbuffer-json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def _text(table: list, types: list, i: int) -> str:
    kind, loc = types[i], table[i]
    if kind == "FileLineColLocDef":
        return f'"{loc.get("filename", "")}":{loc.get("line", 0)}:{loc.get("column", 0)}'
    if kind == "CallSiteLocDef":  # flatc's JSON leaves out fields equal to their default (0)
        callee = _text(table, types, loc.get("callee", 0))
        return f"callsite({callee} at {_text(table, types, loc.get('caller', 0))})"
    if kind == "FusedLocDef":
        inner = ", ".join(_text(table, types, c) for c in loc.get("locations", []))
        meta = loc.get("metadata")
        return f"fused<{meta}>[{inner}]" if meta else f"fused[{inner}]"
    if kind == "NameLocDef":
        child = loc.get("child_location")
        name = f'"{loc.get("name", "")}"'
        return name if child is None else f"{name}({_text(table, types, child)})"
    return "unknown"


def iree_location_texts(dump: dict[str, Any]) -> list[str]:
    """Every location of the dump's debug database, in table order."""
    db = dump["debug_database"]
    types, table = db["location_table_type"], db["location_table"]
    return [_text(table, types, i) for i in range(len(types))]


def iree_source_maps(dump: dict[str, Any]) -> list[tuple[str, dict[int, int]]]:
    """(local_name, {bytecode offset: location index}) of each source map (first entry per offset)."""
    out = []
    for f in dump["debug_database"].get("functions", []):
        pcs: dict[int, int] = {}
        for entry in f.get("locations", []):
            pcs.setdefault(entry.get("bytecode_offset", 0), entry.get("location", 0))
        out.append((f.get("local_name", ""), pcs))
    return out
