"""VM bytecode disassembly in the text format of IREE 3.13's ``iree-dump-module --output=disassembly``.

The output matches the tool line for line, with two deliberate differences where the 3.13 tool is
wrong (see docs/iree-3.13-runtime-facts.md §9.6):

* ``vm.switch.ref`` is decoded with its type-id field (the tool skips it and mis-decodes the rest of
  the function);
* ``vm.cast.ui64.f32`` is printed (the tool stops with "unhandled ext opcode").

Besides text, :func:`function_lines` gives structured lines for a GUI: pc, text, jump targets and
whether the line is a block label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from engine.runtime import isa
from engine.runtime.vmfb.decoder import Instruction, branch_targets, iter_instructions
from engine.runtime.vmfb.module import Function, VmfbModule

# Symbols whose disassembly the 3.13 tool gets wrong (tests exempt exactly these lines).
KNOWN_TOOL_BUGS = frozenset({"SwitchRef", "CastUI64F32"})

# Explicit templates: ``{name}`` renders operand ``name`` by its kind; ``{name!r}`` renders a ref
# register without its MOVE mark (the tool prints some ref operands that way). ``MN`` is the mnemonic.
_TEMPLATES: dict[str, str] = {}


def _t(symbols: str, template: str) -> None:
    for s in symbols.split():
        _TEMPLATES[s] = template


_t("GlobalLoadI32 GlobalLoadI64 GlobalLoadF32 GlobalLoadF64", "{result} = MN .rwdata[{byte_offset}]")
_t("GlobalLoadIndirectI32 GlobalLoadIndirectI64", "{result} = MN .rwdata[{byte_offset}]")
_t("GlobalLoadIndirectF32 GlobalLoadIndirectF64", "{result} = MN .rwdata[{byte_offset}]")
_t("GlobalStoreI32 GlobalStoreI64 GlobalStoreF32 GlobalStoreF64", "MN {value}, .rwdata[{byte_offset}]")
_t("GlobalStoreIndirectI32 GlobalStoreIndirectI64", "MN {value}, .rwdata[{byte_offset}]")
_t("GlobalStoreIndirectF32 GlobalStoreIndirectF64", "MN {value}, .rwdata[{byte_offset}]")
_t("GlobalLoadRef GlobalLoadIndirectRef", "{value} = MN .refs[{global}] : {type_def}")
_t("GlobalStoreRef GlobalStoreIndirectRef", "MN {value}, .refs[{global}] : {type_def}")
_t("ConstI32Zero ConstI64Zero ConstF32Zero ConstF64Zero", "{result} = MN")
_t("ConstI32 ConstI64 ConstF32 ConstF64", "{result} = MN {value}")
_t("ConstRefZero", "{result!r} = MN")
_t("ListAlloc", "{result} = MN {initial_capacity} : !vm.list<{element_type}>")
_t("ListReserve", "MN {list!r}, {minimum_capacity}")
_t("ListSize", "{result} = MN {list!r}")
_t("ListResize", "MN {list!r}, {new_size}")
_t("ListGetI32 ListGetI64 ListGetF32 ListGetF64", "{result} = MN {list!r}, {index}")
_t("ListSetI32 ListSetI64 ListSetF32 ListSetF64 ListSetRef", "MN {list!r}, {index}, {value}")
_t("ListGetRef", "{result} = MN {list!r}, {index} : {type_def}")
_t("SelectI32 SelectI64 SelectF32 SelectF64", "{result} = MN {condition} ? {true_value} : {false_value}")
_t("SelectRef", "{result} = MN {condition} ? {true_value} : {false_value} -> {true_value_type_def}")
_t(
    "SwitchI32 SwitchI64 SwitchF32 SwitchF64 SwitchRef",
    "{result} = MN {index}[{values}] else {default_value}",
)
_t("CastAnyRef", "{result} = MN {operand} : !vm.ref<?> -> {result_type}")
_t("AssignRef", "{result} = MN {source}")
_t("BufferAlloc", "{result} = MN {length}, {alignment}")
_t("BufferClone", "{result} = MN {source!r}, {offset}, {length}, {alignment}")
_t("BufferLength", "{result} = MN {buffer!r}")
_t("BufferCopy", "MN {source_buffer!r}, {source_offset}, {target_buffer!r}, {target_offset}, {length}")
_t("BufferCompare", "{result} = MN {lhs_buffer!r}, {lhs_offset}, {rhs_buffer!r}, {rhs_offset}, {length}")
_t(
    "BufferFillI8 BufferFillI16 BufferFillI32 BufferFillI64 BufferFillF32 BufferFillF64",
    "MN {target_buffer!r}, {target_offset}, {length}, {value}",
)
_t(
    "BufferLoadI8U BufferLoadI8S BufferLoadI16U BufferLoadI16S BufferLoadI32 BufferLoadI64 "
    "BufferLoadF32 BufferLoadF64",
    "{result} = MN {source_buffer!r}, {source_offset}",
)
_t(
    "BufferStoreI8 BufferStoreI16 BufferStoreI32 BufferStoreI64 BufferStoreF32 BufferStoreF64",
    "MN {value}, {target_buffer!r}, {target_offset}",
)
_t("BufferHash", "{result} = MN {source_buffer!r}, {source_offset}, {length}")
_t("DiscardRefs", "MN {refs}")
_t("Branch Yield Break", "MN {dest_pc}({operands})")
_t("CondBranch", "MN {condition}, {true_dest_pc}({true_operands}), {false_dest_pc}({false_operands})")
_t("CondBreak", "MN {condition}, {dest_pc}({operands})")
_t("CallYieldable", "MN @{callee_ordinal}({operands}) -> {dest_pc}({results})")
_t(
    "CallVariadicYieldable",
    "MN @{callee_ordinal} segments[{segment_sizes}]({operands}) -> {dest_pc}({results})",
)
_t("Fail", 'MN {status}, "{message}"')
_t("Trace Print", 'MN "{event_name}"({operands})')

_FIELD = re.compile(r"\{(\w+)(!r)?\}")


def _compile(op: isa.Opcode) -> tuple:
    """A template as a tuple of literal strings and (operand index, no_move) pairs."""
    template = _TEMPLATES.get(op.symbol)
    if template is None:
        # Register-only ops: "{result} = MN {a}, {b}, ...".
        reads = [s.name for s in op.operands if s.access == "read"]
        writes = [s.name for s in op.operands if s.access == "write"]
        template = "{%s} = MN " % writes[0] + ", ".join("{%s!r}" % r for r in reads)
    template = template.replace("MN", op.mnemonic)
    names = [s.name for s in op.operands]
    parts: list = []
    pos = 0
    for m in _FIELD.finditer(template):
        if m.start() > pos:
            parts.append(template[pos : m.start()])
        parts.append((names.index(m.group(1)), bool(m.group(2))))
        pos = m.end()
    if pos < len(template):
        parts.append(template[pos:])
    return tuple(parts)


_COMPILED: dict[str, tuple] = {
    op.symbol: _compile(op)
    for op in isa.ALL_OPCODES
    if op.mnemonic
    and op.symbol not in ("Call", "CallVariadic", "Return", "BranchTable", "ImportResolved")
    and op.symbol != "ConstRefRodata"
}


def format_f32(value: float) -> str:
    """C's ``%.9g`` for a float (nan/inf spelled as C prints them)."""
    return _c_float(value, "%.9g")


def format_f64(value: float) -> str:
    return _c_float(value, "%.17g")


def _c_float(value: float, fmt: str) -> str:
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    return fmt % value


def reg_name(reg: int, kind: str | None = None, *, show_move: bool = True) -> str:
    """A register as the disassembler names it: %i3, %i4:5 (64-bit pair), %r1, %R1 (ref moved)."""
    if kind in (isa.REG_I64, isa.REG_F64):
        r = reg & isa.PRIMITIVE_INDEX_MASK
        return f"%i{r}:{r + 1}"
    if kind in (isa.REG_I32, isa.REG_F32):
        return f"%i{reg & isa.PRIMITIVE_INDEX_MASK}"
    if kind == isa.REG_REF or reg & isa.REF_BANK_BIT:
        idx = reg & isa.REF_INDEX_MASK
        return f"%R{idx}" if show_move and reg & isa.REF_MOVE_BIT else f"%r{idx}"
    return f"%i{reg & isa.PRIMITIVE_INDEX_MASK}"


class FunctionDisassembler:
    """Disassembles the functions of one module (names of types, functions and rodata come from it)."""

    def __init__(self, module: VmfbModule):
        self.module = module
        self._types = module.types
        self._imports = [imp.full_name for imp in module.imports]
        functions = module.functions
        self._internal_names = [f.debug_name for f in functions]
        self._rodata_lengths = [s.length for s in module.rodata_segments]

    # -- names ----------------------------------------------------------------------------------------

    def function_ref(self, ordinal: int) -> str:
        """A call target as the tool prints it: an import's full name, module.name or module:N."""
        if ordinal & isa.IMPORT_BIT:
            i = ordinal & ~isa.IMPORT_BIT
            name = self._imports[i] if i < len(self._imports) else ""
            return name if name else f"import:{i}"
        name = self._internal_names[ordinal] if ordinal < len(self._internal_names) else None
        return f"{self.module.name}.{name}" if name else f"{self.module.name}:{ordinal}"

    def type_name(self, type_id: int) -> str:
        if 0 <= type_id < len(self._types) and self._types[type_id]:
            return self._types[type_id]
        return "*"

    # -- operands -------------------------------------------------------------------------------------

    def _operand(self, spec: isa.Operand, value, no_move: bool, blocks: dict[int, int]) -> str:
        k = spec.kind
        if k in isa.REGISTER_KINDS:
            return reg_name(value, k, show_move=not no_move and spec.kind == isa.REG_REF)
        if k == isa.REG_LIST:
            return ", ".join(reg_name(r) for r in value)
        if k == isa.REMAP:
            return ", ".join(f"{reg_name(s)}->{reg_name(d)}" for s, d in value)
        if k == isa.SEGMENT_SIZES:
            return ", ".join(str(v & 0xFFFF) for v in value)
        if k == isa.BRANCH:
            return _block_ref(value, blocks)
        if k == isa.FUNC:
            return self.function_ref(value)
        if k == isa.TYPE:
            return self.type_name(value)
        if k == isa.IMM_I32:
            return f"{value}  // 0x{value & 0xFFFFFFFF:08X}"
        if k == isa.IMM_I64:
            return f"{value}  // 0x{value & 0xFFFFFFFFFFFFFFFF:016X}"
        if k == isa.IMM_F32:
            return format_f32(value)
        if k == isa.IMM_F64:
            return format_f64(value)
        return str(value)  # global, rodata, str16, table_size

    def instruction_text(self, ins: Instruction, blocks: dict[int, int]) -> str:
        """One instruction's text (without indentation); ``blocks`` maps block pcs to ordinals."""
        op = ins.opcode
        sym = op.symbol
        vals = ins.operands
        specs = op.operands
        if sym == "Block":
            return f"{_block_ref(ins.pc, blocks)}:"
        parts = _COMPILED.get(sym)
        if parts is not None:
            out = []
            for p in parts:
                if isinstance(p, str):
                    out.append(p)
                else:
                    out.append(self._operand(specs[p[0]], vals[p[0]], p[1], blocks))
            return "".join(out)
        if sym in ("Call", "CallVariadic"):
            results = vals[-1]
            head = ", ".join(reg_name(r) for r in results) + " = " if results else ""
            segs = ""
            if sym == "CallVariadic":
                segs = " segments[" + ", ".join(str(v & 0xFFFF) for v in vals[1]) + "]"
            args = ", ".join(reg_name(r) for r in vals[-2])
            return f"{head}{op.mnemonic} @{self.function_ref(vals[0])}{segs}({args})"
        if sym == "Return":
            return "vm.return" + (" " + ", ".join(reg_name(r) for r in vals[0]) if vals[0] else "")
        if sym == "ConstRefRodata":
            ordinal, reg = vals
            length = self._rodata_lengths[ordinal] if ordinal < len(self._rodata_lengths) else 0
            return f"{reg_name(reg)} = vm.const.ref.rodata {ordinal}  // {length}b"
        if sym == "ImportResolved":
            ordinal, reg = vals
            bad = "" if ordinal & isa.IMPORT_BIT else "{{INVALID ORDINAL %d}}" % ordinal
            return f"{reg_name(reg)} = vm.import.resolved @{bad}{self.function_ref(ordinal)}"
        if sym == "BranchTable":
            index, default, default_remap, _, cases = vals
            text = f"vm.br_table {reg_name(index)} {{ default: {_block_ref(default, blocks)}("
            text += ", ".join(f"{reg_name(s)}->{reg_name(d)}" for s, d in default_remap)
            for i, (target, remap) in enumerate(cases):
                text += f"), {i}: {_block_ref(target, blocks)}("
                text += ", ".join(f"{reg_name(s)}->{reg_name(d)}" for s, d in remap)
            return text + ") }"
        raise AssertionError(f"no disassembly rule for {sym}")  # every opcode has one (tested)

    # -- functions ------------------------------------------------------------------------------------

    def lines(self, function: Function) -> list[DisassemblyLine]:
        instructions = list(iter_instructions(function.code))
        blocks = {}
        for ins in instructions:
            if ins.opcode.is_block_marker:
                blocks[ins.pc] = len(blocks)
        return [
            DisassemblyLine(
                ins.pc,
                self.instruction_text(ins, blocks),
                branch_targets(ins),
                ins.opcode.is_block_marker,
                ins,
            )
            for ins in instructions
        ]

    def instruction_locations(self, function: Function) -> dict[int, str]:
        """Source location text of each instruction pc that the debug database maps (``{pc: text}``)."""
        db = self.module.debug_database
        if db is None:
            return {}
        source_map = db.source_map(function, len(self.module.functions))
        if source_map is None:
            return {}
        out: dict[int, str] = {}
        for pc, index in source_map.locations.tolist():
            # IREE looks an instruction up by its exact pc and takes the first entry that matches.
            if pc not in out:
                out[pc] = _one_line(db.location_text(index))
        return out

    def function_text(
        self, function: Function, *, bytecode_offsets: bool = False, locations: bool = False
    ) -> Iterator[str]:
        """The lines of one function, header and closing brace included (each without newline).

        ``locations=True`` appends each instruction's source location (``  loc("model.mlir":3:5)``) where
        the debug database has one.
        """
        for export in self.module.exports:
            if export.internal_ordinal != function.ordinal:
                continue
            fname = tool_function_name(self.module, function)
            yield (
                f"vm.export @{export.name}"
                if export.name == fname
                else f"vm.export @{export.name} = @{fname}"
            )
        yield f"vm.func @{tool_function_name(self.module, function)}{_signature_text(function)} {{"
        where = self.instruction_locations(function) if locations else {}
        for line in self.lines(function):
            indent = "" if line.is_block_label else "  "
            prefix = f"[{line.pc:08X}]" if bytecode_offsets else ""
            loc = where.get(line.pc) if not line.is_block_label else None
            yield f"{prefix}{indent}{line.text}" + (f"  loc({loc})" if loc is not None else "")
        yield "}"


def _one_line(text: str) -> str:
    """A location read from a file on one line (names may hold line breaks)."""
    return text.replace("\n", "\\n").replace("\r", "\\r")


@dataclass(frozen=True)
class DisassemblyLine:
    """One line of a function's disassembly, for views that need more than text."""

    pc: int
    text: str  # without indentation or offset prefix
    targets: tuple[int, ...]  # block pcs this instruction may jump to
    is_block_label: bool
    instruction: Instruction


def _block_ref(pc: int, blocks: dict[int, int]) -> str:
    ordinal = blocks.get(pc)
    return f"^bb{ordinal}" if ordinal is not None else f"^{pc:08X}"


def tool_function_name(module: VmfbModule, function: Function) -> str:
    """The name iree-dump-module gives a function: first export, else the debug name, else fnN."""
    if function.aliases:
        return function.aliases[0]
    return function.debug_name or f"fn{function.ordinal}"


def _signature_text(function: Function) -> str:
    cc = function.signature.calling_convention
    args = results = ""
    if cc:
        body = cc[1:]
        a, _, r = body.partition("_")
        args, results = a, r
    i32 = ref = 0
    parts = []
    names = {"i": "i32", "f": "f32", "I": "i64", "F": "f64", "r": "!vm.ref<?>"}
    for c in args:
        if c == "v":
            continue
        if c in "if":
            parts.append(f"%i{i32}: {names[c]}")
            i32 += 1
        elif c in "IF":
            parts.append(f"%i{i32}:{i32 + 1}: {names[c]}")
            i32 += 2
        elif c == "r":
            parts.append(f"%r{ref}: {names[c]}")
            ref += 1
        else:
            parts.append(f"<{c}>")
    res = [names.get(c, f"<{c}>") for c in results if c != "v"]
    return f"({', '.join(parts)}) -> ({', '.join(res)})"


def module_lines(
    module: VmfbModule, *, bytecode_offsets: bool = False, rodata: bool = True, locations: bool = False
) -> Iterator[str]:
    """The whole ``--output=disassembly`` text, line by line (without newlines).

    ``rodata=False`` leaves out the ``vm.rodata[i] = HEX`` directives (huge for big constants);
    ``locations=True`` appends each instruction's source location (see ``function_text``).
    """
    yield f"vm.module @{module.name} version {module.version}"
    directives = False
    for t in module.types:
        if t:
            yield f"vm.type {t}"
        directives = True
    for imp in module.imports:
        opt = "optional " if imp.optional else ""
        yield f'vm.import {opt}@{imp.full_name} cconv "{imp.signature.calling_convention}"'
        directives = True
    for seg in module.rodata_segments:
        yield f"vm.rodata[{seg.ordinal}] = " + (
            bytes(seg.data).hex().upper() if rodata else f"<{seg.length} bytes>"
        )
        directives = True
    if directives:
        yield ""
    dis = FunctionDisassembler(module)
    for i, f in enumerate(module.functions):
        if i or not directives:
            yield ""  # exactly one blank line before each function
        yield from dis.function_text(f, bytecode_offsets=bytecode_offsets, locations=locations)


def function_lines(module: VmfbModule, function: Function | int | str) -> list[DisassemblyLine]:
    """Structured disassembly of one function (by object, ordinal or name)."""
    if not isinstance(function, Function):
        function = module.function(function)
    return FunctionDisassembler(module).lines(function)
