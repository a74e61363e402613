"""Compile two variants: each variant's Phases document says which it is.

Walk (small_cnn.mlir, Compile & Phases, Variant B with dispatch tracing, Compile two variants, 1366x768): two
more documents titled "Phases — small_cnn.mlir", as the one the program opened with; nothing told A from B.
They are named as the compile panel lists them ("A: llvm-cpu", "B: llvm-cpu traced")."""

from __future__ import annotations

from engine.samples import sample_path

TIMEOUT = 180_000


def test_each_variant_names_its_phases_document(qtbot, main_window):
    window = main_window
    panel = window.panels["compile"]
    panel.set_source(sample_path("mlp"))
    panel.variant_b.trace.setChecked(True)
    runners = panel.compile_two_variants()
    assert len(runners) == 2
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=TIMEOUT)

    def phases() -> list[str]:
        return [t for t in window.documents.titles() if t.startswith("Phases")]

    qtbot.waitUntil(lambda: len(phases()) == 2, timeout=10_000)
    a = panel.options.describe()
    b = panel.variant_b.describe()
    assert sorted(phases()) == [f"Phases — mlp.mlir (A: {a})", f"Phases — mlp.mlir (B: {b})"], phases()
