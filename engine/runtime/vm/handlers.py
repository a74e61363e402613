"""The registry that binds VM handlers to the opcode table (``engine.runtime.isa``) by IREE symbol.

A handler is a *factory*: given one decoded instruction and the compile environment (the module
instance and the function it belongs to), it returns an ``Exec`` closure with the instruction's
registers and constants baked in. The interpreter decodes a function once, turns every instruction
into its closure, and then runs closures:

    next_pc = exec(i, r, thread)

``i`` is the frame's i32 bank (a list of unsigned 32-bit words; f32 as raw bits, i64/f64 as pairs, low
word first), ``r`` the ref bank (a list of objects, ``None`` = null), ``thread`` the interpreter. A
closure returns the pc of the next instruction, or a negative sentinel when it changed the call
stack (``RELOAD``) or finished the invocation (``DONE``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.runtime import isa
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import ref_type_name, type_matches

if TYPE_CHECKING:
    from engine.runtime.vmfb.decoder import Instruction

Exec = Callable[[list, list, Any], int]

# Sentinels returned by closures instead of a pc.
RELOAD = -1  # the call stack changed: continue in the top frame at its saved pc
DONE = -2  # the invocation's entry frame returned
BREAK = -3  # a breakpoint stub was hit (the original instruction has not run)


@dataclass(frozen=True)
class CompileEnv:
    """What a handler factory may use besides the instruction: where the instruction lives."""

    instance: Any  # engine.runtime.vm.context.ModuleInstance
    function: int  # function ordinal
    pc: int
    next_pc: int


HandlerFactory = Callable[["Instruction", CompileEnv], Exec]

HANDLERS: dict[str, HandlerFactory] = {}


def handler(*symbols: str) -> Callable[[HandlerFactory], HandlerFactory]:
    """Register a factory as the handler of the given opcode symbols (which must be in the table)."""

    def register(factory: HandlerFactory) -> HandlerFactory:
        for symbol in symbols:
            if symbol not in isa.BY_SYMBOL:
                raise KeyError(f"{symbol} is not an opcode of the ISA table")
            if symbol in HANDLERS:
                raise KeyError(f"{symbol} has two handlers")
            HANDLERS[symbol] = factory
        return factory

    return register


def reg(raw: int) -> int:
    """Index of a primitive register."""
    return raw & isa.PRIMITIVE_INDEX_MASK


def ref(raw: int) -> tuple[int, bool]:
    """Index and MOVE bit of a ref register."""
    return raw & isa.REF_INDEX_MASK, bool(raw & isa.REF_MOVE_BIT)


M32 = 0xFFFFFFFF


def read_i64(i: list, k: int) -> int:
    """The i64 held in primitive registers ``k`` (low word) and ``k + 1`` (high word), unsigned."""
    return i[k] | (i[k + 1] << 32)


def write_i64(i: list, k: int, v: int) -> None:
    """Store ``v`` as an i64 in primitive registers ``k`` and ``k + 1``."""
    i[k] = v & M32
    i[k + 1] = (v >> 32) & M32


def check_ref_type(value: object, type_name: str) -> None:
    """IREE's check that a ref (or null) is of ``type_name`` before it is stored or moved."""
    if value is not None and not type_matches(value, type_name):
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"source ref type mismatch: {ref_type_name(value)} is not {type_name}",
        )
