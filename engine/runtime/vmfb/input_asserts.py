"""The inputs a function checks: shapes and element types read from its ``hal.buffer_view.assert`` calls.

Programs imported from PyTorch or ONNX carry no ``iree.abi.declaration`` reflection, yet their host code
checks every tensor argument exactly as ``iree-run-module`` reports a mismatch:
``hal.buffer_view.assert(%view, "input0", element_type, encoding, dims...)`` with constant operands. A
straight-line walk of the function's bytecode (``register_values``) reads those constants, so a window can
make inputs of the right shapes without the user typing any.

A synchronous wrapper (``main``) that only calls its ``main$async`` twin (IREE's coarse-fences ABI:
``main$async(inputs..., wait_fence, signal_fence)``) has no asserts of its own; its inputs are the
twin's first arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import VmfbFormatError
from engine.runtime.element_types import ElementType
from engine.runtime.vmfb.decoder import iter_instructions
from engine.runtime.vmfb.module import VmfbModule
from engine.runtime.vmfb.register_values import (
    CALL_SYMBOLS,
    call_arguments,
    register_key,
    walk_with_constants,
)

ASYNC_SUFFIX = "$async"
ASYNC_FENCES = 2  # wait and signal fences after the inputs of a coarse-fences function


@dataclass(frozen=True)
class AssertedInput:
    """Argument ``index`` (a buffer view) must have ``shape`` and ``element_type`` (IREE's spelling)."""

    index: int
    element_type: str
    shape: tuple[int, ...]


def _function(module: VmfbModule, name: str):
    for export in module.exports:
        if export.name == name:
            return module.functions[export.internal_ordinal]
    return next((f for f in module.functions if f.name == name), None)


def _asserts(module: VmfbModule, function) -> dict[int, AssertedInput]:
    """Argument ref register -> what the function asserts about it (first assert of each wins)."""
    imports = {imp.full_name: imp.ordinal for imp in module.imports}
    target = imports.get("hal.buffer_view.assert")
    if target is None:
        return {}
    try:
        instructions = list(iter_instructions(function.code))
    except VmfbFormatError:
        return {}
    found: dict[int, AssertedInput] = {}
    for ins, held in walk_with_constants(instructions):
        if ins.opcode.symbol not in CALL_SYMBOLS:
            continue
        callee, args, _results = call_arguments(ins)
        if callee != target or len(args) < 4:
            continue
        view = register_key(args[0])
        if view[0] != "r" or view[1] in found:
            continue
        element = held.get(register_key(args[2]))
        dims = [held.get(register_key(a)) for a in args[4:]]
        if element is None or element[0] != "const" or any(d is None or d[0] != "const" for d in dims):
            continue  # a dynamic dimension (a register, not a constant): unknown here
        try:
            name = ElementType(int(element[1]) & 0xFFFFFFFF).name
        except (ValueError, KeyError):
            continue
        found[view[1]] = AssertedInput(view[1], name, tuple(int(d[1]) for d in dims))
    return found


def asserted_inputs(module: VmfbModule, function_name: str) -> list[AssertedInput] | None:
    """What ``function_name`` asserts about each of its ref arguments, in argument order; ``None`` when a
    ref argument is not asserted (its shape cannot be known from the bytecode)."""
    function = _function(module, function_name)
    if function is None:
        return None
    cconv = function.signature.calling_convention or ""
    args = cconv[1:].split("_", 1)[0] if cconv else ""
    if args in ("", "v"):
        return []
    if any(c != "r" for c in args):
        return None  # scalars too: the declaration (or the user) has to say
    count = len(args)
    found = _asserts(module, function)
    if not found and not function_name.endswith(ASYNC_SUFFIX):
        twin = _function(module, function_name + ASYNC_SUFFIX)
        if twin is not None and _ref_count(twin) == count + ASYNC_FENCES:
            found = _asserts(module, twin)
    # Ref arguments are the first ref registers, in order (the VM's calling convention).
    if not all(i in found for i in range(count)):
        return None
    return [AssertedInput(i, found[i].element_type, found[i].shape) for i in range(count)]


def _ref_count(function) -> int:
    cconv = function.signature.calling_convention or ""
    args = cconv[1:].split("_", 1)[0] if cconv else ""
    return sum(1 for c in args if c == "r")


__all__ = ["AssertedInput", "asserted_inputs"]
