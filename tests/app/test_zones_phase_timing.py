"""The phase timeline's timing as a trace: "Open in Zones" shows it in the window's Zones document, and
"Compare with…" opens an A/B of two real compilations with the passes that got slower first."""

from __future__ import annotations

import subprocess

import pytest
from PySide6.QtCore import Qt
from support.app import save_screenshot

from engine.compiler import PHASES
from engine.compiler.job import iree_compile_path
from engine.compiler.timing import parse_timing, split_timing_output
from engine.samples import sample_path

FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
         "--iree-llvmcpu-target-cpu=host"]  # fmt: skip


@pytest.fixture(scope="module")
def two_reports(tmp_path_factory):
    out = []
    for k, extra in enumerate(([], ["--iree-opt-level=O0"])):
        d = tmp_path_factory.mktemp(f"timing{k}")
        proc = subprocess.run(
            [iree_compile_path(), str(sample_path("mlp")), *FLAGS, *extra, f"--dump-compilation-phases-to={d}",
             "--mlir-timing", "--mlir-output-format=json", "-o", str(d / "out.vmfb")],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        out.append(split_timing_output(proc.stderr)[1])
    return out


def _pass_totals(data) -> dict[str, float]:
    """Wall seconds per pass name, summed over the raw JSON tree (independently of the trace model)."""
    totals: dict[str, float] = {}

    def walk(entries):
        for e in entries:
            if not e or e.get("name") in ("Rest", "Total"):
                continue
            totals[e["name"]] = totals.get(e["name"], 0.0) + max(0.0, e["wall"]["duration"])
            walk(e.get("passes", ()))

    walk(data)
    return totals


def test_open_in_zones_and_compare(main_window, qtbot, two_reports):
    timeline = main_window.show_panel("compile").timeline
    assert not timeline.zones_button.isEnabled()
    ra, rb = (parse_timing(d) for d in two_reports)
    timeline.set_timing(ra, list(PHASES), label="default")
    qtbot.mouseClick(timeline.zones_button, Qt.MouseButton.LeftButton)
    zones = main_window.show_panel("zones")
    assert zones.trace is not None and zones.trace.source == "default"
    # The axis is MLIR's durations laid end to end, longer than the compile took: said, with the wall time.
    from app.views.zones_timeline import format_ns

    wall = f"{format_ns(int(ra.total_wall_s * 1e9))} wall"
    assert "1 track, " in zones.summary.text() and "laid out end to end over" in zones.summary.text()
    assert zones.summary.text().endswith(wall), (zones.summary.text(), wall)
    stats = {s.name: s.total_ns for s in zones.stats}
    expected = _pass_totals(two_reports[0])
    assert set(stats) == set(expected)
    for name, seconds in expected.items():
        assert stats[name] == pytest.approx(seconds * 1e9, abs=2e3 + seconds * 1e3)
    save_screenshot(main_window, "zones2_open_in_zones")

    # The same compilation shown by a second timeline (the compile panel and its Phases document) keeps its
    # name: it was "compilation 2" the second time.
    unnamed = timeline.__class__()
    unnamed.set_timing(ra, list(PHASES))
    assert unnamed.label == "default"

    # B was shown in this session too, so the compare menu offers it.
    other = timeline.__class__()
    other.set_timing(rb, list(PHASES), label="O0")
    timeline._fill_compare_menu()
    labels = [a.text() for a in timeline.compare_menu.actions() if a.text()]
    assert "O0" in labels and "default" not in labels
    next(a for a in timeline.compare_menu.actions() if a.text() == "O0").trigger()
    view = timeline.compare_view
    assert view is not None
    diffs = view.diffs
    top = view.top_names(5)
    by_name = {d.name: d.total_b_ns - d.total_a_ns for d in diffs}
    # The table's first rows are the passes that got slower the most, in order.
    assert [by_name[n] for n in top] == sorted(by_name.values(), reverse=True)[: len(top)]
    assert set(by_name) == set(expected) | set(_pass_totals(two_reports[1]))
    save_screenshot(view.window(), "zones2_compile_ab")
    view.window().close()
    other.deleteLater()
