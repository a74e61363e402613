"""Divergence in the real window: a diverge breakpoint against a capture bundle (set in the stepper's
breakpoint editor) stops after exactly the broken dispatch, and the run's dispatch list carries each judged
dispatch's verdict (colour, Verdict column, tooltip, legend); a capture document compared with another
run's capture colours its rows the same way and the inspector's Compare tab shows numerics' metrics.

The program packs tensors into one read-write binding (an in-place concatenation); the broken build is
IREE's own ``--iree-hal-substitute-executable-source`` with ``math.exp`` made ``math.tanh`` in dispatch 1."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support import broken_build, compile_for

from app.views.verdict_style import verdict_colour
from engine.dispatch.bundle import Bundle
from engine.dispatch.capture import capture_debug
from engine.dispatch.typed_tensors import NO_SOURCES

PROGRAM = Path(__file__).resolve().parents[1] / "diverge_programs" / "packed_concat.mlir"
TIMEOUT = 180_000


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The llvm-cpu build broken in dispatch 1 (alone in its folder: its tensors untyped), captures of it and
    of a vmvx build (the reference: another target, rounding apart; its executable sources beside it, so its
    capture is typed), and their inputs."""
    tmp = tmp_path_factory.mktemp("diverge_window")
    rng = np.random.default_rng(0)
    a, b = tmp / "a.npy", tmp / "b.npy"
    np.save(a, (rng.standard_normal((16, 24)) * 2).astype(np.float32))
    np.save(b, rng.standard_normal((16, 40)).astype(np.float32))
    inputs = [f"@{a}", f"@{b}"]
    (tmp / "vmvx").mkdir()
    vmvx = compile_for(PROGRAM, tmp / "vmvx" / "vmvx.vmfb", "vmvx",
                       f"--iree-hal-dump-executable-sources-to={tmp / 'vmvx' / 'sources'}")  # fmt: skip
    (tmp / "work").mkdir()
    (tmp / "live").mkdir()
    broken = broken_build(PROGRAM, tmp / "work", "llvm-cpu", "main_dispatch_1", "math.exp", "math.tanh")
    broken = Path(shutil.copy(broken, tmp / "live" / "broken.vmfb"))
    reference = capture_debug(vmvx, "main", inputs, tmp / "vmvx_bundle")
    assert any(e.tensors_from == "interface" for e in Bundle(tmp / "vmvx_bundle").dispatches), reference
    capture_debug(broken, "main", inputs, tmp / "broken_bundle")
    (tmp / "healthy").mkdir()
    healthy = compile_for(PROGRAM, tmp / "healthy" / "cpu.vmfb", "llvm-cpu")
    # Untyped captures (each binding's bytes) of the healthy build and of the vmvx build.
    capture_debug(healthy, "main", inputs, tmp / "healthy_bundle")
    capture_debug(vmvx, "main", inputs, tmp / "vmvx_bytes_bundle", sources=NO_SOURCES)
    return broken, tmp / "vmvx_bundle", tmp / "broken_bundle", inputs, healthy


def _row(model, ordinal: int) -> int:
    row = model.row_of(ordinal)
    assert row is not None, f"#{ordinal} is not listed"
    return row


def _verdict_cells(model, ordinal: int) -> tuple[str, str, str]:
    """(Verdict column text, the name cell's text colour, the name cell's tooltip) of dispatch ``ordinal``."""
    row = _row(model, ordinal)
    name = model.index(row, 1)
    verdict = model.index(row, model.columnCount() - 1).data()
    brush = name.data(Qt.ItemDataRole.ForegroundRole)
    return verdict, brush.color().name() if brush is not None else "", name.data(Qt.ItemDataRole.ToolTipRole)


def _open_with_diverge_breakpoint(qtbot, window, module: Path, inputs: list[str], reference: Path):
    """Open ``module`` in the window with ``inputs`` and a diverge breakpoint on ``reference``, added as a user
    adds it: kind "Diverges from…", the bundle folder, Add."""
    panel = window.panels["stepper"]
    window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(module)
    panel.set_inputs(inputs)
    editor = panel.breakpoints_view
    editor.kind.setCurrentIndex(editor.kind.findData("diverge"))
    editor.name.setText(str(reference))
    with qtbot.waitSignal(window.session_bridge.breakpointsChanged, timeout=TIMEOUT):
        editor.add_button.click()
    assert [bp.kind for bp in window.session_bridge.breakpoints] == ["diverge"]
    return panel


def test_a_healthy_build_runs_to_the_end_with_every_dispatch_judged(qtbot, main_window, builds):
    """llvm-cpu against the vmvx capture: no stop, and every row says how it agreed (none diverged)."""
    _, reference, _, inputs, healthy = builds
    window = main_window
    _open_with_diverge_breakpoint(qtbot, window, healthy, inputs, reference)
    with qtbot.waitSignal(window.session_bridge.finished, timeout=TIMEOUT) as done:
        assert window.run_function()
    assert dict(done.args[0].verdicts).keys() == {0, 1, 2, 3, 4}
    runs = window.panels["run_dispatch_list"]
    qtbot.waitUntil(lambda: len(runs.model.rows) == 5, timeout=TIMEOUT)
    for ordinal in range(5):
        text, colour, tip = _verdict_cells(runs.model, ordinal)
        assert text in ("exact", "within rounding"), (ordinal, text)
        assert colour == verdict_colour(text.replace(" ", "_")).name() and f"verdict: {text}" in tip
    assert "within rounding" in {_verdict_cells(runs.model, o)[0] for o in range(5)}  # rounding apart
    assert runs.legend.isVisible() and "diverged" not in runs.title.text()


def test_diverge_breakpoint_against_a_bundle_colours_the_run_list(qtbot, main_window, builds):
    """The reference is a typed capture (the vmvx build's sources), the live run untyped: the live dispatch
    is typed by the reference's interface, its in-place outputs judged on the elements it changed."""
    broken, reference, _, inputs, _ = builds
    window = main_window
    panel = _open_with_diverge_breakpoint(qtbot, window, broken, inputs, reference)
    bridge = window.session_bridge
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as done:
        assert window.run_function()
    stop = done.args[0]
    info, divergence = stop.location.dispatch_info, stop.detail.divergence
    assert info is not None and info.ordinal == 1 and divergence is not None and divergence.ordinal == 1
    assert divergence.name.startswith("main_dispatch_1_")
    runs = window.panels["run_dispatch_list"]
    qtbot.waitUntil(lambda: None not in (runs.model.row_of(0), runs.model.row_of(1)), timeout=TIMEOUT)  # the history
    # The broken dispatch: red, its verdict written and named with its metrics in the tooltip.
    text, colour, tip = _verdict_cells(runs.model, 1)
    assert text == "diverged" and colour == verdict_colour("diverged").name()
    assert "verdict: diverged" in tip and "max abs" in tip
    # The one before it agreed (another target: exact or within rounding), in that verdict's colour.
    text, colour, tip = _verdict_cells(runs.model, 0)
    expected = dict(divergence.verdicts)[0]
    assert expected in ("exact", "within_rounding") and text == expected.replace("_", " ")
    assert colour == verdict_colour(expected).name() and f"verdict: {text}" in tip
    assert runs.legend.isVisible() and "within rounding" in runs.legend.text()
    assert "diverged from the reference at #1" in runs.title.text()
    # The Run Dispatches document (the dispatches the run reported, the paused one's tensors) the same.
    live = window.panels["run_dispatches"]
    qtbot.waitUntil(lambda: live.model.row_of(1) is not None, timeout=TIMEOUT)
    text, colour, tip = _verdict_cells(live.model, 1)
    assert text == "diverged" and colour == verdict_colour("diverged").name() and "verdict: diverged" in tip
    assert not live.legend.isHidden()
    # To the end: dispatches after the stop were not judged (it fires once a call), and say so.
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT):
        panel.continue_action.trigger()
    qtbot.waitUntil(lambda: runs.model.row_of(4) is not None, timeout=TIMEOUT)
    text, colour, tip = _verdict_cells(runs.model, 4)
    assert text == "not compared" and "verdict: not compared" in tip
    # A new run judges afresh: its own stop's verdicts replace the last run's.
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as done:
        assert window.run_function()
    assert dict(done.args[0].detail.divergence.verdicts).keys() == {0, 1}
    assert runs.model.verdicts.keys() == {0, 1}


def test_capture_compared_with_another_run_colours_its_rows(qtbot, main_window, builds):
    _, reference, capture, _, _ = builds
    window = main_window
    window.open_file(capture)
    from app.views.dispatch_run_list import DispatchRunView

    views = window.findChildren(DispatchRunView)
    assert len(views) == 1, views
    view = views[0]
    assert view.model.rowCount() == 5
    view.set_reference(reference)
    qtbot.waitUntil(lambda: len(view.model.verdicts) == 5, timeout=TIMEOUT)
    marks = view.model.verdicts
    # Dispatch 1 is the broken one (its inputs agreed); the copy of its output into the slab (#3) and the
    # reduction of the slab (#4) diverge because it did; the copy of dispatch 0's output (#2) agrees.
    assert marks[1].verdict == "diverged" and not marks[1].inherited
    assert marks[0].verdict in ("exact", "within_rounding") and marks[2].verdict in ("exact", "within_rounding")
    assert all(marks[o].verdict == "diverged" and marks[o].inherited for o in (3, 4)), marks
    text, colour, tip = _verdict_cells(view.model, 1)
    assert text == "diverged" and colour == verdict_colour("diverged").name() and "verdict: diverged" in tip
    text, colour, tip = _verdict_cells(view.model, 4)
    assert text == "diverged (inputs differed)" and colour == verdict_colour("diverged", inherited=True).name()
    assert view.legend.isVisible() and "first diverged with agreeing inputs: #1" in view.title.text()
    # The inspector's Compare tab on the broken dispatch's output: numerics' verdict and metrics.
    view.table.setCurrentIndex(view.proxy.index(1, 0))
    inspector = view.inspector
    outputs = [i for i in range(inspector.tensor_list.count()) if inspector.tensor_list.item(i).text().startswith("output")]
    inspector.tensor_list.setCurrentRow(outputs[0])
    summary = inspector.compare_summary.text()
    assert summary.startswith("diverged") and "max abs error" in summary and "rule:" in summary


def test_untyped_captures_compare_as_their_element_types(qtbot, main_window, builds):
    """Two untyped captures (bytes) of healthy builds for two targets: every row agrees, the in-place copies
    (``slow_memcpy``, no type in the name) read as the f32 they copy; the Compare tab reads them the same way."""
    _, _, _, _, healthy = builds
    tmp = healthy.parent.parent
    window = main_window
    window.open_file(tmp / "healthy_bundle")
    from app.views.dispatch_run_list import DispatchRunView

    [view] = window.findChildren(DispatchRunView)
    assert all(e.tensors_from == "bindings" for e in view.model.entries)
    view.set_reference(tmp / "vmvx_bytes_bundle")
    qtbot.waitUntil(lambda: len(view.model.verdicts) == 5, timeout=TIMEOUT)
    labels = [_verdict_cells(view.model, o)[0] for o in range(5)]
    assert set(labels) <= {"exact", "within rounding"} and "within rounding" in labels, labels
    copies = [o for o in range(5) if view.model.entries[o].name.endswith("slow_memcpy")]
    assert copies and all(view.read_as.get(o) == "f32" for o in copies)
    view.table.setCurrentIndex(view.proxy.index(copies[-1], 0))
    inspector = view.inspector
    items = [inspector.tensor_list.item(i).text() for i in range(inspector.tensor_list.count())]
    output = next(i for i, t in enumerate(items) if t.startswith("output"))
    assert "bytes read as f32" in items[output], items
    inspector.tensor_list.setCurrentRow(output)
    assert inspector.compare_summary.text().startswith("match:"), inspector.compare_summary.text()
