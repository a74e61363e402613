"""The main window: drop a real .vmfb, see its functions; bad files; recent files and layout persist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent
from PySide6.QtWidgets import QApplication
from support.app import drop_files


def iree_tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def tool_exports(vmfb: Path) -> list[str]:
    """Exported function names as ``iree-dump-module --output=metadata`` lists them."""
    out = subprocess.run(
        [iree_tool("iree-dump-module"), "--output=metadata", str(vmfb)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    section = out.split("Exported Functions:", 1)[1].split("//===", 1)[0]
    return re.findall(r"^\s*\[\s*\d+\]\s+([\w$.-]+)\(", section, re.MULTILINE)


def group_children(window, group: str) -> list[str]:
    item = window.module_view.expand_path(group)
    assert item is not None, f"no {group} group in the tree"
    return [item.child(i).text(0) for i in range(item.childCount())]


def test_drop_vmfb_shows_exported_functions(qtbot, main_window, compiled):
    vmfb = compiled.path("multi_function", "llvm-cpu")
    assert drop_files(qtbot, main_window, [vmfb])
    qtbot.waitUntil(lambda: main_window.context.module is not None, timeout=10000)
    expected = tool_exports(vmfb)
    assert {"add", "mul", "add_then_mul", "scalar_math"} <= set(expected)
    shown = [re.sub(r"^\[\d+\] ", "", label) for label in group_children(main_window, "Exports")]
    assert shown == expected
    functions = group_children(main_window, "Functions")
    for name in expected:
        assert any(label.endswith(f" {name}") for label in functions), (name, functions)
    assert main_window.windowTitle().startswith(vmfb.name)
    assert main_window.context.module.path == vmfb


def test_drop_ignores_things_that_are_not_files(qtbot, main_window):
    mime = QMimeData()
    mime.setText("not a file")
    enter = QDragEnterEvent(
        QPointF(10, 10),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(main_window, enter)
    assert not enter.isAccepted()


@pytest.mark.parametrize("damage", ["truncated", "empty", "not-a-module"])
def test_bad_file_shows_error_and_window_survives(qtbot, main_window, compiled, tmp_path, damage):
    good = compiled.path("multi_function", "llvm-cpu")
    data = good.read_bytes()
    bad = tmp_path / f"{damage}.vmfb"
    bad.write_bytes(
        {"truncated": data[: len(data) // 3], "empty": b"", "not-a-module": b"hello world\n" * 10}[damage]
    )

    main_window.open_file(bad)
    qtbot.waitUntil(lambda: main_window.banner.isVisible(), timeout=10000)
    text = main_window.banner.text()
    assert bad.name in text and "Cannot open" in text
    assert main_window.context.module is None
    assert any(bad.name in m.text for m in main_window.messages.messages)
    log = main_window.panels["log"].text.toPlainText()
    assert f"Cannot open {bad.name}" in log

    # The application keeps working: a good file opens next, and the banner goes away.
    assert drop_files(qtbot, main_window, [good])
    qtbot.waitUntil(lambda: main_window.context.module is not None, timeout=10000)
    assert not main_window.banner.isVisible()
    assert "add" in [re.sub(r"^\[\d+\] ", "", s) for s in group_children(main_window, "Exports")]


def test_recent_files_and_layout_persist(qtbot, make_main_window, compiled):
    vmfb = compiled.path("multi_function", "llvm-cpu")
    first = make_main_window()
    first.open_file(vmfb)
    qtbot.waitUntil(lambda: first.context.module is not None, timeout=10000)
    first.resize(797, 553)  # inside the offscreen screen (800x600), above the docks' minimum width
    first.docks["log"].hide()
    first.close()

    second = make_main_window()
    assert second.settings.recent_files()[0] == vmfb.resolve()
    assert [a.text() for a in second.recent_menu.actions()][0] == str(vmfb.resolve())
    assert not second.docks["log"].isVisible()
    assert (second.width(), second.height()) == (797, 553)
    # Open Recent opens it again.
    second.recent_menu.actions()[0].trigger()
    qtbot.waitUntil(lambda: second.context.module is not None, timeout=10000)
    second.docks["log"].show()


def test_settings_are_isolated(isolated_settings, main_window):
    assert str(isolated_settings) in main_window.settings.store.fileName()


def test_view_menu_toggles_each_panel(main_window):
    view_menu = next(a.menu() for a in main_window.menuBar().actions() if a.text() == "&View")
    toggles = {a.text(): a for a in view_menu.actions()}
    for dock in main_window.docks.values():
        assert dock.windowTitle() in toggles
    log = toggles["Log"]
    was = main_window.docks["log"].isVisible()
    log.trigger()
    assert main_window.docks["log"].isVisible() != was
    log.trigger()
    assert main_window.docks["log"].isVisible() == was
    # A document panel's title with "&" reads as written ("Compile _Phases" before: "&" taken as a mnemonic).
    assert "Compile && Phases" in toggles and "Compile & Phases" not in toggles


def test_run_menu_lists_the_run_and_step_actions_with_their_keys(main_window):
    titles = [a.text() for a in main_window.menuBar().actions()]
    assert titles == ["&File", "&View", "&Run", "&Help"]
    run_menu = main_window.menuBar().actions()[2].menu()
    keys = {a.text(): a.shortcut().toString() for a in run_menu.actions() if a.text()}
    assert keys["Profile"] == "Ctrl+Shift+R" and keys["▶ Run"] == "Ctrl+R" and keys["Compile"] == "Ctrl+B"
    stepper = main_window.panels["stepper"]
    for action in (stepper.step_over_action, stepper.next_dispatch_action, stepper.reverse.previous_dispatch_action,
                   stepper.reverse.reverse_continue_action, stepper.toggle_bp_action):  # fmt: skip
        assert action in run_menu.actions(), action.text()


def test_open_mlir_compiles_and_opens(qtbot, main_window):
    from engine.samples import sample_path

    source = sample_path("elementwise")
    main_window.open_file(source)
    qtbot.waitUntil(lambda: main_window.context.module is not None, timeout=120000)
    loaded = main_window.context.module
    assert loaded.source == source and loaded.path.suffix == ".vmfb"
    assert tool_exports(loaded.path) == [
        re.sub(r"^\[\d+\] ", "", s) for s in group_children(main_window, "Exports")
    ]


def test_each_compile_phase_is_said_in_the_status_line(qtbot, main_window, tmp_path):
    from PySide6.QtWidgets import QProgressBar

    from engine.samples import sample_path

    # A program of its own (a comment makes it one no earlier test compiled: compiles are cached).
    source = tmp_path / "phases_said.mlir"
    source.write_text(f"// {tmp_path.name}\n" + sample_path("elementwise").read_text())
    said = []
    main_window.worker.progressed.connect(lambda p: said.append((main_window.statusBar().currentMessage(), p.text)))
    main_window.open_file(source)
    qtbot.waitUntil(lambda: main_window.context.module is not None, timeout=120000)
    # In the status line (inside the 14-px bar the text wrapped onto two clipped lines), and not after.
    assert [text for _, text in said if text.startswith("phase ")], said
    assert all(shown == text for shown, text in said if text), said
    busy = main_window.findChild(QProgressBar, "busyProgress")
    assert not busy.isTextVisible()
    qtbot.waitUntil(lambda: not busy.isVisible(), timeout=30000)
    assert not main_window.statusBar().currentMessage().startswith("phase ")


def test_open_invalid_mlir_reports_compile_error(qtbot, main_window, tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f( {\n")
    main_window.open_file(bad)
    qtbot.waitUntil(lambda: main_window.banner.isVisible(), timeout=60000)
    assert "iree-compile failed" in main_window.banner.text()


def test_start_app_opens_file_from_command_line(qtbot, compiled):
    from app.main import start_app

    vmfb = compiled.path("multi_function", "llvm-cpu")
    app, window = start_app([str(vmfb)])
    qtbot.addWidget(window)
    assert app is QApplication.instance() and window.isVisible()
    qtbot.waitUntil(lambda: window.context.module is not None, timeout=10000)
    assert window.context.module.path == vmfb
    window.close()
