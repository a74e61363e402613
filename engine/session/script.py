"""Debugger scripts, in the manner of ``gdb -batch -x FILE``: one command a line.

::

    break dispatch ORDINAL|NAME|* [before|after]   # a dispatch breakpoint (NAME: IREE's name, globs)
    break nan                                      # after the first dispatch that writes NaN or Inf
    break diverge BUNDLE_DIR|MODULE.vmfb [ATOL] [RTOL]   # after the first dispatch whose outputs differ
                                                   # from a reference run (a capture bundle, or a module
                                                   # run with the same inputs) beyond the tolerance
    break function NAME                            # entry of a VM function
    break pc FUNCTION:PC                           # an instruction (PC decimal or 0x...)
    continue | step [N] | next [N] | finish        # run
    reverse-step [N] | reverse-next [N] | reverse-finish | reverse-continue   # run backwards (history)
    info registers | info globals | save-tensors DIR   # info globals: by name (with the VM phase beside)
    print @GLOBAL                                  # a global's value now (a buffer: its tensor, as IREE prints it)
    when-changed @GLOBAL | iN | rN                 # its last write in the history, and what wrote it (a buffer
                                                   # global: the bytes it holds, followed back through copies;
                                                   # a register of the innermost frame, as info registers names
                                                   # it: a buffer's bytes, else its value)
    where-from input|output N [I J ...]            # at a dispatch stop: what wrote that element before the
    where-from binding B [BYTE]                    # dispatch ran (an untyped binding: one byte of it)

``#`` starts a comment; blank lines are ignored. ``parse_script`` turns a text into ``ScriptCommand``s or
raises ``ScriptError`` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import LensError
from engine.session.protocol import Breakpoint, BreakpointKind, DispatchWhen

RUN_COMMANDS = ("continue", "step", "next", "finish")


class ScriptError(LensError):
    def __init__(self, message: str, line: int | None = None, path: str | None = None):
        self.line = line
        where = f"{path or 'commands'}:{line}: " if line is not None else ""
        super().__init__(where + message)


@dataclass(frozen=True)
class ScriptCommand:
    """One line: ``verb`` is ``break``, ``continue``, ``step``, ``next``, ``finish``, ``info registers``,
    ``info globals`` or ``save-tensors``; ``count`` for steps, ``breakpoint`` for breaks, ``path`` for save-tensors."""

    line: int
    verb: str
    count: int = 1
    breakpoint: Breakpoint | None = None
    path: str | None = None
    text: str = ""
    name: str = ""  # print's global, without its @; when-changed's @global or register (i3, r1); where-from's kind
    indices: tuple[int, ...] = ()  # where-from's element index (an untyped binding: its byte)


def _int(text: str) -> int:
    return int(text, 0)


def _parse_break(words: list[str]) -> Breakpoint:
    if not words:
        raise ValueError("break what? (dispatch ORDINAL|NAME|*, nan, diverge REF, function NAME, pc FUNCTION:PC)")
    kind, rest = words[0], words[1:]
    if kind == "dispatch":
        when = DispatchWhen.BEFORE
        if rest and rest[-1] in ("before", "after"):
            when = DispatchWhen(rest.pop())
        if len(rest) != 1:
            raise ValueError("break dispatch takes one ORDINAL, NAME or * (then before or after)")
        target = rest[0]
        if target.isdigit():
            return Breakpoint(BreakpointKind.DISPATCH, ordinal=int(target), when=when)
        return Breakpoint(BreakpointKind.DISPATCH, dispatch=target, when=when)
    if kind == "diverge":
        if not 1 <= len(rest) <= 3:
            raise ValueError("break diverge takes BUNDLE_DIR|MODULE.vmfb [ATOL] [RTOL]")
        try:
            tolerances = [float(x) for x in rest[1:]]
        except ValueError:
            raise ValueError(f"break diverge: tolerances must be numbers, not {' '.join(rest[1:])!r}") from None
        if any(t < 0 for t in tolerances):
            raise ValueError("break diverge: tolerances must not be negative")
        atol, rtol = (tolerances + [None, None])[:2]  # none: numerics' rounding rule
        return Breakpoint(BreakpointKind.DIVERGE, when=DispatchWhen.AFTER, reference=rest[0], atol=atol, rtol=rtol)
    if kind == "nan":
        if rest:
            raise ValueError("break nan takes nothing more")
        return Breakpoint(BreakpointKind.NAN, when=DispatchWhen.AFTER)
    if kind == "function":
        if len(rest) != 1:
            raise ValueError("break function takes one NAME")
        return Breakpoint(BreakpointKind.FUNCTION, function=rest[0])
    if kind == "pc":
        if len(rest) != 1 or ":" not in rest[0]:
            raise ValueError("break pc takes FUNCTION:PC")
        function, _, pc = rest[0].rpartition(":")
        try:
            value = _int(pc)
        except ValueError:
            raise ValueError(f"{pc!r} is not a pc (decimal or 0x...)") from None
        if not function or value < 0:
            raise ValueError("break pc takes FUNCTION:PC")
        return Breakpoint(BreakpointKind.INSTRUCTION, function=function, pc=value)
    raise ValueError(f"unknown breakpoint kind {kind!r} (dispatch, nan, diverge, function, pc)")


def parse_line(number: int, line: str) -> ScriptCommand | None:
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    words = text.split()
    verb, rest = words[0], words[1:]
    if verb == "break":
        return ScriptCommand(number, "break", breakpoint=_parse_break(rest), text=text)
    if verb in ("step", "next", "reverse-step", "reverse-next"):
        if len(rest) > 1:
            raise ValueError(f"{verb} takes at most one count")
        count = 1
        if rest:
            try:
                count = int(rest[0])
            except ValueError:
                raise ValueError(f"{verb} count {rest[0]!r} is not a number") from None
            if count < 1:
                raise ValueError(f"{verb} count must be at least 1")
        return ScriptCommand(number, verb, count=count, text=text)
    if verb in ("continue", "finish", "reverse-finish", "reverse-continue"):
        if rest:
            raise ValueError(f"{verb} takes no arguments")
        return ScriptCommand(number, verb, text=text)
    if verb == "info":
        if rest not in (["registers"], ["globals"]):
            raise ValueError("info takes 'registers' or 'globals'")
        return ScriptCommand(number, f"info {rest[0]}", text=text)
    if verb == "print":
        if len(rest) != 1 or not rest[0].startswith("@") or len(rest[0]) < 2:
            raise ValueError("print takes one @GLOBAL (a name info globals lists)")
        return ScriptCommand(number, "print", name=rest[0][1:], text=text)
    if verb == "when-changed":
        if len(rest) == 1 and re.fullmatch(r"%?[ir]\d+", rest[0]):
            return ScriptCommand(number, "when-changed", name=rest[0].lstrip("%"), text=text)
        if len(rest) != 1 or not rest[0].startswith("@") or len(rest[0]) < 2:
            raise ValueError("when-changed takes one @GLOBAL (a name info globals lists) or a register (i3, r1)")
        return ScriptCommand(number, "when-changed", name=rest[0], text=text)
    if verb == "where-from":
        if len(rest) < 2 or rest[0] not in ("input", "output", "binding"):
            raise ValueError("where-from takes input N, output N or binding B, then an element index")
        try:
            numbers = [int(w) for w in rest[1:]]
        except ValueError:
            raise ValueError(f"where-from {rest[0]}: {' '.join(rest[1:])!r} are not whole numbers") from None
        if min(numbers) < 0 or rest[0] == "binding" and len(numbers) > 2:
            raise ValueError("where-from takes non-negative numbers (a binding: its index, then one byte)")
        return ScriptCommand(number, "where-from", count=numbers[0], name=rest[0], indices=tuple(numbers[1:]),
                             text=text)  # fmt: skip
    if verb == "save-tensors":
        if len(rest) != 1:
            raise ValueError("save-tensors takes one DIR")
        return ScriptCommand(number, "save-tensors", path=rest[0], text=text)
    raise ValueError(
        f"unknown command {verb!r} (break, continue, step, next, finish, reverse-step, reverse-next, "
        "reverse-finish, reverse-continue, info registers, info globals, print @GLOBAL, when-changed @GLOBAL, "
        "where-from, save-tensors)"
    )


def parse_script(text: str, path: str | None = None) -> list[ScriptCommand]:
    commands = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            command = parse_line(number, line)
        except ValueError as e:
            raise ScriptError(str(e), number, path) from None
        if command is not None:
            commands.append(command)
    return commands


# What the reference engine (IREE's runtime, trace points only) can run.
REFERENCE_VERBS = ("break", "continue", "info registers", "save-tensors")


def check_for_reference(commands: list[ScriptCommand], path: str | None = None) -> None:
    """Raise ``ScriptError`` at the first line the reference engine cannot do."""
    for c in commands:
        if c.verb not in REFERENCE_VERBS:
            raise ScriptError(
                f"{c.verb!r}: the reference engine (IREE's runtime) stops only at dispatches; "
                "use --engine=debug to step",
                c.line,
                path,
            )
        if c.breakpoint is not None and c.breakpoint.kind not in (BreakpointKind.DISPATCH, BreakpointKind.NAN):
            raise ScriptError(
                f"{c.text!r}: the reference engine has dispatch breakpoints only; use --engine=debug",
                c.line,
                path,
            )
