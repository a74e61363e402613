"""The phase timeline says what IREE measured, not the width it draws, and labels only rows that fit.

Walk (squeezenet1_1.mlir, Compile & Phases, 1366x768 and 1920x1080): the passes added up to 26.4 s in an
11.4-s compile (pipelines on several threads), so every phase was drawn scaled by 0.43; the phase labels read
the drawn widths as if measured ("vm 27.0 ms" for a phase whose passes took 63 ms), the axis read "time (s)"
for passes laid end to end, and in the compile panel's short plot the labels of three rows were painted over
one another."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QApplication

from app.views.phase_timeline import PhaseTimeline, format_seconds
from app.views.phase_timing_layout import ROW_PHASE
from engine.compiler.timing import PassTiming, TimingReport


def _report() -> TimingReport:
    """Two phases: ``input`` with a pipeline timed on several threads (4 s summed), ``vm`` sequential."""
    inner = PassTiming("Canonicalizer", 4.0, 4.0)
    for k in range(6):  # rows 1-8: as deep as IREE's nested pipelines go
        name = f"'op{k}' Pipeline" if k < 5 else "'func.func' Pipeline"
        inner = PassTiming(name, 4.0, 4.0, (inner,))
    pipeline = inner
    passes = (
        pipeline,
        PassTiming("DumpModulePass", 0.5, 0.5),
        PassTiming("ConvertToVMPass", 0.063, 0.063),
        PassTiming("DumpModulePass", 0.437, 0.437),
    )
    top = sum(p.wall_s for p in passes)
    return TimingReport(passes, rest_wall_s=2.5 - top, rest_user_s=0.0, total_wall_s=2.5, total_user_s=0.0)


def _timeline(qtbot, height: int) -> PhaseTimeline:
    w = PhaseTimeline()
    qtbot.addWidget(w)
    w.resize(900, height)
    w.set_timing(_report(), ["input", "vm"], label="walk")
    w.show()
    qtbot.waitExposed(w)
    w.grab()
    return w


def test_a_phase_reads_what_iree_measured(qtbot):
    w = _timeline(qtbot, 260)
    lay = w.timeline_layout()
    phases = {lay.names[i]: int(i) for i in np.flatnonzero(lay.row == ROW_PHASE)}
    vm = phases["vm"]
    assert lay.scaled[vm] and lay.duration[vm] < 0.5  # drawn scaled: 2.5 s of wall for 5 s of passes
    assert w.item.label(vm) == "vm  Σ 500.0 ms"  # ConvertToVMPass and its dump, as IREE timed them (Σ: scaled)
    assert format_seconds(lay.duration[vm]) not in w.item.label(vm)
    tip = w.item.describe(vm)
    assert "500.0 ms" in tip and "scaled" in tip and format_seconds(lay.duration[vm]) in tip
    # The axis says the passes are laid end to end, not when they ran.
    axis = w.plot.getPlotItem().getAxis("bottom").labelText
    assert "end to end" in axis
    assert w.item.labelled_count > 0


def test_rows_thinner_than_the_text_are_not_labelled(qtbot):
    w = _timeline(qtbot, 120)  # the compile panel's plot at 1366x768: eight rows in ~45 px
    QApplication.processEvents()
    w.grab()
    assert w.item.painted_count > 0
    assert w.item.labelled_count == 0
