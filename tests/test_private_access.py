"""No module of the engine or the app reaches into another module's private members.

A name with a leading underscore is private to the module that defines it. This test reads every module of
``engine/`` and ``app/`` and finds ``X._name`` where ``_name`` is not defined in that module (not a function,
class or module-level name of it, nor an attribute it assigns on ``self``/``cls``): that is another
module's private member, reached from outside (on another object, or inherited through ``self``). It also
finds ``from engine... import _name``. What a module needs from another gets a public name instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Private by Python's convention but the documented interface of a library (ctypes' structure and function
# pointer protocol, the enum module's value map, os.environ's class).
LIBRARY_INTERFACE = {"_fields_", "_pack_", "_handle", "_CFuncPtr", "_value2member_map_", "_Environ"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def reach_ins(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _own_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in LIBRARY_INTERFACE:
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
                continue  # an override calling its own base: that is what the base offers subclasses
            if node.attr not in own:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("engine", "app"):
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if _private(a.name)
            ]
    return found


def test_no_module_reaches_into_another_modules_private_members():
    found = [hit for folder in ("engine", "app") for path in sorted((ROOT / folder).rglob("*.py")) for hit in reach_ins(path)]
    assert not found, f"{len(found)} reach-ins into other modules' private members:\n" + "\n".join(found)
