"""What each register holds along a straight-line walk of a function's bytecode.

Static analyses of host code (which rodata segment is passed to ``hal.executable.create``, which export
name a ``hal.command_buffer.dispatch`` uses) need to know what a register was last loaded with. A
:class:`RegisterValues` records facts about registers (``rodata`` ordinals, constants, whatever the caller
learns from a call) and forgets them when an instruction overwrites the register; values are carried
along branch remaps. The walk is linear: a fact survives until the register is written again, whatever
the control flow, which is exactly how IREE's generated host code uses these registers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Any

from engine.errors import VmfbFormatError
from engine.runtime import isa
from engine.runtime.vmfb.decoder import Instruction, iter_instructions

RegisterKey = tuple[str, int]  # ("i", primitive index) or ("r", ref index)

CALL_SYMBOLS = ("Call", "CallVariadic", "CallYieldable", "CallVariadicYieldable")


def ref_key(register: int) -> RegisterKey:
    """The key of a ref register operand."""
    return ("r", register & isa.REF_INDEX_MASK)


def register_key(register: int) -> RegisterKey:
    """The key of a register in a list or remap operand (the bank bit says which bank)."""
    if register & isa.REF_BANK_BIT:
        return ("r", register & isa.REF_INDEX_MASK)
    return ("i", register & isa.PRIMITIVE_INDEX_MASK)


def call_arguments(ins: Instruction) -> tuple[int | None, tuple[int, ...], tuple[int, ...]]:
    """``(import ordinal or None, argument registers, result registers)`` of a call instruction."""
    args = ins.operands[2] if ins.opcode.symbol.startswith("CallVariadic") else ins.operands[1]
    results = ins.operands[-1]
    return ins.called_import, tuple(args), tuple(results)


class RegisterValues:
    """Facts about registers, keyed by :func:`ref_key` / :func:`register_key` / ``("i", index)``."""

    def __init__(self) -> None:
        self._held: dict[RegisterKey, Any] = {}
        self._results: dict[RegisterKey, Any] = {}

    def get(self, key: RegisterKey) -> Any:
        return self._held.get(key)

    def record_result(self, key: RegisterKey, value: Any) -> None:
        """Record a fact about a register the current instruction writes (kept past its write)."""
        self._results[key] = value

    def learn_constant(self, ins: Instruction) -> None:
        """Record what a constant instruction loads (rodata ref, i32/i64 immediate or zero)."""
        sym = ins.opcode.symbol
        if sym == "ConstRefRodata":
            ordinal, register = ins.operands
            self._held[ref_key(register)] = ("rodata", ordinal)
        elif sym in ("ConstI64", "ConstI32"):
            self._held[("i", ins.operands[1] & isa.PRIMITIVE_INDEX_MASK)] = ("const", ins.operands[0])
        elif sym in ("ConstI64Zero", "ConstI32Zero"):
            self._held[("i", ins.operands[0] & isa.PRIMITIVE_INDEX_MASK)] = ("const", 0)
        elif sym == "ConstRefZero":  # a null ref: known to be null, not unknown
            self._held[ref_key(ins.operands[0])] = ("null",)

    def after(self, ins: Instruction) -> None:
        """Move past ``ins``: forget what it overwrote, then keep its recorded results and constants."""
        self.forget_writes(ins)
        self._held.update(self._results)
        self._results.clear()
        self.learn_constant(ins)

    def forget_writes(self, ins: Instruction) -> None:
        """Drop what is known of the registers ``ins`` writes; carry values along branch remaps."""
        held = self._held
        for spec, value in zip(ins.opcode.operands, ins.operands):
            if spec.kind == isa.REMAP:
                moved = [(register_key(d), held.get(register_key(s))) for s, d in value]
                for key, val in moved:
                    if val is None:
                        held.pop(key, None)
                    else:
                        held[key] = val
            elif spec.access != "write":
                continue
            elif spec.kind == isa.REG_REF:
                held.pop(ref_key(value), None)
            elif spec.kind in isa.REGISTER_KINDS:
                base = value & isa.PRIMITIVE_INDEX_MASK
                held.pop(("i", base), None)
                if spec.kind in (isa.REG_I64, isa.REG_F64):
                    held.pop(("i", base + 1), None)
            elif spec.kind == isa.REG_LIST:
                for r in value:
                    held.pop(register_key(r), None)


def walk_with_constants(instructions: Iterable[Instruction]) -> Iterator[tuple[Instruction, RegisterValues]]:
    """Yield each instruction with the register facts that hold before it runs.

    While handling an instruction the caller may :meth:`~RegisterValues.record_result` facts about the
    registers it writes; constants are learned and overwritten registers forgotten after the caller
    has seen the instruction.
    """
    values = RegisterValues()
    for ins in instructions:
        yield ins, values
        values.after(ins)


def import_calls(module: Any, callees: Collection[int]) -> Iterator[tuple[Any, Instruction, RegisterValues, int, tuple, tuple]]:
    """``(function, instruction, register facts, import ordinal, argument registers, result registers)`` of
    each call to one of the imports ``callees`` in ``module``'s functions; a function whose bytecode does not
    decode is skipped (the analyses say nothing of it). The caller may record facts about the call's results
    (``RegisterValues.record_result``) for the calls after it."""
    for function in module.functions:
        try:
            instructions = list(iter_instructions(function.code))
        except VmfbFormatError:
            continue
        for ins, held in walk_with_constants(instructions):
            if ins.opcode.symbol not in CALL_SYMBOLS:
                continue
            callee, args, results = call_arguments(ins)
            if callee is not None and callee in callees:
                yield function, ins, held, callee, args, results
