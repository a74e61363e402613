"""The application's plumbing: the engine worker, the current-position context, the panel registry."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtWidgets import QLabel

from app.context import LensContext, LoadedModule, Position
from app.panels import PANELS, PanelSpec, register_panel
from app.workers import EngineWorker, TaskState
from engine.errors import VmfbFormatError


@pytest.fixture
def worker(qapp):
    w = EngineWorker()
    yield w
    w.shutdown()


def test_worker_delivers_results_on_the_gui_thread(qtbot, worker):
    got = []
    with qtbot.waitSignal(worker.resultReady, timeout=5000):
        worker.submit(
            lambda a, b: a * b, 6, 7, on_result=lambda v: got.append((v, threading.current_thread()))
        )
    qtbot.waitUntil(lambda: bool(got))
    assert got == [(42, threading.main_thread())]


def test_newer_request_with_same_tag_drops_the_queued_one(qtbot, worker):
    gate = threading.Event()
    ran: list[str] = []
    done: list[str] = []

    def job(name: str) -> str:
        if name == "blocker":
            gate.wait(5)
        ran.append(name)
        return name

    worker.submit(job, "blocker", tag="other", on_result=done.append)
    dropped = []
    worker.dropped.connect(lambda d: dropped.append(d))
    first = worker.submit(job, "first", tag="scrub", on_result=done.append)
    worker.submit(job, "second", tag="scrub", on_result=done.append)
    worker.submit(job, "third", tag="scrub", on_result=done.append)
    gate.set()
    qtbot.waitUntil(lambda: len(done) == 2, timeout=5000)
    qtbot.wait(50)
    assert ran == ["blocker", "third"] and done == ["blocker", "third"]
    assert first in [d[0] for d in dropped]


def test_running_job_with_same_tag_is_cancelled(qtbot, worker):
    started = threading.Event()
    outcome = []

    def slow(task: TaskState) -> str:
        started.set()
        for _ in range(500):
            task.check()
            threading.Event().wait(0.01)
        return "finished"

    worker.submit(slow, tag="t", on_result=outcome.append)
    assert started.wait(5)
    worker.submit(lambda: "newer", tag="t", on_result=outcome.append)
    qtbot.waitUntil(lambda: outcome == ["newer"], timeout=5000)


def test_errors_arrive_as_messages(qtbot, worker):
    errors = []

    def bad():
        raise VmfbFormatError(
            "function bytecode is outside the file", path="x.vmfb", where="function_descriptors[2]"
        )

    worker.submit(bad, on_error=errors.append)
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    assert errors[0].message == "function bytecode is outside the file at function_descriptors[2] in x.vmfb"
    assert "Traceback" in errors[0].details

    worker.submit(lambda: 1 // 0, on_error=errors.append)
    qtbot.waitUntil(lambda: len(errors) == 2, timeout=5000)
    assert errors[1].message.startswith("ZeroDivisionError")


def test_context_broadcasts_changes_once(qtbot):
    ctx = LensContext()
    seen: list[tuple[str, object]] = []
    for name in ("module", "function", "pc", "dispatch", "phase", "time", "position"):
        getattr(ctx, f"{name}Changed").connect(lambda v, n=name: seen.append((n, v)))
    ctx.set_function("main", pc=4)
    assert seen == [("function", "main"), ("pc", 4), ("position", Position(function="main", pc=4))]
    seen.clear()
    ctx.set_function("main", pc=4)  # no change, no signal
    ctx.set_pc(4)
    assert seen == []
    ctx.set_phase("flow")
    assert [n for n, _ in seen] == ["phase", "position"]
    seen.clear()
    # A new module resets what was selected inside the old one, but not the phase.
    from pathlib import Path

    ctx.set_module(LoadedModule(Path("a.vmfb"), object()))
    assert [n for n, _ in seen] == ["module", "function", "pc", "position"]
    assert ctx.function is None and ctx.pc is None and ctx.phase == "flow"
    with pytest.raises(TypeError):
        ctx.set_position(nonsense=1)


def test_registered_panel_gets_a_dock_and_a_view_toggle(make_main_window):
    received = []

    def factory(services):
        received.append(services)
        label = QLabel("hello")
        services.context.functionChanged.connect(label.setText)
        return label

    register_panel(PanelSpec("test-panel", "Test Panel", factory, area="right"))
    try:
        window = make_main_window()
    finally:
        PANELS[:] = [p for p in PANELS if p.id != "test-panel"]
    assert received and received[0].context is window.context
    dock = window.docks["test-panel"]
    assert dock.objectName() == "dock-test-panel" and dock.isVisible()
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert "Test Panel" in [a.text() for a in view_menu.actions()]
    window.context.set_function("f")
    assert window.panels["test-panel"].text() == "f"
