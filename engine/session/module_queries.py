"""Queries about the module itself, answered from the ``.vmfb`` file where the session runs.

A client on another machine (``--remote``) cannot read the module: the session server answers these
from the file of the last ``Open`` it passed on (``engine.session.stream``); an in-process client calls
``answer`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import LensError
from engine.session.protocol import Answer, Query


@dataclass(frozen=True)
class ReadDisassembly(Query):
    """The instructions of VM function ``function`` (an export or internal name) of the open module."""

    function: str


@dataclass(frozen=True)
class Disassembly(Answer):
    """``(pc, text)`` of each instruction, the text as ``iree-dump-module --output=disassembly`` prints it."""

    function: str
    lines: tuple[tuple[int, str], ...]


def disassembly(module_path: str, query: ReadDisassembly) -> Disassembly:
    from engine.runtime.vmfb.disassembler import function_lines
    from engine.runtime.vmfb.module import open_vmfb

    module = open_vmfb(module_path)
    try:
        lines = function_lines(module, query.function)
    except (KeyError, IndexError, ValueError):
        raise LensError(f"no function {query.function!r} in {module_path}") from None
    return Disassembly(query, query.function, tuple((line.pc, line.text) for line in lines))


QUERIES = (ReadDisassembly,)
