"""``iree-lens debug``: a headless debugger over the session protocol, in the manner of ``gdb -batch -x``.

The commands file (``engine.session.script``) drives the window's session client
(``engine.session.client.SessionClient``) over an in-process session: the debug engine (``DebugSession``:
our VM and emulated HAL, every breakpoint kind; ``TimeTravelSession`` when the script steps back) or the
reference engine (``ReferenceSession``: IREE's runtime, dispatch breakpoints at a traced module's trace
points).

The program starts with the first run command (``continue`` runs to the first stop; ``step``/``next``
start from the function's entry, which prints nothing). With ``--json`` each stop prints exactly one line

    {"reason": ..., "function": ..., "pc": ..., "depth": ..., "dispatch": null | {"ordinal": N,
     "name": ..., "when": "before"|"after"}, "registers": {"i32": [...], "ref": [...]}}

and the end of the program ``{"reason": "finished", ..., "results": TEXT, "outputs": [...]}``.

Errors, as ``gdb -batch -x FILE`` has them (``SCRIPT_RULE``): a command that cannot do what it says stops
the commands file there, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.cli.program_arguments import (
    add_device_argument,
    add_no_rebuild_argument,
    add_program_arguments,
    is_replay,
    missing_function,
    module_device,
    no_inputs_problem,
)
from engine.dispatch.tensor_types import declared_array, stored_as_bits
from engine.dispatch.typed_tensors import binding_label
from engine.errors import LensError
from engine.runtime.element_types import parse_element_type
from engine.runtime.function_io import Tensor, format_tensor
from engine.session.change_text import holds_bytes, last_write_text, origin_text
from engine.session.client import SessionClient, TransportFactory, in_process
from engine.session.dispatch_gate import is_dispatch_breakpoint
from engine.session.protocol import (
    BREAKPOINT_REFUSED,
    INITIALIZER,
    Answer,
    Breakpoint,
    Crashed,
    DispatchWhen,
    Event,
    Failed,
    Finished,
    GlobalBuffer,
    Globals,
    GlobalVariable,
    LastChange,
    Log,
    Opened,
    ReadDispatch,
    ReadGlobalBuffer,
    ReadGlobals,
    ReadRegisters,
    RegisterFile,
    Registers,
    StepMode,
    Stopped,
    Tensors,
    TypeSource,
    Watch,
    WatchBinding,
    WatchGlobal,
    WatchGlobalContents,
    WatchGlobalRef,
    WatchRegister,
    WatchRegisterContents,
)
from engine.session.script import ScriptCommand, ScriptError, check_for_reference, parse_script
from engine.session.stream import add_remote_argument

_STEP_MODES = {"step": StepMode.INTO, "next": StepMode.OVER, "finish": StepMode.OUT}
PRINT_BYTES = 64  # the first bytes print shows of a buffer whose type is not known

# How a commands file ends, for every verb and both engines (and a replay's debugger): gdb -batch -x's rule
# ("An error in any command terminates execution of the command file", exit status 1), which is also what a
# CI job wants: a script that expected a stop it did not get fails, where it failed.
SCRIPT_RULE = (
    "Exit status, as gdb -batch -x FILE: 0 when every command did what it says. 1 when one could not: the "
    "error is said on stderr as FILE:LINE: and the commands file stops there (later lines are not run). "
    "The program failing (a trap, a HAL error: said on stderr; --json prints its {\"reason\": \"failed\"} "
    "record) makes the status 1 too, yet the commands after it run, as gdb goes on after a fatal signal: "
    "info registers (the failing frame's) and reverse commands look back from where it failed. Errors: "
    "continue, step, next or finish after the program ended or failed; info registers when the "
    "program is not stopped; save-tensors with neither a stop at a dispatch nor the ended program's outputs; "
    "a reverse command before the program ran, or one that cannot move (reverse-finish in the outermost "
    "frame). 2: a commands file that cannot be read or parsed (nothing runs). Notes on stderr leave the "
    "status alone: a breakpoint that cannot be set (a dispatch name, function or pc the module does not "
    "have: '(not set)' at its line, as gdb answers no to a pending breakpoint), dispatch breakpoints the "
    "program never reached; a reverse command that reaches the start "
    "of the history stops there (reason history-start)."
)
_PRIMITIVE_BYTES = {"i32": 4, "f32": 4, "i64": 8, "f64": 8}
_REVERSE_VERBS = ("reverse-step", "reverse-next", "reverse-finish", "reverse-continue")
_HISTORY_VERBS = (*_REVERSE_VERBS, "when-changed", "where-from")  # commands that need the run's recorded history


def _tensor_named(answer: Tensors, kind: str, number: int):
    """The paused dispatch's ``input``/``output`` ``number`` (typed) or ``binding`` ``number`` (its bytes), or
    why there is none."""
    if kind == "binding":
        found = [t for t in answer.tensors if t.index == number]
    else:
        found = [t for t in answer.tensors if t.type_source != TypeSource.UNTYPED and t.role == kind and t.position == number]
    if found:
        return found[0]
    known = ", ".join(f"{t.role} {t.position}" if t.type_source != TypeSource.UNTYPED else f"binding {t.index}"
                      for t in answer.tensors)  # fmt: skip
    return f"the dispatch has no {kind} {number} ({known or 'no tensors'})"


def globals_lines(answer: Globals) -> list[str]:
    """``info globals`` as text: each global by name, else by ordinal with why."""
    if answer.variables:
        lines = []
        for v in answer.variables:
            where = f".refs[{v.index}]" if v.kind == "ref" else f"{v.kind} .rwdata[{v.index}]"
            size = ""
            if v.byte_length is not None:  # a buffer: its size, and its tensor where the program declares it
                size = f", {v.byte_length} bytes" + (f", {v.tensor_type}" if v.tensor_type else "")
            lines.append(f"@{v.name} = {v.value}{size}  ({where})")
        return lines
    data = bytes(answer.rwdata)
    lines = [f"({answer.names_note})"] if answer.names_note else []
    lines += [f".rwdata[{k}] = {int.from_bytes(data[k : k + 4], 'little', signed=True)}" for k in range(0, len(data) - 3, 4)]
    return lines + [f".refs[{k}] = {r}" for k, r in enumerate(answer.refs)]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "debug",
        help="run a debugger commands file on a function of a .vmfb (like gdb -batch -x)",
        epilog=textwrap.fill(SCRIPT_RULE, 100),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_program_arguments(p, "the .vmfb to debug (or an .ireereplay: its HAL calls and dispatches)")
    add_device_argument(p)
    p.add_argument(
        "--engine",
        choices=("debug", "reference"),
        default="debug",
        help="debug: IREE Lens's VM and emulated HAL (every breakpoint); reference: IREE's runtime, "
        "dispatch breakpoints at the trace points of a module compiled with --iree-flow-trace-dispatch-tensors",
    )
    p.add_argument(
        "--commands",
        required=True,
        metavar="FILE",
        help="one debugger command a line: break dispatch ORDINAL|NAME|* [before|after]; break nan; "
        "break diverge BUNDLE_DIR|MODULE.vmfb [ATOL] [RTOL] (after the first dispatch whose outputs differ "
        "from a reference run beyond the tolerance: a capture bundle of iree-lens capture, or a module run "
        "on the debug engine with the same function and inputs; debug engine only); break function NAME; "
        "break pc FUNCTION:PC; continue; step [N]; next [N]; finish; reverse-step [N]; reverse-next [N]; "
        "reverse-finish; reverse-continue; info registers; info globals (the module's globals now, by the "
        "names of the VM phase snapshot beside the module; debug engine only); print @GLOBAL (its value; a "
        "buffer's tensor as IREE prints it); when-changed @GLOBAL (its last write in the recorded history and "
        "what wrote it; a buffer global: the bytes it holds, followed back through copies to the dispatch that "
        "made them; when-changed i3 or r1: a register of the innermost frame, a buffer's bytes); where-from "
        "input|output N [I J ...] or where-from binding B [BYTE] (at a dispatch stop: the "
        "dispatch or copy that last wrote that element before the dispatch ran); save-tensors DIR",
    )
    p.add_argument(
        "--sources",
        action="append",
        default=[],
        help="executable sources that type a stopped dispatch's tensors (a --iree-hal-dump-executable-sources-to "
        "folder, IREE Lens's compile folder, .mlir files); default: a sources folder beside the module, else a "
        "rebuild of the program the module names, used when it gives the module's own executables (see "
        "--no-rebuild); without sources save-tensors writes each binding's bytes",
    )
    add_no_rebuild_argument(p)
    p.add_argument("--json", action="store_true", help="one JSON object a line for each stop")
    add_remote_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if is_replay(args.module):
        from engine.cli.replay import debug

        return debug(args)
    if missing_function("debug", args):
        return 2
    commands = read_commands(args.commands, check_for_reference if args.engine == "reference" else None)
    if commands is None:
        return 2
    problem = None if getattr(args, "remote", None) else no_inputs_problem(args.module, args.function, args.input)
    if problem:  # the program cannot run: said before the session starts, as the other commands say it
        print(f"iree-lens debug: {problem}", file=sys.stderr)
        return 1
    if getattr(args, "remote", None):  # the module path is the server's: its formats are not read here
        args.device = args.device or "local-sync"
    else:
        try:
            args.device = module_device(args.module, args.device)
        except LensError as e:
            print(f"iree-lens debug: {e}", file=sys.stderr)
            return 1
    return Debugger(args, commands).run()


def read_commands(
    path: str, check: Callable[[list[ScriptCommand], str], None] | None = None
) -> list[ScriptCommand] | None:
    """The commands file parsed (and checked by ``check`` for the engine that runs it), or ``None`` after
    saying why it cannot be (the command exits with 2)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        print(f"iree-lens debug: cannot read the commands file: {e}", file=sys.stderr)
        return None
    try:
        commands = parse_script(text, path)
        if check is not None:
            check(commands, path)
    except ScriptError as e:
        print(f"iree-lens debug: {e}", file=sys.stderr)
        return None
    return commands


def registers_json(registers: RegisterFile) -> dict[str, Any]:
    return {"i32": list(registers.i32), "ref": list(registers.ref)}


def stop_json(stop: Stopped | None, function: str, registers: RegisterFile | None = None) -> dict[str, Any]:
    """The one-line JSON of a stop (the format ``--json`` prints)."""
    frames = stop.location.frames if stop is not None else ()
    info = stop.location.dispatch_info if stop is not None else None
    top = frames[-1] if frames else None
    line = {
        "reason": str(stop.reason) if stop is not None else None,
        "function": top.function if top is not None else function,
        "pc": top.pc if top is not None else None,
        "depth": len(frames),
        "dispatch": info.to_json() if info is not None else None,
        "registers": registers_json(registers if registers is not None else stop.detail.registers)
        if registers is not None or stop is not None
        else {},
    }
    if stop is not None and stop.location.called_module:  # a function of a compiled module the program calls
        line["module"] = stop.location.called_module
    if stop is not None and stop.detail.tensors:  # the stopped dispatch's typed tensors, described
        line["tensors"] = [t.to_json() for t in stop.detail.tensors]
    if stop is not None and stop.detail.nonfinite:  # break nan: what the dispatch wrote, per tensor
        line["nonfinite"] = [f.to_json() for f in stop.detail.nonfinite]
    if stop is not None and stop.detail.divergence is not None:  # break diverge: where and how far
        line["divergence"] = stop.detail.divergence.to_json()
    return line


def describe_stop(stop: Stopped, function: str) -> str:
    parts = [f"Stopped ({stop.reason})"]
    info = stop.location.dispatch_info
    if info is not None:
        parts.append(f"{info.when} dispatch #{info.ordinal} {info.export}")
    frames = stop.location.frames
    if frames:
        f = frames[-1]
        parts.append(f"in {stop.location.function_name} pc {f.pc:#x}" + (f": {f.instruction}" if f.instruction else ""))
    else:
        parts.append(f"in {function}")
    if stop.detail.nan_bindings:
        parts.append(f"(NaN/Inf written to bindings {list(stop.detail.nan_bindings)})")
    if stop.detail.divergence is not None:
        parts.append(f"({stop.detail.divergence.text})")
    return " ".join(parts)


class Debugger:
    """Runs parsed script commands against a session; prints stops as text or JSON lines."""

    def __init__(self, args, commands: list[ScriptCommand]):
        self.args = args
        self.commands = commands
        self.client: SessionClient | None = None
        self.state = "not started"  # not started | stopped | finished | failed
        self.last_stop: Stopped | None = None
        self.finished: Finished | None = None
        self.status = 0
        # The program failed (a trap, a HAL error): the exit status is 1, yet the commands after it run, as gdb
        # goes on after a fatal signal: reverse commands and info registers look back from where it failed.
        self.failure: Failed | None = None
        self.matched: set[str] = set()  # the breakpoints (described) that stopped the program so far
        # The breakpoints the session refused (said '(not set)' at their line): not sent again with later
        # lines' breakpoints, which would have them refused, and said, once more at every later break.
        self.refused: set[Breakpoint] = set()

    # -- output

    def _print(self, obj: dict[str, Any] | str) -> None:
        print(json.dumps(obj) if isinstance(obj, dict) else obj, flush=True)

    def _error(self, command: ScriptCommand | None, message: str, *, fatal: bool = True) -> None:
        """Say ``message`` at ``command``'s line; ``fatal`` (the command could not do what it says): the
        exit status is 1 and the commands file stops after this command (``SCRIPT_RULE``)."""
        where = f"{self.args.commands}:{command.line}: " if command is not None else ""
        print(f"iree-lens debug: {where}{message}", file=sys.stderr, flush=True)
        if fatal:
            self.status = 1

    # -- the session

    def _handler(self) -> type:
        if self.args.engine == "reference":
            from engine.session.reference_session import ReferenceSession

            return ReferenceSession
        if any(c.verb in _HISTORY_VERBS for c in self.commands):
            # Reverse commands and when-changed need the run's history (engine.timetravel records it).
            from engine.session.timetravel_session import TimeTravelSession

            return TimeTravelSession
        from engine.session.debug_session import DebugSession

        return DebugSession

    def _transport(self) -> TransportFactory:
        if getattr(self.args, "remote", None):
            from engine.session.stream import remote

            reverse = any(c.verb in _HISTORY_VERBS for c in self.commands)
            handler = "reference" if self.args.engine == "reference" else "timetravel" if reverse else "debug"
            return remote(self.args.remote, handler)
        return in_process(self._handler())

    def _next(self) -> Event:
        """The next event that answers a command; the session's notes (``Log``: a rebuild of the sources
        done) come between them whenever they happen, so they go to stderr, out of the stop records."""
        while isinstance(event := self.client.next_event(), Log):
            print(f"iree-lens debug: {event.text}", file=sys.stderr)
        return event

    def run(self) -> int:
        # One event per command, in order (no history requests of its own, no progress events).
        self.client = SessionClient(self._transport(), blocking=True, track_history=False)
        try:
            self.client.connect()  # --remote: the server starts here
        except LensError as e:  # --remote: the server could not be started or refused
            print(f"iree-lens debug: {e}", file=sys.stderr)
            return 1
        try:
            # Typed from the first stop on, as save-tensors types them (sources waited for, not raced).
            self.client.open(
                str(self.args.module),
                self.args.device,
                sources=tuple(getattr(self.args, "sources", ())),
                rebuild_sources=not getattr(self.args, "no_rebuild", False),
                wait_for_sources=True,
                parameters=tuple(getattr(self.args, "parameters", ())),
                modules=tuple(getattr(self.args, "modules", ())),
                executable_plugins=tuple(getattr(self.args, "executable_plugins", ())),
                initializer=self.args.function == INITIALIZER,  # stopped in as a call (Open.initializer)
            )
            opened = self._next()
            if not isinstance(opened, Opened):
                print(f"iree-lens debug: {getattr(opened, 'message', opened)}", file=sys.stderr)
                return 1
            if self.args.function not in opened.functions:
                print(
                    f"iree-lens debug: function {self.args.function!r} not found; exports: "
                    f"{', '.join(opened.functions)}",
                    file=sys.stderr,
                )
                return 1
            if opened.initializer_dispatches:
                print(f"iree-lens debug: {opened.initializer_note(f'--function={INITIALIZER}')}", file=sys.stderr)
            for k, command in enumerate(self.commands):
                self._do(command)
                if self.status:  # as gdb -batch -x: an error ends the commands file there (not the program's)
                    if k + 1 < len(self.commands):
                        print(
                            f"iree-lens debug: {self.args.commands}:{command.line}: the commands file stops at "
                            f"this error ({len(self.commands) - k - 1} later commands not run)",
                            file=sys.stderr,
                        )
                    break
        except LensError as e:
            print(f"iree-lens debug: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        finally:
            self.client.shutdown()
            self.client = None
            import gc

            gc.collect()  # IREE's runtime objects go now, not during interpreter exit
        return self.status or int(self.failure is not None)

    def _do(self, command: ScriptCommand) -> None:
        verb = command.verb
        if verb == "break":
            kept = tuple(b for b in self.client.breakpoints if b not in self.refused)
            self.client.set_breakpoints((*kept, command.breakpoint))
            self._expect_no_failure(command)
        elif verb == "continue":
            if self.state == "not started":
                self._call(stop_at_entry=False, command=command)
            elif self._running_or_error(command):
                self.client.continue_()
                self._await_stop(command)
        elif verb in _STEP_MODES:
            if self.state == "not started":
                if not self._call(stop_at_entry=True, command=command, quiet=True):
                    return
            if self._running_or_error(command):
                self.client.step(_STEP_MODES[verb], command.count)
                self._await_stop(command)
        elif verb in _REVERSE_VERBS:
            self._reverse(command)
        elif verb == "info registers":
            self._info_registers(command)
        elif verb == "info globals":
            self._info_globals(command)
        elif verb == "print":
            self._print_global(command)
        elif verb == "when-changed":
            self._when_changed(command)
        elif verb == "where-from":
            self._where_from(command)
        elif verb == "save-tensors":
            self._save_tensors(command)

    def _reverse(self, command: ScriptCommand) -> None:
        """reverse-step/next [N], reverse-finish, reverse-continue: also from the finished or failed program."""
        if self.state not in ("stopped", "finished") and not (self.state == "failed" and self.failure):
            self._error(command, f"{command.text!r}: the program has no history yet ({self.state})")
            return
        if not self.client.reverse(command.verb, command.count):
            self._error(command, f"{command.text!r}: no recorded history to go back in")
            return
        event = self._next()
        if isinstance(event, Stopped):
            self.state = "stopped"
            self.last_stop = event
            self.matched.update(event.detail.breakpoints)  # found going back: it stopped the program too
            if self.args.json:
                self._print(stop_json(event, self.args.function))
            else:
                self._print(describe_stop(event, self.args.function))
        elif isinstance(event, Failed):
            # Nothing moved (e.g. reverse-finish in the outermost frame): the program stays where it was.
            self._error(command, event.message)
        else:
            self._error(command, f"unexpected event {event!r}")

    def _expect_no_failure(self, command: ScriptCommand) -> None:
        """SetBreakpoints answers only when it fails: ask a cheap query to know it was taken."""
        self.client.send(ReadDispatch())
        while True:
            event = self._next()
            if isinstance(event, Failed) and event.status == BREAKPOINT_REFUSED:
                self.refused.update(r.breakpoint for r in event.refused)
                self._error(command, f"{event.message} (not set)", fatal=False)  # as gdb: said, and on
            elif isinstance(event, Failed):
                self._error(command, event.message)
                self.state = "failed"
            if isinstance(event, Answer):
                return

    def _running_or_error(self, command: ScriptCommand) -> bool:
        if self.state == "stopped":
            return True
        # As gdb's "The program is not being run.", an error: the script expected a stop it cannot have.
        self._error(command, f"{command.text!r}: the program is not being run ({self.state})")
        return False

    def _call(self, *, stop_at_entry: bool, command: ScriptCommand, quiet: bool = False) -> bool:
        self.client.call(self.args.function, tuple(self.args.input), stop_at_entry)
        return self._await_stop(command, quiet=quiet)

    def _await_stop(self, command: ScriptCommand, quiet: bool = False) -> bool:
        """Wait for the run's stop or end and print it; True when the program is stopped."""
        event = self._next()
        if isinstance(event, Stopped):
            self.state = "stopped"
            self.last_stop = event
            self.matched.update(event.detail.breakpoints)
            if not quiet:
                if self.args.json:
                    self._print(stop_json(event, self.args.function))
                else:
                    self._print(describe_stop(event, self.args.function))
            return True
        if isinstance(event, Finished):
            self.state = "finished"
            self.finished = event
            self.last_stop = None
            self._note_unmatched(command)
            self._note_bytes_differ(command, event)
            if self.args.json:
                line = stop_json(None, self.args.function)
                line.update(reason="finished", function=event.function, registers={})
                line["results"] = event.results_text
                line["outputs"] = [_output_json(ref.to_numpy(), ref.element_type) for ref in event.outputs]
                if event.verdicts:  # what a diverge breakpoint judged in the call: [ordinal, export, verdict]
                    exports = dict(event.exports)
                    line["verdicts"] = [[o, exports.get(o), v] for o, v in event.verdicts]
                self._print(line)
            else:
                self._print(f"Finished {event.function}\n{event.results_text}")
            return False
        if isinstance(event, Failed | Crashed):
            message = _event_message(event)
            self.state = "failed"
            self.last_stop = None
            if self.args.json:
                line = stop_json(None, self.args.function)
                frames = event.location.frames
                if frames:
                    line.update(function=frames[-1].function, pc=frames[-1].pc, depth=len(frames))
                line.update(reason="failed", message=message, status=getattr(event, "status", None))
                self._print(line)
            # A crash took the session with it: nothing after it can run. A failure is where the program
            # stopped for good (exit status 1), with its history and failing frame still there to look at.
            # A call refused before it ran (inputs that do not parse) has no frames: an error as any other.
            self.failure = event if isinstance(event, Failed) and event.location.frames else None
            self._error(command, message, fatal=self.failure is None)
            return False
        self._error(command, f"unexpected event {event!r}")
        return False

    def _note_unmatched(self, command: ScriptCommand) -> None:
        """The program ended: say which dispatch breakpoints never stopped it (a note on stderr, as gdb's
        program simply exits; a typo in a dispatch name would otherwise pass without a word)."""
        never = [
            bp.describe()
            for bp in self.client.breakpoints
            if is_dispatch_breakpoint(bp) and bp.describe() not in self.matched and bp not in self.refused
        ]
        if never:
            self._error(command, "the program ended without stopping at: " + "; ".join(never), fatal=False)

    def _note_bytes_differ(self, command: ScriptCommand, event: Finished) -> None:
        """A diverge breakpoint did not stop at dispatches whose output bytes are of no known type and differ
        (``numerics.BYTES_DIFFER``): say so, with what would judge them (a note on stderr, as the finder's)."""
        from engine.dispatch.numerics import BYTES_DIFFER

        differ = [o for o, v in event.verdicts if v == BYTES_DIFFER]
        if differ:
            name = dict(event.exports).get(differ[0], "")
            self._error(command, f"break diverge: {len(differ)} dispatches' outputs are bytes of no known element "
                                 f"type that do not match the reference's (they differ, or are laid out otherwise "
                                 f"than its tensors), first #{differ[0]} {name}: rounding cannot be told from a "
                                 "divergence, so the breakpoint did not stop there; give --sources (a "
                                 "--iree-hal-dump-executable-sources-to folder) to judge them", fatal=False)  # fmt: skip

    def _info_registers(self, command: ScriptCommand) -> None:
        if self.state == "failed" and self.failure is not None:
            registers = self._failing_frame_registers(command)
            if registers is None:
                return
        elif self.state != "stopped":  # gdb: "The program has no registers now.", an error
            self._error(command, f"{command.text!r}: no registers: the program is not stopped ({self.state})")
            return
        else:
            registers = self.last_stop.detail.registers
        if self.args.json:  # not a stop: no "reason"
            stop = self.last_stop or Stopped("failed", self.failure.location)  # where it failed
            line = stop_json(stop, self.args.function, registers)
            self._print({"info": "registers", **{k: line[k] for k in ("function", "pc", "depth", "registers")}})
            return
        i32 = registers.i32
        refs = registers.ref
        lines = [f"i{k} = {v}" for k, v in enumerate(i32)] + [f"r{k} = {v}" for k, v in enumerate(refs)]
        self._print("\n".join(lines) if lines else "(no registers)")

    def _answer(self, command: ScriptCommand, query, kind: type):
        """The session's answer to ``query`` (of type ``kind``), or None once its failure is said at ``command``."""
        self.client.send(query)
        answer = self._next()
        if isinstance(answer, kind):
            return answer
        self._error(command, f"{command.text!r}: {_event_message(answer)}")
        return None

    def _info_globals(self, command: ScriptCommand) -> None:
        """The module's globals now: they outlive a call (state kept between calls), so any time after open."""
        answer = self._answer(command, ReadGlobals(), Globals)
        if answer is None:
            return
        if self.args.json:
            self._print({"info": "globals", "names": answer.names_note, "rwdata": answer.rwdata.hex(),
                         "refs": list(answer.refs), "globals": [asdict(v) for v in answer.variables]})  # fmt: skip
            return
        self._print("\n".join(globals_lines(answer)))

    def _named_global(self, command: ScriptCommand) -> GlobalVariable | None:
        """The global ``command`` names, or None once why not is said."""
        answer = self._answer(command, ReadGlobals(), Globals)
        if answer is None:
            return None
        found = next((v for v in answer.variables if v.name == command.name), None)
        if found is None:
            why = answer.names_note if not answer.variables else "info globals lists the module's"
            self._error(command, f"{command.text!r}: no global named @{command.name} ({why})")
        return found

    def _when_changed(self, command: ScriptCommand) -> None:
        """``when-changed @NAME``: the last instruction in the recorded history that changed a global (a
        buffer global: the bytes it holds, and the device operations that put them there); the program stays
        where it is."""
        if self.state not in ("stopped", "finished") and not (self.state == "failed" and self.failure):
            self._error(command, f"{command.text!r}: the program has no history yet ({self.state})")
            return
        what = command.name
        if what.startswith("@"):
            found = self._named_global(replace(command, name=what[1:]))
            if found is None:
                return
            if found.kind != "ref":
                watch: Watch = WatchGlobal("", found.index, _PRIMITIVE_BYTES[found.kind], found.kind)
            elif found.byte_length is not None:
                watch = WatchGlobalContents("", found.index)
            else:
                watch = WatchGlobalRef("", found.index)
        else:
            register = self._register_watch(command)
            if register is None:
                return
            watch = register
        if not self.client.when_changed(watch):
            self._error(command, f"{command.text!r}: no recorded history to search")
            return
        answer = self._next()
        if not isinstance(answer, LastChange):
            self._error(command, f"{command.text!r}: {_event_message(answer)}")
            return
        change = answer.change
        if self.args.json:
            self._print({"when-changed": what, "change": asdict(change) if change else None})
        elif change is None:
            self._print(f"{what} did not change in the recorded history")
        else:
            self._print(last_write_text(what if what.startswith("@") else f"%{what}", change))

    def _register_watch(self, command: ScriptCommand) -> Watch | None:
        """``when-changed i3`` / ``r1``: that register of the innermost frame (a ref holding a buffer: its
        bytes, as the window's "the contents of %r1"); None once a stop without it is said."""
        if self.state != "stopped" or self.last_stop is None or not self.last_stop.location.frames:
            self._error(command, f"{command.text!r}: no registers: the program is not stopped in a frame ({self.state})")
            return None
        bank, index = command.name[0], int(command.name[1:])
        registers = self.last_stop.detail.registers
        values = registers.i32 if bank == "i" else registers.ref
        if index >= len(values):
            self._error(command, f"{command.text!r}: the frame has {len(values)} {bank} registers")
            return None
        depth = len(self.last_stop.location.frames) - 1
        if bank == "r" and holds_bytes(str(values[index])):
            return WatchRegisterContents(depth, index)
        return WatchRegister(depth, bank, index)

    def _where_from(self, command: ScriptCommand) -> None:
        """``where-from input N I J ...``: at a dispatch stop, the dispatch (or copy) that last wrote that
        element of the tensor before the dispatch ran; the session searches the history and parks there
        again (an untyped ``binding B BYTE``: that byte)."""
        info = self.last_stop.location.dispatch_info if self.state == "stopped" and self.last_stop else None
        if info is None:
            self._error(command, f"{command.text!r}: needs a stop at a dispatch")
            return
        self.client.request_tensors(wait_for_sources=True)
        answer = self._next()
        if not isinstance(answer, Tensors):
            self._error(command, f"{command.text!r}: {_event_message(answer)}")
            return
        found = _tensor_named(answer, command.name, command.count)
        if isinstance(found, str):
            self._error(command, f"{command.text!r}: {found}")
            return
        array = found.tensor.to_numpy()
        typed = command.name != "binding"
        index = command.indices or (0,) * (array.ndim if typed else 1)
        if typed and (len(index) != array.ndim or any(not 0 <= i < d for i, d in zip(index, array.shape))):
            self._error(command, f"{command.text!r}: no element {list(index)} in {found.tensor.shape}")
            return
        if not typed and not 0 <= index[0] < found.length:
            self._error(command, f"{command.text!r}: binding {found.index} has {found.length} bytes")
            return
        what = f"{command.name} {command.count} {list(index)} of dispatch #{info.ordinal}"
        if str(info.when) == DispatchWhen.AFTER and (found.role == "output" and found.written or
                                                     not typed and found.access != "read"):  # fmt: skip
            # Its bytes shown are the ones the dispatch wrote (the search answers for the bytes before it ran,
            # which are not these): the window does not ask this either.
            if self.args.json:
                self._print({"where-from": what, "change": None, "written_by": info.ordinal})
            else:
                self._print(f"{what}: written by dispatch #{info.ordinal} itself (this stop is after it ran; "
                            "at the stop before it, where-from says what was there before)")  # fmt: skip
            return
        size = array.dtype.itemsize if typed else 1
        if not typed:
            flat = index[0]  # a byte
        else:
            flat = int(np.ravel_multi_index(index, array.shape)) if array.ndim else 0
        watch = WatchBinding(found.index, found.offset + flat * size, size, found.tensor.element_type if typed else "")
        self.client.when_changed(watch)
        event = self._next()
        if isinstance(event, Stopped):  # parked at the dispatch again, as it was
            self.last_stop = event
            event = self._next()
        if not isinstance(event, LastChange):
            self._error(command, f"{command.text!r}: {_event_message(event)}")
            return
        self._print_origin(what, event.change)

    def _print_origin(self, what: str, change) -> None:
        if self.args.json:
            self._print({"where-from": what, "change": asdict(change) if change else None})
        else:
            self._print(origin_text(what, change))

    def _print_global(self, command: ScriptCommand) -> None:
        """``print @NAME``: a global's value now; a buffer global's tensor as IREE prints a buffer view (its
        bytes in hex when its type is not known)."""
        found = self._named_global(command)
        if found is None:
            return
        if found.byte_length is None:  # a number, or a ref that holds no buffer
            self._emit_value(command.name, found.value, found.kind)
            return
        buffer = self._answer(command, ReadGlobalBuffer(found.index), GlobalBuffer)
        if buffer is None:
            return
        array = buffer.tensor.to_numpy()
        if buffer.tensor.element_type == "u8":
            shown = array[:PRINT_BYTES].tobytes().hex(" ") + (" ..." if array.size > PRINT_BYTES else "")
            self._emit_value(command.name, f"{buffer.type_note}: {shown}", "bytes")
        else:
            tensor = Tensor(array, parse_element_type(buffer.tensor.element_type))
            self._emit_value(command.name, format_tensor(tensor), buffer.tensor.element_type)

    def _emit_value(self, name: str, value: str, kind: str) -> None:
        if self.args.json:
            self._print({"print": f"@{name}", "value": value, "kind": kind})
        else:
            self._print(f"@{name} = {value}")

    def _failing_frame_registers(self, command: ScriptCommand) -> RegisterFile | None:
        """The registers of the frame the program failed in (the session keeps the failed call's frames)."""
        self.client.send(ReadRegisters())
        answer = self._next()
        if isinstance(answer, Registers):
            return answer.registers
        self._error(command, f"{command.text!r}: no registers where the program failed: {_event_message(answer)}")
        return None

    def _save_tensors(self, command: ScriptCommand) -> None:
        out = Path(command.path)
        saved: list[str] = []
        undefined: dict[str, list[list[int]]] = {}  # file -> byte ranges never written before the dispatch
        labels: dict[str, str] = {}  # file -> the tensor in the one vocabulary: binding 3, write, output 0
        retyped: dict[str, str] = {}  # file -> the source's type it holds, where the session gave a view of it
        held: dict[str, str] = {}  # file -> the module global whose buffer holds it (@state)
        bits: dict[str, tuple[str, str]] = {}  # file -> element type, dtype: a .npy of bits (bf16 as uint16)
        if self.state == "finished" and self.finished is not None:
            out.mkdir(parents=True, exist_ok=True)
            for k, ref in enumerate(self.finished.outputs):
                path = out / f"output{k}.npy"
                np.save(path, ref.to_numpy())
                saved.append(str(path))
        elif self.state == "stopped" and self.last_stop.location.dispatch_info is not None:
            info = self.last_stop.location.dispatch_info
            self.client.request_tensors(wait_for_sources=True)  # a script saves the same files every time
            answer = self._next()
            if not isinstance(answer, Tensors):
                if isinstance(answer, Crashed):  # the session is gone: nothing after this can run
                    self.state = "failed"
                self._error(command, _event_message(answer))
                return
            out.mkdir(parents=True, exist_ok=True)
            # Typed in the session (engine.dispatch.typed_tensors): inputs, outputs, or untyped bindings.
            for t in answer.tensors:
                typed = t.type_source != TypeSource.UNTYPED  # an untyped binding gets no role by guess
                # Untyped, a file is one binding: named by its binding index (a count of the shown bindings
                # named binding 2's bytes binding1 where binding 1 was not shown).
                what = f"{t.role}{t.position}" if typed else f"binding{t.index}"
                path = out / f"dispatch{info.ordinal}_{info.when}_{what}.npy"
                array = t.tensor.to_numpy()  # bf16/f8 as their bits, as in capture bundles
                declared = declared_array(array, t.declared) if t.declared else None
                if declared is not None:  # i4 as its values (one a byte), complex<f32> as complex64
                    array, retyped[path.name] = declared, t.declared
                np.save(path, array)
                saved.append(str(path))
                if declared is None and stored_as_bits(t.tensor.element_type):
                    bits[path.name] = (t.tensor.element_type, str(array.dtype))
                labels[path.name] = binding_label(t.index, t.access, t.role if typed else None, t.position)
                if t.undefined:  # an in-place tensor's bytes nothing wrote yet (leftovers, not data)
                    undefined[path.name] = [list(r) for r in t.undefined]
                if t.global_name:
                    held[path.name] = t.global_name
        else:
            self._error(
                command,
                f"{command.text!r}: needs a stop at a dispatch, or the finished program's outputs ({self.state}"
                + (", not at a dispatch)" if self.state == "stopped" else ")"),
            )
            return
        if self.args.json:
            self._print({"saved": saved, **({"labels": labels} if labels else {}),
                         **({"undefined": undefined} if undefined else {}),
                         **({"declared": retyped} if retyped else {}),
                         **({"globals": held} if held else {}),
                         **({"bits": {name: element for name, (element, _) in bits.items()}} if bits else {})})  # fmt: skip
        else:
            self._print(f"saved {len(saved)} tensors to {out}" + "".join(
                f"; {name}: {sum(e - s for s, e in r)} bytes never written before this dispatch, undefined"
                for name, r in undefined.items()
            ) + "".join(f"; {name}: {declared}, {'as complex' if 'complex' in declared else 'unpacked, a value a byte'}"
                        for name, declared in retyped.items())
              + "".join(f"; {name}: in global {name_of}" for name, name_of in held.items())
              + "".join(f"; {name}: {element} as its bits ({dtype})" for name, (element, dtype) in bits.items()))


def _event_message(event) -> str:
    """What went wrong, in words: a ``Failed``'s message, a ``Crashed``'s reason (never the event's repr)."""
    if isinstance(event, Crashed):
        return event.reason
    return getattr(event, "message", None) or f"the session answered {type(event).__name__}, not tensors"


def _output_json(array: np.ndarray, element_type: str) -> dict[str, Any]:
    out: dict[str, Any] = {"shape": list(array.shape), "element_type": element_type}
    if array.size <= 4096:
        values = array.astype(np.float64) if array.dtype.kind == "f" else array
        out["values"] = [None if isinstance(v, float) and not np.isfinite(v) else v for v in values.ravel().tolist()]
    return out
