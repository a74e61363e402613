"""The phase timeline built from a real ``--mlir-timing --mlir-output-format=json`` report."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.views.phase_timeline import PhaseTimeline
from app.views.phase_timing_layout import ROW_PHASE, layout_report
from engine.compiler import PHASES
from engine.compiler.job import iree_compile_path
from engine.compiler.timing import parse_timing, split_timing_output
from engine.samples import sample_path


@pytest.fixture(scope="module")
def timing_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("timing")
    proc = subprocess.run(
        [iree_compile_path(), str(sample_path("mlp")), "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
         f"--dump-compilation-phases-to={out}", "--mlir-timing", "--mlir-output-format=json",
         "-o", str(out / "out.vmfb")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    _, data = split_timing_output(proc.stderr)
    assert data is not None
    return data


def _top_level(data):
    return [e for e in data if e and e.get("name") not in ("Rest", "Total")]


def test_layout_splits_phases_at_the_dumps(timing_json):
    report = parse_timing(timing_json)
    lay = layout_report(report, list(PHASES))
    top = _top_level(timing_json)
    # independently: the passes up to each DumpModulePass, summed from the raw JSON
    sums, acc = [], 0.0
    for e in top:
        acc += max(0.0, e["wall"]["duration"])
        if e["name"] == "DumpModulePass":
            sums.append(acc)
            acc = 0.0
    assert len(sums) == len(PHASES)
    phase_rows = np.flatnonzero(lay.row == ROW_PHASE)
    # The axis is wall time: when the top-level entries add up to more than IREE's total (threads overlapped),
    # every phase is drawn scaled by the same factor; what IREE measured stays in ``measured``.
    top_sum = sum(max(0.0, e["wall"]["duration"]) for e in top)
    total = report.total_wall_s
    factor = min(1.0, total / top_sum) if total > 0 else 1.0
    measured = {lay.names[i]: float(lay.measured[i]) for i in phase_rows}
    drawn = {lay.names[i]: float(lay.duration[i]) for i in phase_rows}
    for name, s in zip(PHASES, sums):
        assert measured[name] == pytest.approx(s, abs=1e-9)
        assert drawn[name] == pytest.approx(s * factor, abs=1e-9)
    # passes of depth 1 are the top-level entries, laid end to end from 0, ending at the wall time
    p1 = np.flatnonzero(lay.row == 1)
    assert len(p1) == len(top)
    assert lay.span == pytest.approx(min(top_sum, total) if total > 0 else top_sum)
    # nested rectangles stay inside their parents even where threads overlapped
    child = np.flatnonzero(lay.parent >= 0)
    par = lay.parent[child]
    assert np.all(lay.start[child] >= lay.start[par] - 1e-9)
    assert np.all(lay.end[child] <= lay.end[par] + 1e-9)
    # IREE's "Rest" (its total less the top-level passes; negative where threads overlapped) is kept as
    # measured and never drawn as a rectangle.
    assert lay.rest_wall_s == report.rest_wall_s
    [rest] = [e["wall"]["duration"] for e in timing_json if e and e.get("name") == "Rest" and "passes" not in e]
    assert report.rest_wall_s == rest
    assert "Rest" not in list(lay.names)
    assert lay.start.tolist() == sorted(lay.start.tolist())


def test_clicking_a_phase_emits_its_name(qtbot, timing_json):
    report = parse_timing(timing_json)
    w = PhaseTimeline()
    qtbot.addWidget(w)
    w.resize(1200, 260)
    w.set_timing(report, list(PHASES))
    w.show()
    qtbot.waitExposed(w)
    for phase in ("stream", "hal"):
        pos = w.phase_scene_pos(phase)
        with qtbot.waitSignal(w.phaseClicked, timeout=2000) as blocker:
            qtbot.mouseClick(w.plot.viewport(), Qt.MouseButton.LeftButton, pos=pos)
        assert blocker.args == [phase]
    # the hover text names a pass and its time
    lay = w.timeline_layout()
    i = int(np.flatnonzero(lay.row == 1)[0])
    assert lay.names[i] in w.item.describe(i)


def test_paint_culls_to_the_visible_range(qtbot, timing_json):
    report = parse_timing(timing_json)
    w = PhaseTimeline()
    qtbot.addWidget(w)
    w.resize(1200, 260)
    w.set_timing(report, list(PHASES))
    w.show()
    qtbot.waitExposed(w)
    w.grab()
    full = w.item.painted_count
    lay = w.timeline_layout()
    i = lay.phase_rect("stream")
    w.plot.getViewBox().setXRange(lay.start[i], lay.start[i] + lay.duration[i] / 4, padding=0)
    w.grab()
    expected = len(lay.visible(lay.start[i], lay.start[i] + lay.duration[i] / 4))
    assert 0 < w.item.painted_count <= expected < len(lay.names)
    assert full > 0
