"""Decoding VM bytecode instructions, driven only by the opcode table in :mod:`engine.runtime.isa`.

``pc`` values are function-relative (IREE's convention): ``code`` is the bytecode of one function,
starting at its first block marker, and its length bounds every read.

Operand values, in encoding order (see ``Instruction.operands``):

* registers: the raw u16 (ref bank bit 0x8000 and MOVE bit 0x4000 left in place);
* immediates: int (signed) or float; global/type/rodata/func/branch: the u32 as an int;
* str16: ``str``; register lists: tuple of raw u16; segment sizes: tuple of ints (-1 = not a span);
* remap lists: tuple of ``(src, dst)`` pairs; br_table cases: tuple of ``(target, remap)``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from engine.errors import VmfbFormatError
from engine.runtime import isa

_FIXED_CHARS = {
    isa.REG_I32: "H",
    isa.REG_I64: "H",
    isa.REG_F32: "H",
    isa.REG_F64: "H",
    isa.REG_REF: "H",
    isa.IMM_I32: "i",
    isa.IMM_I64: "q",
    isa.IMM_F32: "f",
    isa.IMM_F64: "d",
    isa.GLOBAL: "I",
    isa.TYPE: "I",
    isa.RODATA: "I",
    isa.FUNC: "I",
    isa.BRANCH: "I",
    isa.TABLE_SIZE: "H",
}

# Decoding steps (the first element of each step tuple).
_FIXED, _REGS, _SEGMENTS, _REMAP, _STR, _CASES = range(6)

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class Instruction:
    """One decoded instruction: where it is, what it is, and its operand values in encoding order."""

    pc: int  # function-relative offset of the first opcode byte
    next_pc: int  # offset just past the instruction
    opcode: isa.Opcode
    operands: tuple

    @property
    def size(self) -> int:
        return self.next_pc - self.pc

    @property
    def symbol(self) -> str:
        return self.opcode.symbol

    @property
    def called_import(self) -> int | None:
        """The import ordinal a call instruction calls (None: not a call, or a call of a bytecode function)."""
        if not self.opcode.symbol.startswith("Call"):
            return None
        callee = self.operands[0]
        return callee & ~isa.IMPORT_BIT if callee & isa.IMPORT_BIT else None

    def operand(self, name: str):
        """The value of the operand named ``name`` (IREE's field name, e.g. ``result``)."""
        for spec, value in zip(self.opcode.operands, self.operands):
            if spec.name == name:
                return value
        raise KeyError(f"{self.opcode.symbol} has no operand {name!r}")


def _compile_steps(op: isa.Opcode) -> tuple[tuple, ...]:
    steps: list[tuple] = []
    fmt = ""
    for spec in op.operands:
        ch = _FIXED_CHARS.get(spec.kind)
        if ch is not None:
            fmt += ch
            continue
        if fmt:
            steps.append((_FIXED, struct.Struct("<" + fmt)))
            fmt = ""
        steps.append(
            (
                {
                    isa.REG_LIST: _REGS,
                    isa.SEGMENT_SIZES: _SEGMENTS,
                    isa.REMAP: _REMAP,
                    isa.STR16: _STR,
                    isa.BR_TABLE_CASES: _CASES,
                }[spec.kind],
                None,
            )
        )
    if fmt:
        steps.append((_FIXED, struct.Struct("<" + fmt)))
    return tuple(steps)


# Per prefix (None = core): opcode byte -> (Opcode, steps, size of the opcode bytes).
_DECODERS: dict[int | None, dict[int, tuple[isa.Opcode, tuple, int]]] = {
    prefix: {code: (op, _compile_steps(op), 1 if prefix is None else 2) for code, op in table.items()}
    for prefix, table in isa.SETS.items()
}
_CORE = _DECODERS[None]
_PREFIXES = (isa.PREFIX_EXT_F32, isa.PREFIX_EXT_F64)


def _remap(code, p: int) -> tuple[tuple, int]:
    p += p & 1
    (n,) = _U16.unpack_from(code, p)
    vals = struct.unpack_from(f"<{2 * n}H", code, p + 2)
    return tuple(zip(vals[0::2], vals[1::2])), p + 2 + 4 * n


def _error(message: str, pc: int) -> VmfbFormatError:
    return VmfbFormatError(message, where=f"pc {pc:#06x}")


def decode(code: bytes | memoryview, pc: int) -> Instruction:
    """Decode the instruction at function-relative ``pc`` of one function's ``code``.

    Raises ``VmfbFormatError`` (naming the pc) for an unknown opcode or an instruction that runs past
    the end of ``code``.
    """
    end = len(code)
    if not 0 <= pc < end:
        raise _error(f"pc is outside the function's {end} bytes of bytecode", pc)
    b = code[pc]
    entry = _CORE.get(b)
    if b in _PREFIXES:
        if pc + 1 >= end:
            raise _error(f"prefix {b:#04x} at the end of the function", pc)
        entry = _DECODERS[b].get(code[pc + 1])
        if entry is None:
            raise _error(f"unknown opcode {b:#04x} {code[pc + 1]:#04x}", pc)
    elif entry is None:
        raise _error(f"unknown opcode {b:#04x}", pc)
    op, steps, p = entry
    p += pc
    out: list = []
    try:
        for kind, st in steps:
            if kind == _FIXED:
                out.extend(st.unpack_from(code, p))
                p += st.size
            elif kind == _REGS or kind == _SEGMENTS:
                p += p & 1
                (n,) = _U16.unpack_from(code, p)
                out.append(struct.unpack_from(f"<{n}{'H' if kind == _REGS else 'h'}", code, p + 2))
                p += 2 + 2 * n
            elif kind == _REMAP:
                r, p = _remap(code, p)
                out.append(r)
            elif kind == _STR:
                (n,) = _U16.unpack_from(code, p)
                if p + 2 + n > end:
                    raise struct.error("string past end")
                out.append(str(code[p + 2 : p + 2 + n], "utf-8", "replace"))
                p += 2 + n
            else:  # _CASES: the preceding table_size operand gives the count
                cases = []
                for _ in range(out[-1]):
                    (target,) = _U32.unpack_from(code, p)
                    r, p = _remap(code, p + 4)
                    cases.append((target, r))
                out.append(tuple(cases))
    except struct.error:
        raise _error(
            f"{op.mnemonic or op.symbol} runs past the end of the function ({end} bytes)", pc
        ) from None
    if p > end:
        raise _error(f"{op.mnemonic or op.symbol} runs past the end of the function ({end} bytes)", pc)
    return Instruction(pc, p, op, tuple(out))


def iter_instructions(code: bytes | memoryview, length: int | None = None) -> Iterator[Instruction]:
    """Every instruction of a function, in order, from pc 0 to ``length`` (default: all of ``code``)."""
    if length is not None:
        if length > len(code):
            raise _error(f"function length {length} exceeds its {len(code)} bytes of bytecode", 0)
        code = memoryview(code)[:length]
    pc = 0
    end = len(code)
    while pc < end:
        ins = decode(code, pc)
        yield ins
        pc = ins.next_pc


def branch_targets(ins: Instruction) -> tuple[int, ...]:
    """The block-marker pcs an instruction may jump to (empty for straight-line instructions)."""
    targets = []
    for spec, value in zip(ins.opcode.operands, ins.operands):
        if spec.kind == isa.BRANCH:
            targets.append(value)
        elif spec.kind == isa.BR_TABLE_CASES:
            targets.extend(t for t, _ in value)
    return tuple(targets)
