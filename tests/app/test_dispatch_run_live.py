"""The paused dispatch in the real MainWindow: break at dispatch 1 of a compiled program, the "Dispatch #1"
document shows the tensors the session typed (from the executables' sources beside the module; untyped, as
exactly the bound bytes, without them) with values equal to what numpy computes; the CLI's save-tensors at
the same stop writes the same tensors; the Run Dispatches list fills as the run goes."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support import iree_compile
from support.app import TIMEOUT, add_breakpoint, open_in_stepper, save_screenshot
from support.session import PROGRAMS, compile_program


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def test_break_at_dispatch_1_without_sources_shows_exactly_the_bound_bytes(qtbot, main_window, tmp_path):
    # Plain iree-compile of a copy of the program that is then removed: no sources anywhere, and nothing to
    # rebuild them from (a rebuild of the program its debug locations name would type it, rightly).
    copy = tmp_path / "gone" / "nan_log.mlir"
    copy.parent.mkdir()
    shutil.copy(PROGRAMS / "nan_log.mlir", copy)
    vmfb = compile_program(str(copy), "llvm-cpu", tmp_path)
    copy.unlink()
    a = (np.arange(32, dtype=np.float32).reshape(4, 8) / 4 + 2).astype(np.float32)
    b = np.full((4, 8), 0.5, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    panel = open_in_stepper(qtbot, main_window, vmfb)
    runs = main_window.panels["run_dispatches"]
    add_breakpoint(qtbot, panel, "dispatch", "1", "after")
    panel.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    view = runs.paused_view
    assert view is not None
    documents = main_window.documents
    assert documents.currentWidget() is view
    assert documents.tabToolTip(documents.currentIndex()) == f"#1 {view.info.export}"  # ordinal first: read when cut
    # Dispatch 1 computes log(a - b). Without sources nothing says its shape: each binding is shown as the
    # bytes it binds, an input (unchanged) or an output (written), never a shape guessed from IREE's name.
    assert "untyped" in view.header.text() and "types from name" not in view.header.text()
    # The header (why untyped, what would type it) is at most five lines tall, scrolled beyond.
    assert view.header_area.height() <= view.header_max == view.header.fontMetrics().lineSpacing() * 5 + 6
    # ... and no taller than its text: two lines take two lines' room, not five.
    view.set_header("one\ntwo")
    assert view.header_area.height() < view.header.fontMetrics().lineSpacing() * 3
    view.set_header("\n".join(str(k) for k in range(9)))
    assert view.header_area.height() == view.header_max
    view.set_header("\n".join(view.lines))
    by_role = {t.role: t for t in view.tensors}
    assert set(by_role) == {"input", "output"}
    for role, expected in (("input", a - b), ("output", np.log(a - b))):
        t = by_role[role]
        assert t.source == "untyped" and t.array.dtype == np.uint8
        assert t.array.size == view.info.bindings[t.binding].length  # the whole bound range, no more
        np.testing.assert_allclose(t.array.view(np.float32)[: expected.size], expected.ravel(), rtol=1e-6)
    inspector = view.inspector
    assert inspector.tensor_list.count() == 2
    assert "untyped" in inspector.tensor_list.item(1).text()
    ordinals = [e.ordinal for e in runs.model.entries]
    assert 1 in ordinals
    entry = runs.model.entries[ordinals.index(1)]
    assert entry.health == "-" and entry.workgroups == list(view.info.workgroup_count)  # bytes: not judged
    with qtbot.waitSignal(runs.bridge.finished, timeout=TIMEOUT):
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    assert "finished" in runs.title.text()


def test_a_program_compiled_in_the_app_is_typed_by_its_executable_sources(qtbot, main_window, tmp_path):
    from engine.compiler.job import compile_program as compile_in_app
    from engine.compiler.request import CompileRequest
    from engine.samples import sample_path

    compilation = compile_in_app(CompileRequest.from_file(sample_path("mlp")), out_dir=tmp_path / "c")
    assert compilation.ok, compilation.stderr()
    main_window.context.set_compilation(compilation)
    x = (np.arange(32, dtype=np.float32).reshape(2, 16) / 8 - 1).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    b1 = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, -1.5, 2.0, -2.0, 0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 0.1,
                   0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8], np.float32)  # fmt: skip
    hidden = np.maximum(x @ np.full((16, 32), 0.125, np.float32) + b1, 0)
    out = hidden @ np.full((32, 4), -0.0625, np.float32) + np.array([0.5, -0.5, 1.0, -1.0], np.float32)
    panel = open_in_stepper(qtbot, main_window, compilation.vmfb_path)
    runs = main_window.panels["run_dispatches"]
    add_breakpoint(qtbot, panel, "dispatch", "1", "after")
    panel.set_inputs((f"@{tmp_path / 'x.npy'}",))
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    view = runs.paused_view
    assert "types from sources" in view.header.text(), view.header.text()
    shapes = {(t.role, t.array.shape) for t in view.tensors}
    assert ("input", (2, 32)) in shapes and ("output", (2, 4)) in shapes, shapes
    [h] = [t for t in view.tensors if t.role == "input" and t.array.shape == (2, 32)]
    [o] = [t for t in view.tensors if t.role == "output"]
    assert h.source == "sources" and o.type_text == "2x4xf32"
    np.testing.assert_allclose(h.array, hidden, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o.array, out, rtol=1e-5, atol=1e-6)
    view.inspector.tensor_list.setCurrentRow(view.tensors.index(o))
    main_window.resize(1400, 900)
    qtbot.wait(200)
    save_screenshot(main_window, "dispatch_ui_paused_dispatch")
    # The CLI at the same stop saves the same tensors (both show what the session typed).
    script = tmp_path / "commands.gdb"
    script.write_text(f"break dispatch 1 after\ncontinue\nsave-tensors {tmp_path / 'cli'}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "debug", str(compilation.vmfb_path), "--function=main",
         f"--input=@{tmp_path / 'x.npy'}", f"--commands={script}", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for t in view.tensors:
        saved = np.load(tmp_path / "cli" / f"dispatch1_after_{t.role}{t.position}.npy")
        assert saved.shape == t.array.shape and saved.dtype == t.array.dtype
        assert saved.tobytes() == t.array.tobytes(), t.label
    with qtbot.waitSignal(runs.bridge.finished, timeout=TIMEOUT):
        runs.bridge.continue_()


def test_the_inspector_says_which_bytes_of_an_in_place_tensor_are_undefined(qtbot, main_window, tmp_path):
    """packed_concat: IREE copies two tensors into one slab in place; at the first copy the slab's other
    columns were never written (the session's DispatchTensor.undefined, capture's rule): the view says so."""
    from pathlib import Path

    from engine.compiler.targets import target_flags

    program = Path(__file__).resolve().parents[1] / "diverge_programs" / "packed_concat.mlir"
    vmfb = tmp_path / "packed_concat.vmfb"  # its executables' sources beside it: typed tensors
    proc = iree_compile(
        [str(program), *target_flags("llvm-cpu"), "-o", str(vmfb),
         f"--iree-hal-dump-executable-sources-to={tmp_path / 'packed_concat.sources'}"],
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.save(tmp_path / "a.npy", np.linspace(-1, 1, 16 * 24, dtype=np.float32).reshape(16, 24))
    np.save(tmp_path / "b.npy", np.linspace(-2, 0, 16 * 40, dtype=np.float32).reshape(16, 40))
    panel = open_in_stepper(qtbot, main_window, vmfb)
    runs = main_window.panels["run_dispatches"]
    add_breakpoint(qtbot, panel, "dispatch", "2", "after")  # the first copy into the concatenation
    panel.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    view = runs.paused_view
    assert view.info.export.endswith("slow_memcpy"), view.info.export
    header = view.header.text()
    # The 16x64xf32 slab: nothing of it written before (4096 bytes), its 16x40 columns still not after.
    assert "Never written before this dispatch, so undefined: input 1 (4096 bytes); output 0 (2560 bytes)" in header, header
    assert header.count("undefined") == 1, header  # once for all the tensors, not a line each
    labels = [view.inspector.tensor_list.item(k).text() for k in range(view.inspector.tensor_list.count())]
    assert sorted(text.splitlines()[-1] for text in labels if "undefined" in text) == [
        "2560 B undefined", "4096 B undefined"], labels
    assert not any("undefined" in t.label for t in view.tensors if t.role == "input" and t.position == 0)
    with qtbot.waitSignal(runs.bridge.finished, timeout=TIMEOUT):
        runs.bridge.continue_()


def _armed(qtbot, main_window, vmfb, tmp_path, ordinal: str, when: str):
    """``vmfb`` (nan_log) open in the stepper with a dispatch breakpoint and inputs a = 3, b = 1 set; the
    stepper panel and the run panel."""
    np.save(tmp_path / "a.npy", np.full((4, 8), 3.0, np.float32))
    np.save(tmp_path / "b.npy", np.full((4, 8), 1.0, np.float32))
    panel = open_in_stepper(qtbot, main_window, vmfb)
    add_breakpoint(qtbot, panel, "dispatch", ordinal, when)
    panel.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    return panel, main_window.panels["run_dispatches"]


def test_one_click_on_step_into_workgroup_offers_one_picker_after_many_stops(qtbot, main_window, tmp_path):
    """The paused tab is reused at each stop; its signals are wired once. Wired again at each stop, one
    click opened one picker per stop so far, and the picker left behind stayed over the workgroup view."""
    from app.views.kernel_step import WorkgroupPicker

    panel, runs = _armed(qtbot, main_window, compile_program("nan_log", "llvm-cpu", tmp_path), tmp_path, "*", "before")
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    view = runs.paused_view
    for _ in range(2):  # two more stops, the paused tab current at each
        with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
            qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
        assert runs.paused_view is view and main_window.documents.currentWidget() is view
    qtbot.mouseClick(view.step_into_button, Qt.MouseButton.LeftButton)
    pickers = [p for p in main_window.findChildren(WorkgroupPicker) if p.isVisible()]
    assert pickers == [runs.picker]
    picker = runs.picker
    qtbot.waitUntil(picker.buttons.isEnabled, timeout=TIMEOUT)
    with qtbot.waitSignal(runs.kernelViewOpened, timeout=TIMEOUT):
        qtbot.mouseClick(picker.buttons.buttons()[0], Qt.MouseButton.LeftButton)
    assert not [p for p in main_window.findChildren(WorkgroupPicker) if p.isVisible()]



def test_a_dispatch_stopped_at_while_its_sources_are_rebuilt_is_typed_once_they_are(qtbot, main_window, tmp_path):
    """No sources beside the module, but the program its debug locations name is here: the session rebuilds
    the sources in the background. The stop shows the bound bytes and says so; when the rebuild ends, the
    same stop is read again, typed, and "rebuilding" is gone from its header."""
    copy = tmp_path / "prog" / "nan_log.mlir"
    copy.parent.mkdir()
    shutil.copy(PROGRAMS / "nan_log.mlir", copy)
    panel, runs = _armed(qtbot, main_window, compile_program(str(copy), "llvm-cpu", tmp_path), tmp_path, "1", "after")
    shown = []
    runs.tensorsShown.connect(lambda info: shown.append((info.ordinal, runs.paused_view.header.text())))
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(shown) and "rebuilding" not in shown[-1][1].lower(), timeout=TIMEOUT)
    view = runs.paused_view
    assert "rebuilding" in shown[0][1].lower() and "untyped" in shown[0][1]
    assert all(ordinal == 1 for ordinal, _ in shown)
    assert "types from sources" in view.header.text()
    output = next(t for t in view.tensors if t.role == "output")
    assert output.source == "sources" and output.array.dtype == np.float32  # 32xf32: IREE flattened it
    np.testing.assert_allclose(output.array.reshape(4, 8), np.log(np.full((4, 8), 2.0, np.float32)), rtol=1e-6)
    with qtbot.waitSignal(runs.bridge.finished, timeout=TIMEOUT):
        runs.bridge.continue_()


def test_a_stop_read_again_after_the_run_moved_on_opens_nothing(qtbot, main_window, tmp_path):
    """A refresh (the stop read again once the sources' rebuild ended) can be answered after the run moved
    on and its tab was closed: the session answers it without tensors (no error), and a late answer for the
    old stop neither reopens its tab nor changes what the view says."""
    from dataclasses import replace

    from engine.session.protocol import Failed, ReadTensors, Tensors

    panel, runs = _armed(qtbot, main_window, compile_program("nan_log", "llvm-cpu", tmp_path), tmp_path, "1", "after")
    answers, failures = [], []
    runs.bridge.answered.connect(lambda a: isinstance(a, Tensors) and answers.append(a))
    runs.bridge.failed.connect(lambda f: failures.append(f))
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    stop_answer = answers[-1]
    view = runs.paused_view
    with qtbot.waitSignal(runs.bridge.finished, timeout=TIMEOUT):
        runs.bridge.continue_()
    assert view.left is not None  # the header says the run moved on
    header = view.header.text()
    # Asked now, the session answers that nothing is paused: no tensors, no Failed.
    count = len(answers)
    runs.bridge.evaluate(ReadTensors(refresh=True))
    qtbot.waitUntil(lambda: len(answers) > count, timeout=TIMEOUT)
    late = answers[-1]
    assert isinstance(late, Tensors) and late.info is None and late.tensors == ()
    assert not [f for f in failures if isinstance(f, Failed)]
    assert view.header.text() == header and runs.paused_view is view
    # The old stop's answer arriving late: the view that moved on keeps its header...
    runs.bridge.answered.emit(replace(stop_answer, query=ReadTensors(refresh=True)))
    assert view.header.text() == header
    # ... and once its tab is closed, nothing opens again.
    documents = main_window.documents
    assert documents.close_document("paused-dispatch")
    qtbot.waitUntil(lambda: documents.document("paused-dispatch") is None, timeout=TIMEOUT)
    runs.bridge.answered.emit(replace(stop_answer, query=ReadTensors(refresh=True)))
    qtbot.wait(50)  # the window's answer handlers queue their work
    assert documents.document("paused-dispatch") is None


def test_where_did_an_input_element_come_from(qtbot, main_window, tmp_path):
    """At dispatch 5 of a chain (dispatch k adds k + 1), the input's element menu asks where it came from:
    the session names dispatch 4 and the value it wrote (the input plus 1 + 2 + ... + 5), and the run stays
    parked at dispatch 5 with the same tensors."""
    from support import lens_in_process

    out = tmp_path / "phased"
    proc = lens_in_process("phases", str(PROGRAMS / "chain12.mlir"), f"--out={out}")
    assert proc.returncode == 0, proc.stderr
    (vmfb,) = out.glob("*.vmfb")
    panel = open_in_stepper(qtbot, main_window, vmfb)
    runs = main_window.panels["run_dispatches"]
    said: list[str] = []
    main_window.workbench.said.connect(said.append)
    add_breakpoint(qtbot, panel, "dispatch", "5", "before")
    panel.set_inputs(("4x8xf32=" + " ".join(str(k) for k in range(32)),))
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    view = runs.paused_view
    (row,) = [k for k, t in enumerate(view.tensors) if t.role == "input"]
    before = view.tensors[row].array.copy()
    np.testing.assert_array_equal(before.reshape(-1), np.arange(32, dtype=np.float32) + 15)
    inspector = view.inspector
    inspector.tensor_list.setCurrentRow(row)
    menu = inspector.element_menu(inspector.table_model.index(0, 12))  # element [12] (IREE flattens it: 32xf32)
    (action,) = menu.actions()
    assert action.text().startswith(f"Where did {view.tensors[row].binding_text} [12] come from?"), action.text()
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):  # parked at dispatch 5 again
        action.trigger()
    qtbot.waitUntil(lambda: any("came from" in s for s in said), timeout=TIMEOUT)
    (answer,) = [s for s in said if "came from" in s]
    assert "[12] of dispatch #5 came from dispatch #4 main_dispatch_4" in answer, answer
    assert f"→ {12 + 15}" in answer, answer  # element [12] is 12, plus 1 + ... + 5
    view = runs.paused_view
    assert view.info.ordinal == 5 and str(view.info.when) == "before"
    (row,) = [k for k, t in enumerate(view.tensors) if t.role == "input"]
    np.testing.assert_array_equal(view.tensors[row].array, before)
    # A way to the dispatch that wrote it: parked after dispatch 4 ran, its output is the input asked about.
    assert view.producer_button.isVisibleTo(view) and view.producer_button.text() == "Go to #4"
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(view.producer_button, Qt.MouseButton.LeftButton)
    view = runs.paused_view
    assert view.info.ordinal == 4 and str(view.info.when) == "after"
    (written,) = [t for t in view.tensors if t.role == "output"]
    np.testing.assert_array_equal(written.array, before)
    assert not view.producer_button.isVisibleTo(view)  # another stop: the answer was dispatch 5's
    # The outputs a dispatch wrote are its own: no question of them after it ran.
    add_breakpoint(qtbot, panel, "dispatch", "6", "after")
    for _ in range(2):  # from dispatch 4: dispatch 5's breakpoint, then 6's
        with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
            panel.bridge.continue_()
    view = runs.paused_view
    assert view.info.ordinal == 6 and str(view.info.when) == "after"
    (out_row,) = [k for k, t in enumerate(view.tensors) if t.role == "output" and t.written]
    view.inspector.tensor_list.setCurrentRow(out_row)
    assert view.inspector.element_menu(view.inspector.table_model.index(0, 0)) is None
