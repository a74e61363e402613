"""The interface between the VM and modules written in Python (``hal``, ``check``, ``vmvx``...).

A bytecode module's import ``hal.buffer_view.create`` resolves to the function ``buffer_view.create`` of the
native module named ``hal``. The VM marshals arguments by walking the function's calling convention
(``0rIIiiCID_r``, see docs/iree-3.13-runtime-facts.md §2.5):

* ``i``/``I`` -> Python ``int`` (signed two's complement value of 32/64 bits);
* ``f``/``F`` -> Python ``float``;
* ``r`` -> the ref object, or ``None`` for null;
* a span ``C...D`` -> a ``list``; each element is a ``tuple`` of the span's fields, except for spans of a single
  field (``CiD``, ``CID``, ``CrD``), whose elements are the bare values.

The function returns ``None`` for no results, the value for one result, a ``tuple`` for several. Ints it
returns are wrapped to the result's width by the VM. Errors are raised as ``VmStatusError`` (an IREE
status code and message); the VM turns them into a trap annotated with the import being called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.errors import LensError, StatusCode, VmStatusError  # noqa: F401 - the VM errors, importable here too


@dataclass(frozen=True)
class NativeFunction:
    """One function a native module exports: its local name (``buffer_view.create``), cconv and body."""

    name: str
    cconv: str
    fn: Callable[..., Any]


class NativeModule:
    """Base class of modules implemented in Python. Subclasses register functions with ``@export``."""

    name: str = ""
    version: int = 0

    def __init__(self) -> None:
        self._functions: dict[str, NativeFunction] = {}
        for attr in dir(type(self)):
            member = getattr(type(self), attr, None)
            spec = getattr(member, "lens_native_export", None)
            if spec is not None:
                local_name, cconv = spec
                self._functions[local_name] = NativeFunction(local_name, cconv, getattr(self, attr))

    @property
    def functions(self) -> dict[str, NativeFunction]:
        return self._functions

    def lookup(self, local_name: str) -> NativeFunction | None:
        return self._functions.get(local_name)


def export(local_name: str, cconv: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a method of a ``NativeModule`` subclass as the export ``local_name`` with calling convention ``cconv``."""

    def mark(method: Callable[..., Any]) -> Callable[..., Any]:
        method.lens_native_export = (local_name, cconv)  # type: ignore[attr-defined]
        return method

    return mark
