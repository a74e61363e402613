"""The window's one run state (issue 35): the workbench holds the module, the run, its stop and the paused
dispatch; views read it and keep no copy. Opening another module or starting another run resets what
belonged to the previous one, except each module file's breakpoints. At model scale (a 2,000-dispatch run)
every dispatch list is complete, the ordinal column holds #1000 and up in full and the filter keeps up;
results are saved as .npy; a "Diverges from" value that is not a module or bundle is refused when set; a CPU
module opens on the CPU whatever device was selected.

Real programs (``tests/session_programs``) compiled with the real iree-compile, run in the window's real
debug session; expected values computed with numpy.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support import SPIN, patched_kernel_copy
from support.session import compile_program

from app.session_bridge import DEVICE_KEY
from app.settings import open_settings
from engine.session.protocol import Breakpoint, BreakpointKind, ReverseMode

TIMEOUT = 120_000
HEALTHY = ("4x8xf32=3", "4x8xf32=1")
MANY = 2000  # dispatches of the many_dispatches run


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("run_state")
    return {name: compile_program(name, "llvm-cpu", out) for name in ("nan_log", "many_dispatches")}


def open_module(qtbot, window, vmfb: Path):
    panel = window.panels["stepper"]
    window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    return panel


def run(qtbot, window, inputs, signal="finished"):
    window.workbench.set_inputs(inputs)
    with qtbot.waitSignal(getattr(window.session_bridge, signal), timeout=TIMEOUT) as done:
        assert window.workbench.run(), window.statusBar().currentMessage()
    return done.args[0]


def test_one_run_state_and_no_copies(qtbot, main_window, programs):
    window = main_window
    # The copies the window used to keep are gone: the run state is the workbench's.
    assert not hasattr(window.context, "paused_dispatch") and not hasattr(window.session_bridge, "last_stop")
    panel = open_module(qtbot, window, programs["nan_log"])
    window.session_bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, ordinal=1, when="after"))
    with qtbot.waitSignal(window.session_bridge.dispatchStopped, timeout=TIMEOUT) as stopped:
        run(qtbot, window, HEALTHY, signal="stopped")
    state = window.workbench.state
    assert state.paused == stopped.args[0] and state.dispatch == 1 and state.run_state == "stopped"
    assert state.stop.location.dispatch_info == state.paused and state.run == 1 and state.outcome == ""
    # Every view that shows the stop names the same dispatch.
    assert "#1" in panel.status_label.text() and "#1" in window.statusBar().currentMessage()
    runs = window.panels["run_dispatch_list"]
    assert runs.model.paused == 1
    # The context holds where the user looks in the program (names), never a run ordinal.
    assert window.context.dispatch is None
    # Shift+F6 (previous dispatch): the status bar, the stepper and the dispatch's document name the new stop
    # as soon as it is told, the document before its tensors are read.
    qtbot.waitUntil(lambda: window.documents.document("paused-dispatch") is not None, timeout=TIMEOUT)
    document = window.documents.document("paused-dispatch")
    qtbot.waitUntil(lambda: "#1" in document.header.text(), timeout=TIMEOUT)
    for ordinal in (1, 0):  # from after #1: before #1, then before #0
        with qtbot.waitSignal(window.session_bridge.dispatchStopped, timeout=TIMEOUT) as back:
            panel.reverse.previous_dispatch()
        assert back.args[0].ordinal == ordinal and window.workbench.state.dispatch == ordinal
        assert f"Dispatch #{ordinal}" in document.header.text() and "before it runs" in document.header.text()
        assert f"#{ordinal}" in panel.status_label.text() and f"#{ordinal}" in window.statusBar().currentMessage()
        assert runs.model.paused == ordinal
    window.session_bridge.set_breakpoints(())
    with qtbot.waitSignal(window.session_bridge.finished, timeout=TIMEOUT):
        window.session_bridge.continue_()
    assert window.workbench.state.paused is None and window.workbench.state.outcome == "finished"
    qtbot.waitUntil(lambda: runs.model.rowCount() == 3, timeout=TIMEOUT)
    assert panel.results.save_button.isEnabled()
    # Travelling back into the finished run is not a new run: its lists, results and outcome stay.
    with qtbot.waitSignal(window.session_bridge.dispatchStopped, timeout=TIMEOUT) as went:
        assert runs.go_to(2)
    assert went.args[0].ordinal == 2 and window.workbench.state.run == 1 and window.workbench.state.dispatch == 2
    assert runs.model.rowCount() == 3 and runs.model.paused == 2 and panel.results.save_button.isEnabled()


def test_another_module_or_run_leaves_nothing_of_the_last_but_its_breakpoints(qtbot, main_window, programs):
    window = main_window
    bridge = window.session_bridge
    nan_log, many = programs["nan_log"], programs["many_dispatches"]
    open_module(qtbot, window, nan_log)
    mine = Breakpoint(BreakpointKind.DISPATCH, ordinal=2)
    bridge.add_breakpoint(mine)
    runs = window.panels["run_dispatch_list"]
    runs.filter_edit.setText("nothing_matches_this")
    runs.filter_typing.apply()
    # A diff of phases of another compilation (what the Compile panel's "Diff" opens).
    from app.views.ir_diff import IrDiffView

    window.open_document(IrDiffView(), "Diff flow → stream", key="diff:/elsewhere/compile:flow:stream")
    # Another module: no breakpoint of the first, no filter, an empty list, no diff of other phases.
    open_module(qtbot, window, many)
    assert bridge.breakpoints == () and runs.filter_edit.text() == "" and runs.model.rowCount() == 0
    assert window.documents.document("diff:/elsewhere/compile:flow:stream") is None
    theirs = Breakpoint(BreakpointKind.DISPATCH, ordinal=5)
    bridge.add_breakpoint(theirs)
    # Back to the first: its own breakpoints come back, not the other module's.
    open_module(qtbot, window, nan_log)
    assert bridge.breakpoints == (mine,)
    stop = run(qtbot, window, HEALTHY, signal="stopped")
    assert stop.location.dispatch_info.ordinal == 2
    qtbot.waitUntil(lambda: window.documents.document("paused-dispatch") is not None, timeout=TIMEOUT)
    bridge.remove_breakpoint(mine)
    # A run that fails: its list says so (not "finished"), and the last run's dispatch tab is gone.
    run(qtbot, window, ("1x2xf32=0",), signal="failed")
    assert window.workbench.state.outcome == "failed" and window.workbench.state.run == 2
    assert window.documents.document("paused-dispatch") is None
    qtbot.waitUntil(lambda: "failed" in runs.title.text(), timeout=10_000)
    assert "finished" not in runs.title.text()


@pytest.mark.slow
def test_a_two_thousand_dispatch_run_is_listed_whole(qtbot, main_window, programs, tmp_path):
    window = main_window
    open_module(qtbot, window, programs["many_dispatches"])
    window.show_panel("run_dispatches")
    finished = run(qtbot, window, ("4xf32=0", str(MANY)))
    runs, live = window.panels["run_dispatch_list"], window.panels["run_dispatches"]
    qtbot.waitUntil(lambda: runs.model.rowCount() == MANY and live.model.rowCount() == MANY, timeout=TIMEOUT)
    assert [e.ordinal for e in live.model.entries] == list(range(MANY))
    assert "2,000 dispatches" in runs.title.text() and "finished" in runs.title.text()
    # The ordinal column holds the widest ordinal in full (Qt elides what does not fit: "1…").
    for table in (runs.table, live.table):
        qtbot.waitUntil(lambda t=table: t.columnWidth(0) > t.fontMetrics().horizontalAdvance(str(MANY - 1)), timeout=5000)
    # The filter keeps up at 2,000 rows.
    runs.filter_edit.setText("#1999")
    start = time.perf_counter()
    runs.filter_typing.apply()
    window.repaint()
    assert time.perf_counter() - start < 0.5
    assert runs.proxy.rowCount() == 1 and runs.proxy.index(0, 0).data() == "1999"
    runs.filter_edit.setText("many")
    runs.filter_typing.apply()
    assert runs.proxy.rowCount() == MANY
    # The results, saved as .npy from the window, are what numpy computes (x + 1, MANY times).
    assert finished.outputs and window.panels["stepper"].results.save_button.isEnabled()
    [path] = window.panels["stepper"].results.save(tmp_path / "out.npy")
    np.testing.assert_array_equal(np.load(path), np.zeros(4, np.float32) + MANY)


def test_a_diverge_reference_that_is_no_module_or_bundle_is_refused(qtbot, main_window, programs):
    window = main_window
    panel = open_module(qtbot, window, programs["nan_log"])
    view = panel.breakpoints_view
    view.kind.setCurrentIndex(view.kind.findData(BreakpointKind.DIVERGE))
    for bad in ("5", str(Path(__file__))):  # no such file; a file that is not an IREE module
        view.name.setText(bad)
        with qtbot.waitSignal(view.refused, timeout=5000) as refused:
            qtbot.mouseClick(view.add_button, Qt.MouseButton.LeftButton)
        assert refused.args[0].startswith("Not set:") and window.session_bridge.breakpoints == ()
        assert "Not set" in window.statusBar().currentMessage()
    view.name.setText(str(programs["many_dispatches"]))
    with qtbot.waitSignal(window.session_bridge.breakpointsChanged, timeout=TIMEOUT):
        qtbot.mouseClick(view.add_button, Qt.MouseButton.LeftButton)
    [bp] = window.session_bridge.breakpoints
    assert bp.kind == BreakpointKind.DIVERGE and bp.reference == str(programs["many_dispatches"])


def test_a_cpu_module_opens_on_the_cpu_whatever_device_was_selected(qtbot, make_main_window, programs):
    settings = open_settings()
    settings.setValue(DEVICE_KEY, "vulkan://0")
    settings.sync()
    window = make_main_window()
    assert window.workbench.device == "vulkan://0"
    panel = open_module(qtbot, window, programs["nan_log"])
    assert window.workbench.device == "local-sync" and window.workbench.state.mismatch is None
    assert "opened on local-sync" in window.statusBar().currentMessage()
    assert "Opening" not in panel.status_label.text()
    # A breakpoint no dispatch of this run reaches: the end of the run says so.
    never = Breakpoint(BreakpointKind.DISPATCH, ordinal=99)
    window.session_bridge.add_breakpoint(never)
    run(qtbot, window, HEALTHY)
    assert window.workbench.state.outcome == "finished"
    assert f"never stopped at: {never.describe()}" in window.statusBar().currentMessage()


def test_stop_on_a_remote_session_stops_it_without_a_crash(qtbot, main_window, programs, tmp_path, monkeypatch):
    """Shift+F5 on a run of a server's session whose kernel never returns (it cannot pause): the run is
    stopped and said so, never reported as a crash; the running line says where it runs."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    window = main_window
    bridge = window.session_bridge
    bridge.attach_remote(shlex.join([sys.executable, "-m", "app.launcher", "serve", "--stdio"]))
    spinning = tmp_path / "spinning.vmfb"
    patched_kernel_copy(programs["nan_log"], spinning, SPIN)
    panel = open_module(qtbot, window, spinning)
    assert "runs happen on the server" in window.statusBar().currentMessage()
    assert "on the server" in panel.device_label.text() and "runs on the server" in window.module_label.text()
    window.workbench.set_inputs(HEALTHY)
    with qtbot.waitSignal(bridge.stateChanged, timeout=TIMEOUT, check_params_cb=lambda s: s == "running"):
        assert window.workbench.run()
    qtbot.waitUntil(lambda: "Running on the server" in panel.status_label.text(), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: "reported" in panel.status_label.text() or "for " in panel.status_label.text(), timeout=10_000)
    with qtbot.waitSignal(bridge.crashed, timeout=TIMEOUT):
        panel.stop_action.trigger()
    assert window.workbench.state.outcome == "stopped"
    assert not panel.crash_banner.isVisible() and "crash" not in panel.status_label.text().lower()
    assert panel.status_label.text().startswith("Stopped")
    qtbot.waitUntil(lambda: bridge.state == "idle", timeout=TIMEOUT)  # a fresh server, the module reopened
    assert window.panels["run_dispatch_list"].model.paused is None


def cli_stops(vmfb: Path, inputs: tuple[str, ...], commands: list[str], tmp_path: Path) -> list[tuple]:
    """The stops ``iree-lens debug --json`` makes for ``commands``: (reason, function, pc, ordinal, when)."""
    script = tmp_path / "commands.txt"
    script.write_text("\n".join(commands) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "debug", str(vmfb), "--function=many",
         *[f"--input={i}" for i in inputs], f"--commands={script}", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    stops = []
    for line in proc.stdout.splitlines():
        stop = json.loads(line)
        dispatch = stop["dispatch"] or {}
        stops.append((stop["reason"], stop["function"], stop["pc"], dispatch.get("ordinal"), dispatch.get("when")))
    return stops


def test_the_window_stops_where_the_cli_does(qtbot, main_window, programs, tmp_path):
    """gdb's sequence of issue 35 (break 10; continue; next; reverse-next; break 5; continue) in the window's run
    state and in ``iree-lens debug --json``: the same stops, then the same end (forward after a reverse move runs
    on from where the program is, so the breakpoint at #5, behind it, is not hit)."""
    inputs = ("4xf32=0", "12")
    expected = cli_stops(
        programs["many_dispatches"], inputs,
        ["break dispatch 10", "continue", "next", "reverse-next", "break dispatch 5", "continue"], tmp_path,
    )  # fmt: skip
    window = main_window
    bridge = window.session_bridge
    open_module(qtbot, window, programs["many_dispatches"])
    bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, ordinal=10))
    seen = []

    def record() -> None:
        stop = window.workbench.state.stop
        frame = stop.location.frames[-1]
        info = window.workbench.state.paused
        seen.append((str(stop.reason), frame.function, frame.pc, info and info.ordinal, info and str(info.when)))

    run(qtbot, window, inputs, signal="stopped")
    record()
    for move in (lambda: bridge.step("over"), lambda: bridge.reverse(ReverseMode.NEXT)):
        with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT):
            move()
        record()
    bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, ordinal=5))
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as end:
        bridge.continue_()
    seen.append(("finished", end.args[0].function, None, None, None))
    assert [s[1:] for s in seen] == [e[1:] for e in expected], (seen, expected)
    assert [s[0] for s in seen[:1] + seen[-1:]] == [expected[0][0], expected[-1][0]]
    assert window.workbench.state.outcome == "finished"
