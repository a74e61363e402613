"""The names of a module's globals, read from the VM phase snapshot of its compilation, and the tensor type of
each buffer global the flow phase declares as a tensor.

A ``.vmfb`` keeps no global names: the bytecode says ``vm.global.load.ref .refs[3]`` and no more. The
compiler's VM phase (``<module>.12.vm.mlir``, written by ``--dump-compilation-phases-to`` and by IREE Lens's
compile) declares them, and IREE's serializer numbers them from that IR's order (``VM/Analysis/
OrdinalAnalysis.cpp``): ref globals by position; i32/f32 globals then i64/f64 ones packed into ``.rwdata``,
each naturally aligned. Between that phase and the bytes only pseudo-ops are rewritten. The names are used
only when the counts the module records (``ModuleStateDef``: ref count, rwdata bytes) equal the snapshot's;
a snapshot of another build says so instead.

A buffer global holds the bytes of a tensor global of the program (``util.global @state : tensor<8xf32>``
keeps its name through stream and HAL); its type is taken from the flow phase, the last one where globals are
tensors, and only when the type is static, has no encoding (a data-tiled constant is laid out otherwise) and
its byte size equals the buffer's. Otherwise the buffer is bytes, said.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVE_SIZES = {"i32": 4, "f32": 4, "i64": 8, "f64": 8}
CONSTANT = "constant"  # said after a tensor type the flow phase declares immutable

_VM_GLOBAL = re.compile(r"^\s*vm\.global\.(?P<kind>ref|i32|i64|f32|f64)\s(?P<rest>.*)$")
_UTIL_GLOBAL = re.compile(r"^\s*util\.global\s(?P<rest>.*)$")
_SYMBOL = re.compile(r'@(?P<name>"(?:[^"\\]|\\.)*"|[\w$.\-]+)')
_TENSOR = re.compile(r":\s*tensor<(?P<body>[^<>]*)>\s*$")


@dataclass(frozen=True)
class NamedGlobal:
    """One global of the module as its compilation declared it."""

    name: str
    kind: str  # "ref", or the primitive type: i32, i64, f32, f64
    index: int  # the ref ordinal, or the byte offset in .rwdata
    type_text: str  # the declared type: !vm.ref<!hal.buffer>, i32, ...


@dataclass(frozen=True)
class GlobalNames:
    """The names of a module's globals, or why there are none (``note``)."""

    globals: tuple[NamedGlobal, ...] = ()
    note: str = ""  # where the names come from, or why the module's globals have none
    # A ref global's name -> its tensor (8xf32; "8xf32 constant" for an immutable one: IREE may pack several
    # constants into one buffer, so only a buffer of exactly that size holds that tensor alone).
    tensor_types: dict[str, str] = field(default_factory=dict)

    @property
    def in_display_order(self) -> tuple[NamedGlobal, ...]:
        """The program's own globals first, the compiler's (``__device_0``, ``__main_memoize_...``) after; each
        group as numbered (refs by ordinal, then the others by offset)."""
        return tuple(sorted(self.globals, key=lambda g: g.name.startswith("__")))

    def tensor_type(self, name: str) -> str:
        """The tensor type of ref global ``name`` (``8xf32``), or "" when the flow phase declares none."""
        return self.tensor_types.get(name, "").removesuffix(f" {CONSTANT}")


def _symbol(rest: str) -> str | None:
    m = _SYMBOL.search(rest)
    if m is None:
        return None
    name = m["name"]
    return name[1:-1] if name.startswith('"') else name


_LINE_CAP = 4096  # a declaration's line is read whole up to this; a longer one (a constant inline) by its ends


def declaration_lines(path: Path, start: bytes) -> Iterator[str]:
    """Each line of ``path`` that begins (after indentation) with ``start``, found through a memory map so a
    snapshot of hundreds of MB (weights inline as hex) is never read whole: the line's text, or for a longer
    line its first and last bytes joined by `` ... `` (the name comes first, the type last)."""
    import mmap

    pattern = re.compile(rb"^[ \t]*" + re.escape(start), re.MULTILINE)
    with open(path, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            return
        with data:
            for m in pattern.finditer(data):
                end = data.find(b"\n", m.start())
                end = len(data) if end < 0 else end
                if end - m.start() <= _LINE_CAP:
                    raw = data[m.start() : end]
                else:
                    raw = data[m.start() : m.start() + _LINE_CAP // 2] + b" ... " + data[end - _LINE_CAP // 2 : end]
                yield raw.decode("utf-8", "replace")


def declared_globals(vm_phase: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, name, type) of each ``vm.global.*`` declaration of a VM phase snapshot, in IR order."""
    for line in declaration_lines(vm_phase, b"vm.global."):
        m = _VM_GLOBAL.match(line)
        if m is None:
            continue
        name = _symbol(m["rest"])
        if name is not None:
            yield m["kind"], name, m["rest"].rpartition(" : ")[2].strip()


def number_globals(declared: list[tuple[str, str, str]]) -> tuple[tuple[NamedGlobal, ...], int, int]:
    """The globals with IREE's ordinals (OrdinalAnalysis), the ref count and the .rwdata byte count."""
    named: list[NamedGlobal] = []
    refs = 0
    by_size: dict[int, list[tuple[str, str, str]]] = {}
    for kind, name, type_text in declared:
        if kind == "ref":
            named.append(NamedGlobal(name, kind, refs, type_text))
            refs += 1
        else:
            by_size.setdefault(PRIMITIVE_SIZES[kind], []).append((kind, name, type_text))
    offset = end = 0
    for size in sorted(by_size):
        offset = -(-offset // size) * size  # naturally aligned
        for kind, name, type_text in by_size[size]:
            named.append(NamedGlobal(name, kind, offset, type_text))
            offset += size
            end = max(end, offset)
    return tuple(named), refs, end


def flow_tensor_types(flow_phase: Path) -> dict[str, str]:
    """``name -> 8xf32`` for each ``util.global`` the flow phase declares as a static tensor without encoding
    (a constant's name ``-> "8xf32 constant"``: IREE may pack constants into one buffer named after one)."""
    types: dict[str, str] = {}
    for line in declaration_lines(flow_phase, b"util.global "):
        m = _UTIL_GLOBAL.match(line)
        if m is None:
            continue
        name, typed = _symbol(m["rest"]), _TENSOR.search(m["rest"])
        if name is None or typed is None:
            continue
        body = typed["body"]
        if "," in body or "?" in body or "#" in body:
            continue  # an encoding (a data-tiled layout) or a dynamic shape: its bytes are not this type's
        mutable = "mutable" in m["rest"].split("@", 1)[0].split()
        types[name] = body if mutable else f"{body} {CONSTANT}"
    return types


def phase_snapshot(folder: Path, stem: str, phase: str) -> Path | None:
    """The ``*.<phase>.mlir`` snapshot in ``folder`` (IREE Lens's compile output, ``iree-lens phases``, a
    ``--dump-compilation-phases-to`` folder); the one named after the module's ``stem`` where it holds several."""
    found = sorted(folder.glob(f"*.{phase}.mlir"))
    mine = [p for p in found if p.name.startswith(f"{stem}.")]
    if len(mine) == 1:
        return mine[0]
    return found[0] if len(found) == 1 else None


def names_beside(module_path: str | Path, module) -> GlobalNames:
    """The global names of ``module`` (a ``VmfbModule``) read from ``module_path``'s folder."""
    return read_global_names([Path(module_path).parent], Path(module_path).stem, module)


def code_disagrees(named: tuple[NamedGlobal, ...], module) -> str | None:
    """Where ``module``'s code accesses a global otherwise than ``named`` declares it (a ref of another type, a
    byte offset holding no global of that kind), or None: each direct ``vm.global.load/store`` checked."""
    refs = {g.index: g for g in named if g.kind == "ref"}
    others = {g.index: g for g in named if g.kind != "ref"}
    types = module.types
    for _, ins, kind, index in _direct_accesses(module):
        if kind == "ref":
            type_id = ins.operand("type_def")
            used = types[type_id] if 0 <= type_id < len(types) else "?"
            g = refs.get(index)
            # The VM dialect prints its own types bare (!vm.buffer, !vm.list<...>), others as !vm.ref<...>.
            if g is None or (used != "?" and g.type_text not in (used, f"!vm.ref<{used}>")):
                declared = f"@{g.name} as {g.type_text}" if g else "none"
                return f"the module's code uses .refs[{index}] as {used}, the snapshot declares {declared}"
        else:
            g = others.get(index)
            if g is None or g.kind != kind:
                declared = f"@{g.name} as {g.kind}" if g else "none"
                return f"the module's code uses .rwdata[{index}] as {kind}, the snapshot declares {declared}"
    return None


def read_global_names(folders: list[Path], stem: str, module) -> GlobalNames:
    """The names of the globals of ``module`` (a ``VmfbModule``, file stem ``stem``) from the first VM phase
    snapshot in ``folders`` (the module's own folder, then a rebuild's) that agrees with it: the ref count
    and .rwdata size its ``ModuleStateDef`` records, and the kind and type each global access of its code uses."""
    ref_count, byte_count = module.module_state.global_ref_count, module.module_state.global_bytes_capacity
    notes = []
    for folder in folders:
        vm_phase = phase_snapshot(folder, stem, "vm")
        if vm_phase is None:
            continue
        try:
            declared = list(declared_globals(vm_phase))
        except OSError as e:
            notes.append(f"{vm_phase} cannot be read ({e.strerror or e})")
            continue
        named, refs, rwdata = number_globals(declared)
        if (refs, rwdata) != (ref_count, byte_count):
            notes.append(f"{vm_phase.name} declares {refs} ref globals and {rwdata} bytes of others, the module has "
                         f"{ref_count} and {byte_count}: a snapshot of another build")  # fmt: skip
            continue
        disagreement = code_disagrees(named, module)
        if disagreement is not None:
            notes.append(f"{vm_phase.name} is a snapshot of another build: {disagreement}")
            continue
        flow_phase = phase_snapshot(folder, stem, "flow")
        try:
            tensor_types = flow_tensor_types(flow_phase) if flow_phase else {}
        except OSError:
            tensor_types = {}
        return GlobalNames(named, f"names from {vm_phase}", tensor_types)
    if not notes:
        notes.append("a .vmfb keeps none, and no VM phase snapshot (*.vm.mlir) is beside it (compile the program in "
                     "IREE Lens, or with --dump-compilation-phases-to)")  # fmt: skip
    return GlobalNames(note="names unknown: " + "; ".join(notes))


# The direct global accesses (an indirect one's global is in a register: known only when it runs).
_DIRECT_REF = ("GlobalLoadRef", "GlobalStoreRef")
_DIRECT_BYTES = tuple(f"Global{op}{t}" for op in ("Load", "Store") for t in ("I32", "I64", "F32", "F64"))


def direct_access(instruction) -> tuple[str, int] | None:
    """``(kind, index)`` of the global a ``vm.global.load/store`` instruction (a decoded ``Instruction``)
    names: ``("ref", ordinal)`` or ``("i32", .rwdata offset)``...; None for other instructions and indirect
    accesses."""
    symbol = instruction.symbol
    if symbol in _DIRECT_REF:
        return "ref", instruction.operand("global")
    if symbol in _DIRECT_BYTES:
        return symbol[-3:].lower(), instruction.operand("byte_offset")
    return None


def _direct_accesses(module):
    """``(function, instruction, kind, index)`` of every direct global access of ``module``'s code."""
    from engine.runtime.vmfb.decoder import iter_instructions

    for function in module.functions:
        for ins in iter_instructions(function.code):
            access = direct_access(ins)
            if access is not None:
                yield function, ins, *access


def accessed_global(names: GlobalNames, instruction) -> str | None:
    """The name of the global a ``vm.global.load/store`` instruction reads or writes, when ``names`` has it;
    None for other instructions and indirect accesses."""
    access = direct_access(instruction)
    if access is None:
        return None
    kind, index = access
    for g in names.globals:
        if g.index == index and (g.kind == "ref") == (kind == "ref"):
            return g.name
    return None


def global_accesses(module) -> dict[tuple[str, int], tuple[set[str], set[str]]]:
    """``(kind, index) -> (functions that load it, functions that store it)`` over ``module``'s code, for each
    direct global access (``kind`` "ref" with the ref ordinal, else the type with the .rwdata offset)."""
    from engine.runtime.vmfb.disassembler import tool_function_name

    out: dict[tuple[str, int], tuple[set[str], set[str]]] = {}
    for function, ins, kind, index in _direct_accesses(module):
        loads, stores = out.setdefault((kind, index), (set(), set()))
        (loads if "Load" in ins.symbol else stores).add(tool_function_name(module, function))
    return out


def describe_globals(module, names: GlobalNames) -> list[str]:
    """``iree-lens inspect --output=globals``: each global with its place, type and the functions that load and
    store it; by name where ``names`` has them (else by place, with why)."""
    state = module.module_state
    lines = [f"globals: {state.global_ref_count} refs, {state.global_bytes_capacity} bytes of others "
             f"({names.note})"]  # fmt: skip
    accesses = global_accesses(module)

    def used(kind: str, index: int) -> str:
        loads, stores = accesses.get((kind, index), (set(), set()))
        parts = [f"{what} by {', '.join(sorted(fns))}" for what, fns in (("loaded", loads), ("stored", stores)) if fns]
        return "; ".join(parts) or "not accessed directly"

    if names.globals:
        for g in names.in_display_order:
            place = f".refs[{g.index}]" if g.kind == "ref" else f".rwdata[{g.index}]"
            tensor = names.tensor_types.get(g.name, "")
            if tensor.endswith(CONSTANT):
                held = f" (the flow phase declares a {tensor}; IREE may pack constants into one buffer)"
            else:
                held = f" (holds {tensor}, as the flow phase declares it)" if tensor else ""
            lines.append(f"  @{g.name}  {place}  {g.type_text}{held}: {used(g.kind, g.index)}")
        return lines
    for (kind, index) in sorted(accesses, key=lambda k: (k[0] != "ref", k[1])):
        place = f".refs[{index}]" if kind == "ref" else f".rwdata[{index}] {kind}"
        lines.append(f"  {place}: {used(kind, index)}")
    return lines


def calls_leave_state(module) -> bool:
    """Whether a call of ``module`` can leave state for the next one: code other than the initializer stores a
    global (a KV cache, a counter). IREE's initializer (``__init``) sets the globals once, as the module loads;
    the functions of a stateless program only load them."""
    from engine.runtime.vmfb.decoder import iter_instructions
    from engine.runtime.vmfb.disassembler import tool_function_name

    for function in module.functions:
        if tool_function_name(module, function).startswith("__init"):
            continue
        if any("GlobalStore" in ins.symbol for ins in iter_instructions(function.code)):
            return True
    return False
