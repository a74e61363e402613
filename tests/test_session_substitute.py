"""Hot substitution through the session protocol: a run paused at a dispatch in a child process takes an
edited executable, reruns the dispatch from its inputs and continues with the edit (the editor's path).

The elementwise sample computes ``a * b + |a|``; the edit makes the ``addf`` a ``mulf``. Expected values
are computed with numpy from the inputs.
"""

from __future__ import annotations

import numpy as np
from support import compile_with_dumps, edited_source
from support.session import Events

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
    RevertSubstitution,
    SetBreakpoints,
    Substitute,
    Substituted,
    SubstitutionRefused,
    SubstitutionReverted,
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
        # The module's kernel on the same inputs (it may fuse the multiply-add: numpy does not, so within an ulp).
        np.testing.assert_allclose(before, a * b + np.abs(a), rtol=1e-6)
        np.testing.assert_array_equal(after, (a * b) * np.abs(a))  # what the edit computes

        session.send(Continue())
        finished = events.next()
        assert isinstance(finished, Finished)
        # Paused after the dispatch: this run's output is the module's kernel's, the rerun's "before".
        np.testing.assert_array_equal(finished.outputs[0].to_numpy(), before)
        session.send(SetBreakpoints(()))
        session.send(Call("main", inputs))  # the next run has the edit
        np.testing.assert_array_equal(events.next().outputs[0].to_numpy(), after)

        # Revert after the run finished, run again: the module's own kernel (the revert is the session's).
        session.send(RevertSubstitution("main_dispatch_0"))
        assert isinstance(events.next(), SubstitutionReverted)
        session.send(Call("main", inputs))
        original = events.next()
        assert isinstance(original, Finished)
        np.testing.assert_array_equal(original.outputs[0].to_numpy(), before)
        session.send(Call("main", inputs))  # and for every later run
        np.testing.assert_array_equal(events.next().outputs[0].to_numpy(), before)
        # Applied with no run paused, the edit holds for the next runs until reverted.
        session.send(Substitute("main_dispatch_0", str(edit)))
        assert isinstance(events.next(), Substituted)
        session.send(Call("main", inputs))
        np.testing.assert_array_equal(events.next().outputs[0].to_numpy(), after)
    finally:
        session.close()
