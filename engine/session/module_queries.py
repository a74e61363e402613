"""Queries about the module itself, answered from the ``.vmfb`` file where the session runs.

A client on another machine (``--remote``) cannot read the module: the session server answers these
from the file of the last ``Open`` it passed on (``engine.session.stream``); an in-process client calls
``answer`` itself.
"""

from __future__ import annotations

from engine.errors import LensError
from engine.session.protocol import Disassembly, ReadDisassembly


def disassembly(module_path: str, query: ReadDisassembly) -> Disassembly:
    from engine.runtime.vmfb.disassembler import function_lines
    from engine.runtime.vmfb.module import open_vmfb

    module = open_vmfb(module_path)
    try:
        lines = function_lines(module, query.function)
    except (KeyError, IndexError, ValueError):
        raise LensError(f"no function {query.function!r} in {module_path}") from None
    return Disassembly(query, query.function, tuple((line.pc, line.text) for line in lines))


# The queries answered here (their messages are in ``engine.session.protocol`` with the others).
QUERIES = (ReadDisassembly,)
__all__ = ["QUERIES", "Disassembly", "ReadDisassembly", "disassembly"]
