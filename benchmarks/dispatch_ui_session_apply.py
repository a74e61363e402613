"""Time from "Apply" to the rerun dispatch's outputs when the editor goes through the session process
(what the window does with a paused run): ``Substitute`` then ``RerunDispatch`` on a
child session paused after dispatch 0 of the elementwise sample (llvm-cpu). Prints the median of N.

    .venv/bin/python benchmarks/dispatch_ui_session_apply.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_support import Events, compile_with_dumps, edited_source

from engine.session.child import ChildSession
from engine.session.protocol import (
    Breakpoint,
    Call,
    Continue,
    Open,
    RerunDispatch,
    RevertSubstitution,
    SetBreakpoints,
    Substitute,
    SubstitutionRefused,
)


def main(n: int = 5) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lens-bench-apply-"))
    vmfb = compile_with_dumps("elementwise", "cpu", tmp / "cpu")
    edit = edited_source(tmp / "cpu" / "sources", tmp / "edit.mlir")
    events = Events()
    session = ChildSession("engine.session.debug_session:DebugSession", events)
    times = []
    try:
        session.send(Open(str(vmfb)))
        events.next()
        session.send(SetBreakpoints((Breakpoint("dispatch", ordinal=0, when="after"),)))
        for _ in range(n):
            session.send(Call("main", ("4x8xf32=1.5", "4x8xf32=2")))
            events.next()  # the stop
            t0 = time.perf_counter()
            session.send(Substitute("main_dispatch_0", str(edit)))
            applied = events.next()
            assert not isinstance(applied, SubstitutionRefused), applied
            session.send(RerunDispatch())
            rerun = events.next()
            rerun.after[-1].to_numpy()
            times.append(time.perf_counter() - t0)
            session.send(RevertSubstitution("main_dispatch_0"))
            events.next()
            session.send(Continue())
            events.next()
    finally:
        session.close()
    print(f"apply -> rerun outputs through the session process: median {statistics.median(times):.3f} s, "
          f"min {min(times):.3f} s over {n} (first {times[0]:.3f} s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
