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


def test_the_variants_diff_names_its_sides_a_and_b(qtbot, main_window):
    """The compile panel's diff of the two variants named each side by its scratch folder
    ("executable-targets — llvm-cpu (iree-lens-compile-p8rxgvfr)"): both llvm-cpu, A and B not said."""
    panel = main_window.panels["compile"]
    panel.set_source(sample_path("mlp"))
    panel.variant_b.trace.setChecked(True)
    assert len(panel.compile_two_variants()) == 2
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=TIMEOUT)
    view = panel.diff_view
    assert view.diff is not None
    left, right = view.left_title.text(), view.right_title.text()
    labels = [label for label, _ in panel.compilations]
    a = next(k for k, label in enumerate(labels) if label.startswith("A: ")) + 1
    b = next(k for k, label in enumerate(labels) if label.startswith("B: ")) + 1
    assert left.endswith(f"— {a}. A: {panel.options.describe()}"), left
    assert right.endswith(f"— {b}. B: {panel.variant_b.describe()}"), right
