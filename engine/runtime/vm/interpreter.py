"""The stepping interpreter: explicit frames, a call stack, ``step()`` and a fast ``run()`` loop.

State is plain data a view can read at any moment: ``Interpreter.frames`` (bottom first), each a
``Frame`` with its module instance, function ordinal, ``pc``, the i32 bank ``i`` (unsigned 32-bit words;
f32 as raw bits; i64/f64 as (lo, hi) pairs addressed by the low register) and the ref bank ``r``.

``step()`` executes exactly one instruction and returns a ``StepRecord``. ``run(max_steps)`` executes up
to ``max_steps`` instructions through pre-compiled closures without building records; it stops early
at a breakpoint stub (see ``ModuleInstance.set_breakpoint``), at the end of the invocation, or on a trap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.errors import FrameLocation, StatusCode, VmStatusError, VmTrap  # noqa: F401 - importable here too
from engine.runtime import isa
from engine.runtime.vm import numeric as N
from engine.runtime.vm.handlers import DONE, RELOAD
from engine.runtime.vm.trace import format_instruction, read_values

if TYPE_CHECKING:
    from engine.runtime.vm.context import ImportBinding, ModuleInstance
    from engine.runtime.vmfb.decoder import Instruction

M32 = 0xFFFFFFFF
_NO_BLOCKS: list = []  # a frame without fused code


class Frame:
    """One activation: which function, where it is, and its two register banks."""

    __slots__ = ("instance", "ordinal", "pc", "i", "r", "code", "fused", "ret_regs", "ret_kinds")

    def __init__(
        self,
        instance: ModuleInstance,
        ordinal: int,
        code: list,
        i_count: int,
        r_count: int,
        fused: Any = None,
    ):
        self.instance = instance
        # The function's fused code (engine.runtime.vm.fusion.FusedCode), or None.
        self.fused = fused
        self.ordinal = ordinal
        self.pc = 0
        self.i: list[int] = [0] * i_count
        self.r: list[Any] = [None] * r_count
        self.code = code
        self.ret_regs: tuple = ()  # the caller's registers receiving the results
        self.ret_kinds: tuple = ()  # cconv kinds of the results ('i', 'I', 'f', 'F', 'r')

    @property
    def function_name(self) -> str:
        return self.instance.function_name(self.ordinal)

    @property
    def location(self) -> FrameLocation:
        return FrameLocation(self.instance.name, self.function_name, self.ordinal, self.pc)

    def i32(self, reg: int) -> int:
        """Signed value of i32 register ``reg``."""
        return N.s32(self.i[reg])

    def i64(self, reg: int) -> int:
        """Signed value of the i64 pair starting at ``reg``."""
        return N.s64(self.i[reg] | (self.i[reg + 1] << 32))

    def f32(self, reg: int) -> float:
        return N.f32_of(self.i[reg])

    def f64(self, reg: int) -> float:
        return N.f64_of(self.i[reg] | (self.i[reg + 1] << 32))

    def __repr__(self) -> str:
        return f"<Frame @{self.instance.name}.{self.function_name} pc={self.pc:#06x}>"


@dataclass(frozen=True)
class ImportCall:
    """An import call as the VM marshaled it: ``args`` in the native module's Python convention."""

    name: str
    cconv: str
    args: tuple
    results: tuple = ()


@dataclass(frozen=True)
class StepRecord:
    """What one ``step()`` did."""

    location: FrameLocation  # where the instruction was
    instruction: Instruction
    written: tuple[tuple[str, Any], ...]  # ("%i3", word) / ("%r1", object), in the frame that got them
    import_call: ImportCall | None = None
    event: str | None = None  # "call", "return", "done" (the invocation finished) or None
    depth: int = 0  # call-stack depth before the instruction
    read: tuple[tuple[str, str], ...] = ()  # read register operands and their values (display text)

    @property
    def pc(self) -> int:
        return self.location.pc

    @property
    def function(self) -> str:
        return self.location.function


@dataclass
class RunOutcome:
    """Why ``run()`` returned: ``done`` (the invocation returned), ``break`` (a breakpoint stub at the
    top frame's pc), ``limit`` (max_steps executed)."""

    reason: str
    steps: int
    results: list | None = field(default=None)


def _kind_of(raw: int, kinds: tuple, k: int) -> str:
    if k < len(kinds):
        return kinds[k]
    return "r" if raw & isa.REF_BANK_BIT else "i"


def value_of(kind: str, i: list, raw: int) -> Any:
    """A register value as the Python value native modules see (signed ints, floats)."""
    reg = raw & 0x7FFF
    if kind == "i":
        return N.s32(i[reg])
    if kind == "I":
        return N.s64(i[reg] | (i[reg + 1] << 32))
    if kind == "f":
        return N.f32_of(i[reg])
    if kind == "F":
        return N.f64_of(i[reg] | (i[reg + 1] << 32))
    raise ValueError(kind)


def store_value(kind: str, i: list, reg: int, v: Any) -> None:
    """Write a Python value into register ``reg`` (wrapped/rounded to the kind's width)."""
    if kind == "i":
        i[reg] = int(v) & M32
    elif kind == "I":
        w = int(v) & N.M64
        i[reg] = w & M32
        i[reg + 1] = w >> 32
    elif kind == "f":
        i[reg] = N.f32_bits(float(v))
    elif kind == "F":
        w = N.f64_bits(float(v))
        i[reg] = w & M32
        i[reg + 1] = w >> 32
    else:
        raise ValueError(kind)


@dataclass(frozen=True)
class FrameState:
    """One frame as a checkpoint keeps it (``Interpreter.checkpoint``)."""

    frame: Frame
    pc: int
    i: tuple[int, ...]
    r: tuple[Any, ...]
    ret_regs: tuple
    ret_kinds: tuple


@dataclass(frozen=True)
class InterpreterState:
    """The call stack and the call's outcome as a checkpoint keeps them (``Interpreter.checkpoint``)."""

    frames: tuple[FrameState, ...]
    base: int
    results: list | None
    trap: Any
    last_import: Any
    entry_kinds: tuple


class Interpreter:
    """A VM thread: the call stack of one invocation (and of nested ones, e.g. a VMVX dispatch)."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.base = 0  # frames below this index belong to an outer invocation
        self.results: list | None = None
        self.last_import: ImportCall | None = None
        self.trap: VmTrap | None = None
        self.steps_executed = 0
        self.native_depth = 0  # > 0 while a native (Python) import function runs
        # Called with each StepRecord when set; run() then takes the (slow) stepping path.
        self.trace_hook = None
        # Timing zones (engine.trace.recorder.ZoneRecorder) when set: told of calls, returns and imports.
        self.zone_hook = None
        self.entry_kinds: tuple = ()  # the result kinds of the call that began (its calling convention)

    # -- checkpoints (time travel) -----------------------------------------------------------------------

    def checkpoint(self) -> InterpreterState:
        """The call stack as it is now (between instructions: no native call running)."""
        if self.native_depth:
            raise RuntimeError("a checkpoint needs the VM between instructions (a native call is running)")
        frames = tuple(
            FrameState(f, f.pc, tuple(f.i), tuple(f.r), f.ret_regs, f.ret_kinds) for f in self.frames
        )
        return InterpreterState(
            frames, self.base, self.results, self.trap, self.last_import, self.entry_kinds
        )

    def restore_checkpoint(self, state: InterpreterState) -> None:
        """Put the call stack back in place: the same frame objects, with the registers they had."""
        for s in state.frames:
            f = s.frame
            f.pc = s.pc
            f.i[:] = s.i
            f.r[:] = s.r
            f.ret_regs, f.ret_kinds = s.ret_regs, s.ret_kinds
        self.frames[:] = [s.frame for s in state.frames]
        self.base, self.results, self.trap = state.base, state.results, state.trap
        self.last_import, self.entry_kinds = state.last_import, state.entry_kinds
        self.native_depth = 0

    # -- invocation set-up ------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return len(self.frames) <= self.base

    @property
    def top(self) -> Frame | None:
        return self.frames[-1] if len(self.frames) > self.base else None

    def begin_call(self, instance: ModuleInstance, ordinal: int, args: list, *, nested: bool = False) -> None:
        """Push the entry frame of ``instance``'s function ``ordinal`` with Python ``args`` per its cconv.

        A new (not nested) call first drops what is left of an earlier invocation (e.g. a trapped one).
        """
        if not nested:
            self.frames.clear()
            self.base = 0
        cconv = instance.cconv(ordinal)
        frame = instance.new_frame(ordinal)
        ri = ii = 0
        if len(args) != len(cconv.arguments):
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"{instance.function_name(ordinal)} takes {len(cconv.arguments)} arguments ({cconv.text}), "
                f"got {len(args)}",
            )
        for kind, v in zip(cconv.arguments, args):
            if kind == "r":
                frame.r[ri] = v
                ri += 1
            elif kind in "IF":
                ii += ii & 1
                store_value(kind, frame.i, ii, v)
                ii += 2
            elif kind in "if":
                store_value(kind, frame.i, ii, v)
                ii += 1
            else:
                raise VmStatusError(
                    StatusCode.INVALID_ARGUMENT, f"cannot call a variadic function ({cconv.text})"
                )
        frame.ret_kinds = cconv.results
        self.trap = None
        self.results = None
        self.entry_kinds = cconv.results
        self.frames.append(frame)
        if self.zone_hook is not None:
            self.zone_hook.call(instance, ordinal)

    def reset(self) -> None:
        """Drop what is left of an earlier invocation (a trapped or abandoned one): no frames, no trap."""
        self.frames.clear()
        self.base = 0
        self.trap = None
        self.results = None

    def invoke_nested(self, instance: ModuleInstance, ordinal: int, args: list) -> list:
        """Run a function to completion on top of the current stack (e.g. from inside an import call)."""
        saved = (self.base, self.results, self.entry_kinds)
        self.base = len(self.frames)
        try:
            self.begin_call(instance, ordinal, args, nested=True)
            self.run_to_completion()
            return self.results or []
        finally:
            del self.frames[self.base :]
            self.base, self.results, self.entry_kinds = saved

    def run_to_completion(self, chunk: int = 1 << 20) -> list:
        while True:
            outcome = self.run(chunk, ignore_breakpoints=True)
            if outcome.reason == "done":
                return outcome.results or []

    # -- calls and returns (used by the closures) ----------------------------------------------------------

    def call_bytecode(
        self, i: list, r: list, instance: ModuleInstance, ordinal: int, args, results, resume
    ) -> int:
        callee = instance.new_frame(ordinal)
        kinds = instance.cconv(ordinal).arguments
        self._marshal_into(i, r, callee, kinds, args)
        callee.ret_regs = results
        callee.ret_kinds = instance.cconv(ordinal).results
        self.frames[-1].pc = resume
        self.frames.append(callee)
        if self.zone_hook is not None:
            self.zone_hook.call(instance, ordinal)
        return RELOAD

    @staticmethod
    def _marshal_into(i: list, r: list, callee: Frame, kinds: tuple, args) -> None:
        # 3.13 marshals at full width by the callee's cconv: refs r0.., primitives i0.. (I/F even-aligned).
        ci, cr = callee.i, callee.r
        ri = ii = 0
        for k, raw in enumerate(args):
            kind = _kind_of(raw, kinds, k)
            if kind == "r":
                idx = raw & isa.REF_INDEX_MASK
                cr[ri] = r[idx]
                if raw & isa.REF_MOVE_BIT:
                    r[idx] = None
                ri += 1
            elif kind in "IF":
                ii += ii & 1
                src = raw & 0x7FFF
                ci[ii] = i[src]
                ci[ii + 1] = i[src + 1]
                ii += 2
            else:
                ci[ii] = i[raw & 0x7FFF]
                ii += 1

    def do_return(self, i: list, r: list, regs) -> int:
        frame = self.frames.pop()
        if self.zone_hook is not None:
            self.zone_hook.ret()
        kinds = frame.ret_kinds
        values = []
        for k, raw in enumerate(regs):
            kind = _kind_of(raw, kinds, k)
            if kind == "r":
                idx = raw & isa.REF_INDEX_MASK
                values.append(r[idx])
                if raw & isa.REF_MOVE_BIT:
                    r[idx] = None
            elif kind in "IF":
                idx = raw & 0x7FFF
                values.append((i[idx], i[idx + 1]))
            else:
                values.append(i[raw & 0x7FFF])
        if len(self.frames) <= self.base:
            self.results = [
                self._to_python(_kind_of(raw, kinds, k), v) for k, (raw, v) in enumerate(zip(regs, values))
            ]
            return DONE
        caller = self.frames[-1]
        ci, cr = caller.i, caller.r
        for k, (raw, v) in enumerate(zip(frame.ret_regs, values)):
            kind = _kind_of(regs[k] if k < len(regs) else raw, kinds, k)
            if kind == "r":
                cr[raw & isa.REF_INDEX_MASK] = v
            elif kind in "IF":
                dst = raw & 0x7FFF
                ci[dst], ci[dst + 1] = v
            else:
                ci[raw & 0x7FFF] = v
        return RELOAD

    @staticmethod
    def _to_python(kind: str, v: Any) -> Any:
        if kind == "r":
            return v
        if kind == "i":
            return N.s32(v)
        if kind == "f":
            return N.f32_of(v)
        lo, hi = v
        w = lo | (hi << 32)
        return N.f64_of(w) if kind == "F" else N.s64(w)

    def call_import(
        self, i: list, r: list, binding: ImportBinding, segments, args, results, resume: int
    ) -> int:
        if not binding.resolved:
            raise VmStatusError(StatusCode.NOT_FOUND, f"optional import `{binding.name}` not resolved")
        if binding.target_instance is not None:
            return self.call_bytecode(
                i, r, binding.target_instance, binding.target_ordinal, args, results, resume
            )
        values, moved = self._marshal_native(i, r, binding, segments, args)
        # While a native function runs, the caller's pc says where it resumes (a debugger paused inside
        # the call, e.g. at a dispatch, stops there next).
        self.frames[-1].pc = resume
        self.last_import = ImportCall(binding.name, binding.cconv, tuple(values))
        self.native_depth += 1
        zones = self.zone_hook
        if zones is not None:
            zones.import_begin(binding.name)
        try:
            out = binding.native.fn(*values)
        except VmStatusError as e:
            raise VmStatusError(e.code, f"{e.message}; while calling import '{binding.name}'") from e
        except RecursionError:
            raise
        except Exception as e:  # a bug or unsupported feature in a Python module must not kill the session
            raise VmStatusError(
                StatusCode.INTERNAL, f"{type(e).__name__}: {e}; while calling import '{binding.name}'"
            ) from e
        finally:
            if zones is not None:
                zones.import_end(binding.name)
            self.native_depth -= 1
            for idx in moved:
                r[idx] = None
        kinds = binding.result_kinds
        if not kinds:
            outs: tuple = ()
        elif len(kinds) == 1:
            outs = (out,)
        else:
            outs = tuple(out) if out is not None else ()
        if len(outs) != len(kinds):
            raise VmStatusError(
                StatusCode.INTERNAL,
                f"import '{binding.name}' returned {len(outs)} results, its cconv {binding.cconv} says {len(kinds)}",
            )
        for raw, kind, v in zip(results, kinds, outs):
            if kind == "r":
                r[raw & isa.REF_INDEX_MASK] = v
            else:
                store_value(kind, i, raw & 0x7FFF, v)
        self.last_import = ImportCall(binding.name, binding.cconv, tuple(values), outs)
        return resume

    @staticmethod
    def _marshal_native(i: list, r: list, binding: ImportBinding, segments, args) -> tuple[list, list]:
        values: list = []
        moved: list = []
        pos = 0

        def take(kind: str):
            nonlocal pos
            raw = args[pos]
            pos += 1
            if kind == "r":
                idx = raw & isa.REF_INDEX_MASK
                if raw & isa.REF_MOVE_BIT:
                    moved.append(idx)
                return r[idx]
            return value_of(kind, i, raw)

        try:
            for k, item in enumerate(binding.arg_kinds):
                if item[0] == "C":
                    fields = item[1:-1]
                    count = segments[k] if k < len(segments) else 0
                    if len(fields) == 1:
                        values.append([take(fields) for _ in range(count)])
                    else:
                        values.append([tuple(take(c) for c in fields) for _ in range(count)])
                else:
                    values.append(take(item))
        except IndexError:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"call to '{binding.name}' ({binding.cconv}) has too few operands ({len(args)})",
            ) from None
        return values, moved

    # -- execution -----------------------------------------------------------------------------------------

    def _trap_from(self, e: BaseException, frame: Frame, pc: int) -> VmTrap:
        frame.pc = pc
        stack = tuple(f.location for f in self.frames)
        try:
            ins = frame.instance.instruction_at(frame.ordinal, pc)
            text = format_instruction(ins)
        except Exception:
            ins, text = None, f"<pc {pc:#06x}>"
        if isinstance(e, VmStatusError):
            code, message = e.code, e.message
        elif isinstance(e, ZeroDivisionError):
            code, message = (
                StatusCode.INTERNAL,
                "integer division by zero (undefined behaviour in IREE's runtime)",
            )
        else:
            code, message = StatusCode.INTERNAL, f"{type(e).__name__}: {e}"
        trap = VmTrap(code, message, stack, ins, text)
        trap.__cause__ = e
        self.trap = trap
        return trap

    def run(self, max_steps: int, *, ignore_breakpoints: bool = False) -> RunOutcome:
        """Execute up to ``max_steps`` instructions. Raises ``VmTrap`` (the stack stays inspectable).

        A breakpoint stub at the current pc when ``run`` starts is stepped over (the caller decided to
        resume from it); one reached later stops the run with reason ``break`` before its instruction.
        """
        if self.trace_hook is not None:
            return self._run_stepping(max_steps, ignore_breakpoints)
        frames = self.frames
        if len(frames) <= self.base:
            return RunOutcome("done", 0, self.results)
        f = frames[-1]
        code, fused, i, r, pc = f.code, f.fused, f.i, f.r, f.pc
        starts = fused.starts if fused is not None else _NO_BLOCKS
        steps = 0
        first = f.instance.plain_code(f.ordinal)[pc]
        in_region = False
        try:
            if code[pc] is first and max_steps > 0:
                npc = pc  # no breakpoint here: straight into the loop (and a fused block starting here)
            else:
                npc = first(i, r, self)  # resume over a breakpoint sitting at the current pc
                steps = 1
            while True:
                if npc < 0:
                    if npc == RELOAD:
                        f = frames[-1]
                        code, fused, i, r, pc = f.code, f.fused, f.i, f.r, f.pc
                        starts = fused.starts if fused is not None else _NO_BLOCKS
                    elif npc == DONE:
                        self.steps_executed += steps
                        return RunOutcome("done", steps, self.results)
                    else:  # BREAK: the stub did not execute its instruction
                        steps -= 1
                        if ignore_breakpoints:
                            npc = f.instance.plain_code(f.ordinal)[pc](i, r, self)
                            steps += 1
                            continue
                        f.pc = pc
                        self.steps_executed += steps
                        return RunOutcome("break", steps)
                else:
                    pc = npc
                if pc < len(starts) and starts[pc] is not None:
                    # Straight-line code and the loops between its blocks in one call (engine.runtime.vm.fusion).
                    in_region = True
                    pc, n = fused.region(i, r, self, pc, max_steps - steps)
                    in_region = False
                    steps += n
                if steps >= max_steps:
                    f.pc = pc
                    self.steps_executed += steps
                    return RunOutcome("limit", steps)
                npc = code[pc](i, r, self)
                steps += 1
        except Exception as e:
            if in_region:
                # The trap belongs to the region's instruction that raised (found by its source line).
                where = fused.fault(e.__traceback__)
                if where is not None:
                    pc, done = where
                    steps += done
            self.steps_executed += steps
            raise self._trap_from(e, f, pc) from e

    def _run_stepping(self, max_steps: int, ignore_breakpoints: bool) -> RunOutcome:
        steps = 0
        while steps < max_steps:
            if len(self.frames) <= self.base:
                return RunOutcome("done", steps, self.results)
            if steps and not ignore_breakpoints:
                f = self.frames[-1]
                if f.code[f.pc] is not f.instance.plain_code(f.ordinal)[f.pc]:
                    return RunOutcome("break", steps)
            rec = self.step()
            steps += 1
            if rec.event == "done":
                return RunOutcome("done", steps, self.results)
        return RunOutcome("limit", steps)

    def step(self) -> StepRecord:
        """Execute exactly one instruction of the top frame (ignoring breakpoints) and describe it."""
        if len(self.frames) <= self.base:
            raise VmStatusError(StatusCode.FAILED_PRECONDITION, "no invocation in progress")
        f = self.frames[-1]
        pc = f.pc
        depth = len(self.frames)
        inst = f.instance
        ins = inst.instruction_at(f.ordinal, pc)
        loc = f.location
        read = read_values(ins, f.i, f.r)
        before_i, before_r = list(f.i), list(f.r)
        caller = self.frames[-2] if depth - 1 > self.base else None
        caller_i = list(caller.i) if caller is not None else None
        caller_r = list(caller.r) if caller is not None else None
        self.last_import = None
        try:
            npc = inst.plain_code(f.ordinal)[pc](f.i, f.r, self)
        except Exception as e:
            raise self._trap_from(e, f, pc) from e
        self.steps_executed += 1
        event = None
        if npc >= 0:
            f.pc = npc
            written = _written(ins, f.i, f.r, _diff(before_i, before_r, f.i, f.r))
        elif npc == RELOAD and len(self.frames) > depth:
            event = "call"
            written = ()
        elif npc == RELOAD:
            event = "return"
            written = _diff(caller_i, caller_r, caller.i, caller.r) if caller is not None else ()
        elif npc == DONE:
            event = "done"
            written = ()
        else:
            written = ()
        rec = StepRecord(loc, ins, written, self.last_import, event, depth - self.base, read)
        if self.trace_hook is not None:
            self.trace_hook(rec)
        return rec

    def call_stack(self) -> tuple[FrameLocation, ...]:
        return tuple(f.location for f in self.frames)


_TYPED = {isa.REG_I32: "i", isa.REG_I64: "I", isa.REG_F32: "f", isa.REG_F64: "F"}


def _written(ins: Instruction, i: list, r: list, diff: tuple) -> tuple:
    """The instruction's result registers (typed values), then any other register that changed."""
    out = []
    covered = set()
    for spec, raw in zip(ins.opcode.operands, ins.operands):
        if spec.access != "write" or spec.kind not in isa.REGISTER_KINDS:
            continue
        if spec.kind == isa.REG_REF:
            idx = raw & isa.REF_INDEX_MASK
            out.append((f"%r{idx}", r[idx]))
            covered.add(f"%r{idx}")
            continue
        idx = raw & 0x7FFF
        kind = _TYPED[spec.kind]
        if kind in "IF":
            out.append((f"%i{idx}:{idx + 1}", value_of(kind, i, idx)))
            covered.update((f"%i{idx}", f"%i{idx + 1}"))
        else:
            out.append((f"%i{idx}", value_of(kind, i, idx)))
            covered.add(f"%i{idx}")
    out.extend(d for d in diff if d[0] not in covered)
    return tuple(out)


def _diff(bi: list, br: list, ai: list, ar: list) -> tuple:
    out = []
    for k, (x, y) in enumerate(zip(bi, ai)):
        if x != y:
            out.append((f"%i{k}", N.s32(y)))
    for k, (x, y) in enumerate(zip(br, ar)):
        if x is not y:
            out.append((f"%r{k}", y))
    return tuple(out)
