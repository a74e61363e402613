"""Hot substitution through the session protocol: a run paused at a dispatch in a child process takes an
edited executable, reruns the dispatch from its inputs and continues with the edit (the editor's path).

The elementwise sample computes ``a * b + |a|``; the edit makes the ``addf`` a ``mulf``. Expected values
are computed with numpy from the inputs.
"""

from __future__ import annotations

import numpy as np
from session_support import Events
from support import compile_with_dumps, edited_source

from engine.session.child import ChildSession
from engine.session.protocol import (
    Breakpoint,
    Call,
    Continue,
    DispatchRerun,
    Finished,
    Open,
    Opened,
    RerunDispatch,
    SetBreakpoints,
    Substitute,
    Substituted,
    SubstitutionRefused,
)


def test_apply_rerun_and_continue_in_a_child_session(tmp_path):
    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    bad = tmp_path / "bad.mlir"
    bad.write_text(edit.read_text().replace("arith.mulf", "arith.mulq", 1))
    a = np.arange(32, dtype=np.float32).reshape(4, 8) / 7 - 2
    b = np.full((4, 8), 1.5, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    inputs = (f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}")

    events = Events()
    session = ChildSession("engine.session.debug_session:DebugSession", events)
    try:
        session.send(Open(str(vmfb)))
        assert isinstance(events.next(), Opened)
        session.send(SetBreakpoints((Breakpoint("dispatch", ordinal=0, when="after"),)))
        session.send(Call("main", inputs))
        stop = events.next()
        assert stop.reason == "dispatch"

        session.send(Substitute("main_dispatch_0", str(bad)))
        refused = events.next()
        assert isinstance(refused, SubstitutionRefused) and refused.kind == "compile"

        session.send(Substitute("main_dispatch_0", str(edit)))
        applied = events.next()
        assert isinstance(applied, Substituted), applied
        assert applied.exports == ("main_dispatch_0_elementwise_32_f32",), applied

        session.send(RerunDispatch())
        rerun = events.next()
        assert isinstance(rerun, DispatchRerun), rerun
        before = rerun.before[-1].to_numpy().view(np.float32).reshape(4, 8)
        after = rerun.after[-1].to_numpy().view(np.float32).reshape(4, 8)
        # What the module's kernel wrote (it may fuse the multiply-add: numpy does not, so within an ulp).
        np.testing.assert_allclose(before, a * b + np.abs(a), rtol=1e-6)
        np.testing.assert_array_equal(after, (a * b) * np.abs(a))  # what the edit computes

        session.send(Continue())
        finished = events.next()
        assert isinstance(finished, Finished)
    finally:
        session.close()
