"""External transients (IREE's samples/external_transients): a function that takes the storage for its
transient values from its caller, as an argument ``%t: !hal.buffer {iree.abi.transients}``. Its reflection
says how many bytes it needs (``iree.abi.transients.size.constant``) or names a function that computes it
(``iree.abi.transients.size``). The caller passes a buffer (iree-run-module's ``--input=&512xi8``).

IREE does not check the buffer's size: its dispatches bind the whole buffer and write where the compiler
placed each transient, past the end of one too small (memory corrupted, a failure somewhere later). The
debugger checks it before the call (``transients_problem``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.runtime.function_io import Storage, Value

TRANSIENTS = "iree.abi.transients"
SIZE_CONSTANT = "iree.abi.transients.size.constant"
SIZE_FUNCTION = "iree.abi.transients.size"
DECLARATION = "iree.abi.declaration"
_ARGUMENT = re.compile(r"%[\w$.-]+\s*:\s*(?:tensor<(?:[^<>]|<[^<>]*>)*>|[!\w.<>]+)\s*(\{[^}]*\})?")


@dataclass(frozen=True)
class Transients:
    """Which argument of a function is its transients storage, and how many bytes it needs (None: computed
    at run time by ``size_function``)."""

    argument: int
    size: int | None
    size_function: str | None

    def storage_input(self) -> str | None:
        """The ``--input`` that gives it, when its size is known: ``&512xi8``."""
        return f"&{self.size}xi8" if self.size is not None else None


def reflection_of(module, function: str) -> dict[str, str]:
    """The reflection attributes of exported ``function`` of a ``VmfbModule`` (empty when not exported)."""
    export = next((e for e in getattr(module, "exports", []) if e.name == function), None)
    return dict(getattr(getattr(export, "signature", None), "attrs", {}) or {})


def transients_in(attrs: Mapping[str, str]) -> Transients | None:
    """The transients storage argument a function's reflection ``attrs`` declare; None when it takes none."""
    declaration = attrs.get(DECLARATION, "")
    if TRANSIENTS not in declaration:
        return None
    head = declaration[declaration.find("(") + 1 :]
    for index, m in enumerate(_ARGUMENT.finditer(head)):
        if m[1] and re.search(rf"\b{re.escape(TRANSIENTS)}\b", m[1]):
            constant = attrs.get(SIZE_CONSTANT)
            size = int(constant) if constant is not None and constant.strip().isdigit() else None
            return Transients(index, size, attrs.get(SIZE_FUNCTION))
    return None


def transients_problem(attrs: Mapping[str, str], function: str, args: Sequence[Value]) -> str | None:
    """Why ``args`` cannot be the call of ``function`` (reflection ``attrs``): its transients storage not given
    as storage, or too small, said before IREE's dispatches would write past its end; None when they can."""
    transients = transients_in(attrs)
    if transients is None or transients.argument >= len(args):
        return None
    value = args[transients.argument]
    if not isinstance(value, Storage):
        size = (f"--input={transients.storage_input()}" if transients.size is not None else
                f"--input=&Nxi8, N the bytes {transients.size_function or 'its size function'} returns for the "
                "same inputs")  # fmt: skip
        return (f"input {transients.argument} of {function} is the storage for its transients (!hal.buffer "
                f"{{{TRANSIENTS}}}): give a buffer, {size} (iree-run-module's & prefix)")  # fmt: skip
    given = int(value.tensor.array.nbytes)
    if transients.size is not None and given < transients.size:
        return (f"the storage for {function}'s transients (input {transients.argument}) holds {given} bytes; it "
                f"needs {transients.size} ({SIZE_CONSTANT}), and IREE's dispatches would write past its end: "
                f"--input=&{transients.size}xi8")  # fmt: skip
    return None
