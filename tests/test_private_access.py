"""No module of the engine or the app reaches into another object's private members.

A name with a leading underscore is private to the object (and module) that defines it. This test reads
every module of ``engine/`` and ``app/`` and finds every attribute access ``<expr>._name`` where ``<expr>``
is not ``self``, ``cls`` or ``super()``: ``obj._x``, ``self.other._x``, ``call()._x``, ``a[b]._x``,
``getattr(obj, "_x")``, as well as ``from engine... import _name``. Whatever another object needs gets a
public name (a property or a method that says what it is) on the class that owns it.

So ``grep -rnE '\\._[a-z]' engine app | grep -vE '\\b(self|cls)\\._|super\\(\\)\\._'`` finds only the
allowed library shapes below, and docstrings that show an IREE name (``..._matmul_4x8_f32``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Private by Python's convention but the documented interface of a library, on whatever object has it:
# ctypes' structure layout (``_fields_``, ``_pack_``, ``_anonymous_``), namedtuple's methods (``_replace``,
# ``_asdict``, ``_fields``, ``_make``), the enum protocol (``_missing_``, ``_value_``, ``_name_``).
LIBRARY_INTERFACE = frozenset(
    {"_fields_", "_pack_", "_anonymous_", "_replace", "_asdict", "_fields", "_make", "_missing_", "_value_", "_name_"}
)
# Names a library module offers only with an underscore: ctypes' function-pointer base class (for type
# hints of a ctypes function) and ``os._exit`` (ends the process without unwinding its threads).
LIBRARY_MODULE_NAMES = frozenset({("ctypes", "_CFuncPtr"), ("os", "_exit")})

# The receivers that are the object itself: ``self._x`` in a method, ``cls._x`` in a classmethod.
OWN_RECEIVERS = frozenset({"self", "cls"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own(receiver: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object reaching its own members (or its base's, as a subclass)."""
    if isinstance(receiver, ast.Name):
        return receiver.id in OWN_RECEIVERS
    return isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super"


def _allowed(receiver: ast.expr, name: str) -> bool:
    if _own(receiver) or name in LIBRARY_INTERFACE:
        return True
    return isinstance(receiver, ast.Name) and (receiver.id, name) in LIBRARY_MODULE_NAMES


def reach_ins_in_source(source: str, where: str = "<source>") -> list[str]:
    """Every reach-in into another object's private member in one module's source, as ``where:line: code``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if _private(node.attr) and not _allowed(node.value, node.attr):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in LIBRARY_INTERFACE
            and not _own(node.args[0])
        ):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("engine", "app"):
            found += [
                f"{where}:{node.lineno}: from {node.module} import {a.name}" for a in node.names if _private(a.name)
            ]
    return found


def reach_ins(root: Path = ROOT) -> list[str]:
    """The reach-ins of every module of ``root``'s ``engine/`` and ``app/``."""
    return [
        hit
        for folder in ("engine", "app")
        for path in sorted((root / folder).rglob("*.py"))
        for hit in reach_ins_in_source(path.read_text(encoding="utf-8"), str(path.relative_to(root)))
    ]


def test_the_check_finds_every_shape_of_reach_in():
    source = """
import ctypes
from engine.x import _helper, public

class A:
    def f(self, other, items, k):
        self._mine = 1
        cls_value = type(self)._counter
        other._theirs
        self.other._theirs
        make()._made
        items[k]._indexed
        getattr(other, "_reflected")
        getattr(self, "_own_reflected", None)
        super()._base_hook()
        return self._mine, other.__class__, other.public

    @classmethod
    def g(cls):
        return cls._registry

class S(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int)]

names = [n for n, _ in S._fields_]
point = make_point()._replace(x=1)
hook: ctypes._CFuncPtr = None
os._exit(0)
runner._exit()
"""
    found = [hit.split(": ", 1)[1] for hit in reach_ins_in_source(source)]
    assert sorted(found) == sorted(
        [
            "from engine.x import _helper",
            "type(self)._counter",
            "other._theirs",
            "self.other._theirs",
            "make()._made",
            "items[k]._indexed",
            "getattr(other, '_reflected')",
            "runner._exit",
        ]
    )


def test_no_module_reaches_into_another_objects_private_members():
    found = reach_ins()
    assert not found, f"{len(found)} reach-ins into other objects' private members:\n" + "\n".join(found)
