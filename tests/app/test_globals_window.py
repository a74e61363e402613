"""The stepper's Globals tab on a stateful program compiled with its phases: the globals by name with their
values after each call, and a buffer global's bytes opened in the tensor inspector, typed as the program
declares it."""

from __future__ import annotations

import numpy as np
import pytest
from support import lens_in_process
from support.session import PROGRAMS

TIMEOUT = 120_000
X = "8xf32=0 1 2 3 4 5 6 7"


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def _named_rows(view) -> dict[str, tuple[str, object]]:
    top = [view.topLevelItem(i) for i in range(view.topLevelItemCount())]
    named = next((t for t in top if t.text(0).startswith("by name")), None)
    if named is None:
        return {}
    rows = [named.child(k) for k in range(named.childCount())]
    return {r.text(0): (r.text(1), r) for r in rows}


@pytest.fixture(scope="module")
def stateful(tmp_path_factory):
    """The stateful program compiled by ``iree-lens phases``: its .vmfb beside the phase snapshots."""
    out = tmp_path_factory.mktemp("stateful")
    proc = lens_in_process("phases", str(PROGRAMS / "stateful.mlir"), f"--out={out}")
    assert proc.returncode == 0, proc.stderr
    (vmfb,) = out.glob("*.vmfb")
    return vmfb


def _opened(make_main_window, qtbot, vmfb):
    window = make_main_window()
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    return window, panel


def _after_a_call(make_main_window, qtbot, vmfb):
    """(panel, globals view, named rows) once a call of accumulate finished and the globals are named."""
    _, panel = _opened(make_main_window, qtbot, vmfb)
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT):
        panel.bridge.call("accumulate", (X,))
    view = panel.globals_view
    qtbot.waitUntil(lambda: "@state" in _named_rows(view), timeout=TIMEOUT)
    return panel, view, _named_rows(view)


def test_globals_by_name_after_each_call_and_a_buffer_inspected(make_main_window, qtbot, stateful):
    from app.views.tensor_inspector import TensorInspector

    window, panel = _opened(make_main_window, qtbot, stateful)
    # The disassembly names what each global access reads or writes (IREE's text, then "// @name").
    panel.workbench.set_function("accumulate")
    qtbot.waitUntil(lambda: "// @calls" in panel.listing.toPlainText(), timeout=TIMEOUT)
    listing = panel.listing.toPlainText().splitlines()
    assert any("vm.global.load.i32 .rwdata[0]  // @calls" in line for line in listing)
    assert any(".refs[3] : !hal.buffer  // @state" in line for line in listing)
    view = panel.globals_view
    for calls in (1, 2):
        with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT):
            panel.bridge.call("accumulate", (X,))
        qtbot.waitUntil(lambda c=calls: _named_rows(view).get("@calls", ("",))[0] == str(c), timeout=TIMEOUT)
    rows = _named_rows(view)
    assert rows["@big"][0] == "28" and rows["@scale"][0] == "39.0625"
    # What the second call changed is red, with the value before it; what it left alone is not.
    from app.views.stepper_state import CHANGED

    assert rows["@big"][1].foreground(1) == CHANGED and rows["@big"][1].toolTip(1) == "was 14"
    assert rows["@__device_0"][1].foreground(1) != CHANGED
    assert "32 bytes, 8xf32" in rows["@state"][0]
    view.itemActivated.emit(rows["@state"][1], 0)
    found = lambda: [w for w in window.findChildren(TensorInspector) if w.objectName() == "globalInspector"]  # noqa: E731
    qtbot.waitUntil(lambda: bool(found()), timeout=TIMEOUT)
    inspector = found()[-1]
    assert np.array_equal(inspector.array, 2 * np.arange(8, dtype=np.float32))
    assert inspector.array.dtype == np.float32


def test_when_did_a_named_global_change(make_main_window, qtbot, stateful):
    """A named row watches its global: "When did this change?" on @calls after a call runs back to the
    instruction that stored it."""
    from engine.session.protocol import WatchGlobal, WatchGlobalRef

    panel, view, rows = _after_a_call(make_main_window, qtbot, stateful)
    assert panel.reverse.watch_of(view, rows["@big"][1]) == WatchGlobal(panel.vmfb.name, 8, 8, "i64")
    assert panel.reverse.watch_of(view, rows["@calls"][1]) == WatchGlobal(panel.vmfb.name, 0, 4, "i32")
    state = panel.reverse.watch_of(view, rows["@state"][1])
    assert isinstance(state, WatchGlobalRef) and view.value.refs[state.index] == "!hal.buffer"
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        panel.reverse.when_changed(WatchGlobal(panel.vmfb.name, 0, 4, "i32"), "@calls")
    line = panel.listing.document().findBlockByNumber(panel.listing.current_line()).text()
    assert "vm.global.store.i32" in line and ".rwdata[0]" in line, line
    # Named as its row is, its values as the number it is (the call's first: 0, then 1).
    assert "@calls was last written at instruction" in panel.status_label.text()
    assert ": 0 → 1" in panel.status_label.text(), panel.status_label.text()


def test_when_did_a_buffer_globals_contents_change(make_main_window, qtbot, stateful):
    """A buffer global's row also asks about the bytes it holds: the run goes back to the command buffer
    whose copy wrote them (before the ref was stored), and the status names the dispatch that made them and
    the first element that changed, typed as the program declares @state."""
    from engine.session.protocol import WatchGlobalContents

    panel, view, rows = _after_a_call(make_main_window, qtbot, stateful)
    contents = panel.reverse.contents_watch_of(view, rows["@state"][1])
    assert contents == WatchGlobalContents(panel.vmfb.name, view.value.refs.index("!hal.buffer", 3))
    assert panel.reverse.contents_watch_of(view, rows["@calls"][1]) is None
    assert panel.reverse.contents_watch_of(view, rows["@__device_0"][1]) is None
    # The row's menu offers both questions, named as the row is.
    texts = [a.text() for a in panel.reverse.watch_menu(view, rows["@state"][1]).actions()]
    assert texts[0].startswith("When did @state (the buffer it holds) change?")
    assert texts[1].startswith("When did the contents of @state change?")
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        panel.reverse.when_changed(contents, "@state")
    line = panel.listing.document().findBlockByNumber(panel.listing.current_line()).text()
    assert "queue.execute" in line, line
    text = panel.status_label.text()
    assert "the contents of @state was last written at instruction" in text, text
    assert "written by dispatch #0 accumulate_dispatch_0" in text and "element [1] of 8xf32" in text, text
    assert ": 0 → 1 (" in text, text


def test_when_did_an_element_of_a_buffer_global_change(make_main_window, qtbot, stateful):
    """The global's tensor inspector asks about one element (its table's context menu): the run goes back to
    the command buffer whose copy wrote its bytes, and the status names the element, the dispatch that made
    it and its values."""
    from app.views.tensor_inspector import TensorInspector

    panel, view, rows = _after_a_call(make_main_window, qtbot, stateful)
    window = panel.window()
    view.itemActivated.emit(rows["@state"][1], 0)
    found = lambda: [w for w in window.findChildren(TensorInspector) if w.objectName() == "globalInspector"]  # noqa: E731
    qtbot.waitUntil(lambda: bool(found()), timeout=TIMEOUT)
    inspector = found()[-1]
    assert inspector.element_place((3,)) == (12, 4, "f32")
    menu = inspector.element_menu(inspector.table_model.index(0, 3))
    (action,) = menu.actions()
    assert action.text().startswith("When did @state[3] change?")
    # The heatmap asks the same on a right-click (pyqtgraph's own menu gives way; its View All stays).
    assert not inspector.heatmap.view.menuEnabled()
    assert [a.text() for a in inspector.heatmap_menu(0, 3).actions()] == [action.text(), "View All"]
    assert inspector.selected_element() == (3,)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        action.trigger()
    line = panel.listing.document().findBlockByNumber(panel.listing.current_line()).text()
    assert "queue.execute" in line, line
    text = panel.status_label.text()
    assert "@state[3] was last written at instruction" in text and "written by dispatch #0 accumulate_dispatch_0" in text
    assert "bytes [12, 16)" in text and ": 0 → 3 (before: as allocated" in text, text  # state 0 + x[3]


def test_a_module_alone_gets_names_when_the_rebuild_lands(make_main_window, qtbot, stateful, tmp_path):
    """The .vmfb without its phases: unnamed (said) until the rebuild a dispatch stop starts has found the
    program's executables identical; then the Globals tab names them without another stop."""
    import shutil

    from engine.session.protocol import Breakpoint

    alone = tmp_path / stateful.name
    shutil.copy(stateful, alone)
    window, panel = _opened(make_main_window, qtbot, alone)
    panel.bridge.set_breakpoints([Breakpoint("dispatch", dispatch="*", when="after")])
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        panel.bridge.call("accumulate", (X,))
    view = panel.globals_view
    at = panel.listing.current_pc
    assert at is not None and "// @calls" not in panel.listing.toPlainText()
    qtbot.waitUntil(lambda: "@calls" in _named_rows(view), timeout=TIMEOUT)
    assert panel.bridge.state == "stopped"  # named at the same stop
    # The listing names the accesses too, still marking where the run stopped.
    qtbot.waitUntil(lambda: "// @calls" in panel.listing.toPlainText(), timeout=TIMEOUT)
    assert panel.listing.current_pc == at and panel.listing.current_line() == panel.listing.line_of_pc(at)


def test_a_dispatch_tensor_held_by_a_global_says_so(make_main_window, qtbot, stateful):
    """The paused dispatch's input that is the program's state says "in @state" beside its type; the
    output (a new buffer, stored into @state only after the dispatch) says nothing."""
    from app.views.dispatch_run_live import PausedDispatchView
    from engine.session.protocol import Breakpoint

    window, panel = _opened(make_main_window, qtbot, stateful)
    panel.bridge.set_breakpoints([Breakpoint("dispatch", dispatch="*", when="after")])
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        panel.bridge.call("accumulate", (X,))

    def items():
        views = [v for v in window.findChildren(PausedDispatchView) if v.info is not None]
        inspector = views[-1].inspector if views else None
        if inspector is None:
            return []
        return [inspector.tensor_list.item(k).text() for k in range(inspector.tensor_list.count())]

    qtbot.waitUntil(lambda: len(items()) == 3, timeout=TIMEOUT)
    texts = items()
    assert "in @state" in texts[0] and all("in @" not in t for t in texts[1:]), texts


def test_when_did_the_contents_of_a_register_change(make_main_window, qtbot, stateful):
    """Back one instruction from the end of a call, at its vm.return: the ref register holding the result's
    buffer view asks about its bytes too, and the answer names the dispatch that wrote them, typed as the
    view is (8xf32); an empty ref register offers no such question."""
    from engine.session.protocol import WatchRegister, WatchRegisterContents

    panel, _, _ = _after_a_call(make_main_window, qtbot, stateful)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        panel.bridge.reverse_step_into()
    view = panel.registers
    refs = view.topLevelItem(1)
    rows = [refs.child(k) for k in range(refs.childCount())]
    held = [k for k, row in enumerate(rows) if row.text(1) == "8xf32"]
    assert held, [row.text(1) for row in rows]
    row = rows[held[0]]
    contents = panel.reverse.contents_watch_of(view, row)
    assert contents == WatchRegisterContents(0, held[0])
    empty = next(r for r in rows if r.text(1) == "null")
    assert panel.reverse.contents_watch_of(view, empty) is None
    assert isinstance(panel.reverse.watch_of(view, empty), WatchRegister)
    texts = [a.text() for a in panel.reverse.watch_menu(view, row).actions()]
    assert texts[1].startswith(f"When did the contents of %r{held[0]} of #0 "), texts
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        panel.reverse.when_changed(contents)
    line = panel.listing.document().findBlockByNumber(panel.listing.current_line()).text()
    assert "queue.execute" in line, line
    text = panel.status_label.text()
    assert f"the contents of %r{held[0]}" in text and "was last written at instruction" in text, text
    assert "by dispatch #0 accumulate_dispatch_0" in text and "element [1] of 8xf32" in text, text


def test_an_inline_builds_vm_buffer_global_is_named_inspected_and_watched(make_main_window, qtbot, tmp_path):
    """An inline-dynamic build keeps its tensor globals as !vm.buffer storage: the Globals tab names and types
    @counter, and its menu asks about its contents too; the answer is the VM's own vm.buffer.fill (no hal call
    writes it)."""
    from engine.session.protocol import WatchGlobalContents

    out = tmp_path / "inline"
    proc = lens_in_process("phases", str(PROGRAMS / "scalar_store.mlir"), f"--out={out}",
                           "--iree-execution-model=inline-dynamic")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (vmfb,) = out.glob("*.vmfb")
    _, panel = _opened(make_main_window, qtbot, vmfb)
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT):
        panel.bridge.call("bump", ("2", "7"))
    view = panel.globals_view
    qtbot.waitUntil(lambda: "@counter" in _named_rows(view), timeout=TIMEOUT)
    shown, row = _named_rows(view)["@counter"]
    assert "16 bytes, 4xi32" in shown, shown
    contents = panel.reverse.contents_watch_of(view, row)
    assert contents == WatchGlobalContents(panel.vmfb.name, 0)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        panel.reverse.when_changed(contents, "@counter")
    line = panel.listing.document().findBlockByNumber(panel.listing.current_line()).text()
    assert "vm.buffer.fill.i32" in line, line
    text = panel.status_label.text()
    assert "the contents of @counter was last written at instruction" in text and ": 0 → 7 (element [2] of 4xi32" in text, text
