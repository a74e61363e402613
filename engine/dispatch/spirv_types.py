"""Element types of a Vulkan executable's bindings, from its SPIR-V declarations.

A storage buffer binding is a variable decorated ``Binding N`` whose type is a pointer to a struct of a
runtime array of the element (a scalar, or a vector of it when IREE vectorises accesses). The element is
what the kernel reads and writes; IREE packs narrow types (i8, f16) into i32, so a caller weighs an
``i32`` here against other sources.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

_OP_DECORATE, _OP_TYPE_INT, _OP_TYPE_FLOAT, _OP_TYPE_VECTOR = 71, 21, 22, 23
_OP_TYPE_ARRAY, _OP_TYPE_RUNTIME_ARRAY, _OP_TYPE_STRUCT, _OP_TYPE_POINTER, _OP_VARIABLE = 28, 29, 30, 32, 59
_DECORATION_BINDING = 33
_STORAGE_BUFFER = 12


def spirv_instructions(words: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Each whole instruction after the 5-word header of a SPIR-V module (``uint32`` words): its opcode and
    its words from the opcode word on. A zero word count or a cut-off instruction (a damaged module) ends
    the walk: what came before it is still read."""
    i = 5
    while i < words.size:
        count, op = int(words[i]) >> 16, int(words[i]) & 0xFFFF
        if count == 0 or i + count > words.size:
            return
        yield op, words[i : i + count]
        i += count


def binding_elements(words: np.ndarray) -> dict[int, str]:
    """Binding index -> element type name (``f32``, ``i32``...) of each storage buffer a module declares.

    Unknown or malformed modules give an empty or partial answer, never an error."""
    w = np.asarray(words, dtype=np.uint32)
    bindings: dict[int, int] = {}  # variable id -> binding
    scalars: dict[int, str] = {}
    vectors: dict[int, int] = {}  # vector id -> component id
    arrays: dict[int, int] = {}  # (runtime) array id -> element id
    structs: dict[int, list[int]] = {}
    pointers: dict[int, int] = {}  # pointer id -> pointee id
    variables: dict[int, int] = {}  # variable id -> pointer type id (storage buffers only)
    for op, inst in spirv_instructions(w):
        args = [int(x) for x in inst[1:]]
        if op == _OP_DECORATE and len(args) >= 3 and args[1] == _DECORATION_BINDING:
            bindings[args[0]] = args[2]
        elif op == _OP_TYPE_INT and len(args) >= 3:
            scalars[args[0]] = f"i{args[1]}"  # IREE's integers are signless
        elif op == _OP_TYPE_FLOAT and len(args) >= 2:
            scalars[args[0]] = f"f{args[1]}"
        elif op == _OP_TYPE_VECTOR and len(args) >= 2:
            vectors[args[0]] = args[1]
        elif op in (_OP_TYPE_ARRAY, _OP_TYPE_RUNTIME_ARRAY) and len(args) >= 2:
            arrays[args[0]] = args[1]
        elif op == _OP_TYPE_STRUCT and args:
            structs[args[0]] = args[1:]
        elif op == _OP_TYPE_POINTER and len(args) >= 3:
            pointers[args[0]] = args[2]
        elif op == _OP_VARIABLE and len(args) >= 3 and args[2] == _STORAGE_BUFFER:
            variables[args[1]] = args[0]

    def element(type_id: int, depth: int = 0) -> str | None:
        if depth > 8:
            return None
        if type_id in scalars:
            return scalars[type_id]
        if type_id in vectors:
            return element(vectors[type_id], depth + 1)
        if type_id in arrays:
            return element(arrays[type_id], depth + 1)
        if type_id in structs and structs[type_id]:
            return element(structs[type_id][0], depth + 1)
        if type_id in pointers:
            return element(pointers[type_id], depth + 1)
        return None

    out: dict[int, str] = {}
    for var, pointer in variables.items():
        if var in bindings:
            found = element(pointer)
            if found is not None:
                out[bindings[var]] = found
    return out


def module_binding_elements(module_path: str | Path) -> dict[str, dict[int, str]]:
    """Export name -> binding -> element type, for every Vulkan (descriptor ABI) executable of a module."""
    from engine.runtime.vmfb.module import open_vmfb
    from engine.runtime.vmfb.vke1 import is_vke1, read_vke1

    found: dict[str, dict[int, str]] = {}
    try:
        module = open_vmfb(module_path)
        executables = list(module.executables)
    except Exception:  # noqa: BLE001 - typing is best effort; the run reports a broken module itself
        return found
    for exe in executables:
        try:
            if not is_vke1(exe.data):
                continue
            vke1 = read_vke1(exe.data)
            for p in vke1.pipelines:
                if p.shader_module_ordinal < len(vke1.shader_modules):
                    found[p.entry_point] = binding_elements(
                        vke1.shader_modules[p.shader_module_ordinal].spirv
                    )
        except Exception:  # noqa: BLE001 - one unreadable executable leaves the others typed
            continue
    return found
