"""Dispatch navigation at model scale in the real window (issue 24): Previous Dispatch (Shift+F6) after any
sequence of Next Dispatch (F6), with and without breakpoints, lands on the dispatch before the current one;
the run's dispatch list holds every dispatch in execution order with its ordinal (names checked against
IREE's own dispatch trace on the small CNN), with a name filter, Break here and Run to here.

The scale program is the PyTorch EfficientViT-M0 export of the shared models (336 dispatches).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from support import iree_tool, model_cpu_build
from support.session import compile_program

MODELS = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
TIMEOUT = 180_000


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def efficientvit(tmp_path_factory) -> Path:
    # With IREE's dump of its executables' sources beside it: the window types the tensors from them instead
    # of rebuilding the model in the background (about 25 s of a core this test does not look at).
    folder = tmp_path_factory.mktemp("efficientvit")
    return model_cpu_build("efficientvit_m0", folder / "efficientvit_m0.vmfb", sources_beside=True).module


def open_module(qtbot, window, vmfb: Path):
    panel = window.panels["stepper"]
    window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    return panel


def act(qtbot, window, action, end: str = "stopped") -> object:
    """Trigger ``action`` (an action, or a callable); wait for the stop (or ``end``) and for the history
    answer that follows it (Shift+F6 reads it)."""
    bridge = window.session_bridge
    events: list[str] = []
    # Both recorded as they are emitted: the history answer may come in the same turn of the event loop as
    # the stop (a fast session), before waitSignal returns.
    record = lambda *_: events.append("history") if events else None  # noqa: E731 - only after the stop
    ended = lambda *_: events.append(end)  # noqa: E731
    bridge.historyChanged.connect(record)
    getattr(bridge, end).connect(ended)
    try:
        with qtbot.waitSignal(getattr(bridge, end), timeout=TIMEOUT) as done:
            action.trigger() if hasattr(action, "trigger") else action()
        qtbot.waitUntil(lambda: "history" in events, timeout=TIMEOUT)
    finally:
        bridge.historyChanged.disconnect(record)
        getattr(bridge, end).disconnect(ended)
    return done.args[0]


def ordinal_of(stop) -> int:
    info = stop.location.dispatch_info
    assert info is not None and str(info.when) == "before", stop
    return info.ordinal


def walk(qtbot, window, panel, start: int, steps: list[int]) -> int:
    """From a stop at ``start``: for each count, F6 that many times, then Shift+F6 once; returns where."""
    current = start
    for count in steps:
        for _ in range(count):
            current += 1
            assert ordinal_of(act(qtbot, window, panel.next_dispatch_action)) == current
        current -= 1
        stop = act(qtbot, window, panel.reverse.previous_dispatch_action)
        assert ordinal_of(stop) == current, f"Shift+F6 after {count} F6 should land on #{current}"
        assert window.workbench.state.paused is not None and window.workbench.state.paused.ordinal == current
    return current


def test_previous_dispatch_is_exact_at_model_scale(qtbot, main_window, efficientvit):
    window = main_window
    panel = open_module(qtbot, window, efficientvit)
    assert panel.function_combo.currentText() == "main"
    window.load_numpy_inputs(MODELS / "efficientvit_m0_x.npy")
    bridge = window.session_bridge
    # With a breakpoint before #60 (the stops land on it unless navigation passes it over).
    from engine.session.protocol import Breakpoint

    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        bridge.add_breakpoint(Breakpoint("dispatch", ordinal=60))
    stop = act(qtbot, window, window.run_function)
    assert ordinal_of(stop) == 60
    here = walk(qtbot, window, panel, 60, [2, 1, 3, 0, 5])
    assert here == 60 + 2 + 1 + 3 + 5 - 5  # each Shift+F6 undoes one F6
    # To the end: every dispatch of the run in the list, in order, with contiguous ordinals.
    runs = window.panels["run_dispatch_list"]
    act(qtbot, window, panel.continue_action, end="finished")
    ordinals = [r.ordinal for r in runs.model.rows]
    assert len(ordinals) >= 300 and ordinals == list(range(len(ordinals)))
    last = ordinals[-1]
    assert "finished" in runs.title.text() and f"{len(ordinals):,} dispatches" in runs.title.text()
    # From the end, with the breakpoint still before #60: Shift+F6 lands on the last dispatch, not #60.
    stop = act(qtbot, window, panel.reverse.previous_dispatch_action)
    assert ordinal_of(stop) == last
    # Without breakpoints: from the last one, back and forth.
    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        bridge.set_breakpoints(())
    walk(qtbot, window, panel, last, [0, 0, 1])  # Shift+F6, Shift+F6, F6 then Shift+F6
    # The list's filter and its "Run to here" (backwards: travel there).
    runs.filter_edit.setText("conv")
    runs.filter_typing.apply()  # (applied once typing pauses)
    shown = runs.proxy.rowCount()
    assert 0 < shown < len(ordinals)
    assert all("conv" in runs.proxy.index(i, 1).data().lower() for i in range(shown))
    runs.filter_edit.clear()
    assert runs.select_ordinal(100)
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as done:
        runs.run_to_button.click()
    assert ordinal_of(done.args[0]) == 100


def test_run_list_matches_iree_dispatch_trace_and_breaks_there(qtbot, main_window, tmp_path):
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"the shared models are not at {MODELS}")
    window = main_window
    vmfb = compile_program(str(source.resolve()), "llvm-cpu", tmp_path)
    traced = compile_program(str(source.resolve()), "llvm-cpu", tmp_path, "--iree-flow-trace-dispatch-tensors")
    trace = subprocess.run(
        [iree_tool("iree-run-module"), f"--module={traced}", "--function=small_cnn", "--input=1x3x16x16xf32=0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # the dispatch trace goes to stderr
        text=True,
        check=True,
    ).stdout
    expected = [line.split("::", 1)[1].rsplit(" ", 2)[0] for line in trace.splitlines() if line.endswith(" inputs ===")]
    assert expected
    panel = open_module(qtbot, window, vmfb)
    bridge = window.session_bridge
    runs = window.panels["run_dispatch_list"]
    act(qtbot, window, window.run_function, end="finished")
    assert [r.name for r in runs.model.rows] == expected
    assert [r.ordinal for r in runs.model.rows] == list(range(len(expected)))
    # Each row's Position is the instruction the history placed it at exactly, or blank: never a guess.
    marks = {m.ordinal: m for m in bridge.history.dispatches}
    for row in range(runs.model.rowCount()):
        ordinal, shown = runs.model.index(row, 0).data(Qt.ItemDataRole.UserRole), runs.model.index(row, 2).data()
        mark = marks[ordinal]
        assert shown == (f"{mark.position:,}" if mark.exact else ""), (ordinal, shown, mark)
    # Break here on #3, then Run: the run stops before #3.
    assert runs.select_ordinal(3)
    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        runs.break_button.click()
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as done:
        assert window.run_function()
    assert ordinal_of(done.args[0]) == 3
    assert runs.model.paused == 3
    # Paused at #3 in a second run of the same call: every dispatch listed in order, those after #3 from the
    # finished run and marked not reached yet.
    qtbot.waitUntil(lambda: len(runs.model.rows) == len(expected), timeout=TIMEOUT)
    assert [r.name for r in runs.model.rows] == expected
    assert [r.ordinal for r in runs.model.rows] == list(range(len(expected)))
    for row, r in enumerate(runs.model.rows):
        assert r.reached == (r.ordinal <= 3), r
        if not r.reached:
            assert runs.model.index(row, 2).data() == "not reached yet"
            assert "not reached yet" in runs.model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert "not reached yet" in runs.title.text()
    # Run to here, forward: #5, and the temporary breakpoint is gone after.
    assert runs.select_ordinal(3)
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as done:
        runs.run_to_here(5)
    assert ordinal_of(done.args[0]) == 5
    qtbot.waitUntil(lambda: all(bp.ordinal != 5 for bp in bridge.breakpoints), timeout=5_000)
    assert panel is window.panels["stepper"]


def test_a_capture_bundle_list_has_every_dispatch_and_a_filter(qtbot, tmp_path):
    from app.views.dispatch_run_list import DispatchRunView
    from engine.dispatch.capture import capture_debug

    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"the shared models are not at {MODELS}")
    vmfb = compile_program(str(source.resolve()), "llvm-cpu", tmp_path)
    capture_debug(vmfb, "small_cnn", [f"@{MODELS / 'small_cnn_x.npy'}"], tmp_path / "bundle")
    view = DispatchRunView()
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    assert view.open_bundle(tmp_path / "bundle")
    names = [e.name for e in view.model.entries]
    assert [e.ordinal for e in view.model.entries] == list(range(len(names))) and len(names) >= 5
    view.filter_edit.setText("conv")
    view.filter_typing.apply()  # (applied once typing pauses)
    shown = [view.proxy.index(r, 1).data() for r in range(view.proxy.rowCount())]
    assert shown == [n for n in names if "conv" in n.lower()] and 0 < len(shown) < len(names)
    with qtbot.waitSignal(view.dispatchSelected, timeout=10_000) as picked:
        view.table.setCurrentIndex(view.proxy.index(1, 0))
    assert picked.args[0].name == shown[1]  # the filtered row's own dispatch, not the model's row 1
    assert view.table.columnWidth(1) > 200  # the names keep their room


def test_reverse_continue_to_a_nan_stop_parks_in_the_dispatch(qtbot, main_window, tmp_path):
    window = main_window
    vmfb = compile_program("nan_log", "llvm-cpu", tmp_path)
    panel = open_module(qtbot, window, vmfb)
    bridge = window.session_bridge
    from engine.session.protocol import Breakpoint

    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        bridge.add_breakpoint(Breakpoint("nan", when="after"))
    panel.set_inputs(("4x8xf32=1", "4x8xf32=2"))
    stops = [act(qtbot, window, window.run_function)]
    ended: list = []
    bridge.stopped.connect(ended.append)
    bridge.finished.connect(ended.append)
    while True:  # forward through every NaN stop to the end
        ended.clear()
        panel.continue_action.trigger()
        qtbot.waitUntil(lambda: bool(ended), timeout=TIMEOUT)
        if bridge.state == "idle":
            break
        stops.append(ended[0])
        assert len(stops) < 10
    last = stops[-1].location.dispatch_info.ordinal
    # Back to the last NaN stop: parked in it (after it ran), so its tensors can be read.
    failures: list = []
    bridge.failed.connect(failures.append)
    from engine.session.protocol import Tensors

    with qtbot.waitSignal(bridge.answered, timeout=TIMEOUT, check_params_cb=lambda a: isinstance(a, Tensors)) as read:
        panel.reverse.reverse_continue_action.trigger()
    answer = read.args[0]
    info = answer.info
    assert info.ordinal == last and str(info.when) == "after" and answer.tensors
    assert not failures, failures
    qtbot.waitUntil(lambda: window.documents.currentWidget() is window.documents.document("paused-dispatch"), timeout=10_000)
    assert window.workbench.state.paused is not None and window.workbench.state.paused.ordinal == last
