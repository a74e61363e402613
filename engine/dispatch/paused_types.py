"""Typed tensors of a paused dispatch: the session hands over each binding's bytes; this cuts and types
them for the tensor inspector, in the order issue 12 asks for: the executable's interface in its source
(when the module was compiled in the app or its sources are known), SPIR-V declarations, IREE's dispatch
name, else raw bytes (never an error)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.dispatch.tensor_types import (
    BindingInterface,
    TensorType,
    resolve_offset,
    type_from_name,
    view_bytes,
)


@dataclass(frozen=True)
class TypedBinding:
    """One tensor of a paused dispatch: ``label`` (``input 0``/``output 1``), its binding and its array."""

    label: str
    binding: int
    array: np.ndarray
    type: TensorType
    role: str  # "input" or "output"


def _spirv_type(element: str | None, export: str, nbytes: int) -> TensorType | None:
    if element is None:
        return None
    named = type_from_name(export, nbytes)
    # IREE packs i8/f16 in i32 words on Vulkan: the name's type wins over an i32 declaration.
    if named is not None and (named.element == element or element == "i32"):
        return TensorType(named.shape, named.element, "spirv" if named.element == element else "name")
    try:
        itemsize = TensorType((1,), element).dtype.itemsize
    except ValueError:
        return None
    if nbytes % itemsize:
        return None
    return TensorType((nbytes // itemsize,), element, "spirv")


def _role(access: str) -> str:
    return "input" if access == "read" else "output"


def typed_bindings(
    export: str,
    arrays: list[np.ndarray],
    accesses: list[str],
    constants: tuple[int, ...] | list[int] = (),
    interface: dict[int, BindingInterface] | None = None,
    spirv: dict[int, str] | None = None,
) -> list[TypedBinding]:
    """Each binding's bytes (``arrays[i]``, access ``accesses[i]``) as typed tensors, inputs first."""
    interface = interface or {}
    spirv = spirv or {}
    found: list[tuple[str, int, np.ndarray, TensorType]] = []
    for index, data in enumerate(arrays):
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        bi = interface.get(index)
        cut = []
        if bi is not None:
            # The source's subspans: several tensors may share a binding at offsets (push constants).
            for k, t in enumerate(bi.tensors):
                offset = resolve_offset(bi.offsets[k], constants) if k < len(bi.offsets) else 0
                if offset is None or t.byte_length == 0 or offset + t.byte_length > raw.size:
                    cut = []
                    break
                array, tt = view_bytes(raw[offset : offset + t.byte_length], TensorType(t.shape, t.element, "interface"))
                cut.append((_role("read" if bi.read_only else "write"), index, array, tt))
        if not cut:
            tt = _spirv_type(spirv.get(index), export, raw.size) or type_from_name(export, raw.size)
            array, tt = view_bytes(raw, tt)
            access = accesses[index] if index < len(accesses) else "unknown"
            cut = [(_role(access), index, array, tt)]
        found.extend(cut)
    result: list[TypedBinding] = []
    for role in ("input", "output"):
        mine = [f for f in found if f[0] == role]
        for n, (_, index, array, tt) in enumerate(mine):
            result.append(TypedBinding(f"{role} {n}", index, array, tt, role))
    return result
