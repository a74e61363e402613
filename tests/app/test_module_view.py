"""The module inspector against IREE's own tools: disassembly, labels, rodata, executables."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFontInfo, QTextCursor

from app.views.module_tree import DetailKind


def dump(vmfb: Path, output: str) -> str:
    tool = str(Path(sys.executable).parent / "iree-dump-module")
    return subprocess.run(
        [tool, f"--output={output}", str(vmfb)], capture_output=True, text=True, check=True
    ).stdout


def tool_function_text(disassembly: str, export: str) -> str:
    """The lines ``iree-dump-module`` prints for exported function ``export``: export line to closing brace."""
    lines = disassembly.splitlines()
    start = lines.index(f"vm.export @{export}")
    end = lines.index("}", start)
    return "\n".join(lines[start : end + 1])


def open_module(qtbot, window, vmfb: Path) -> None:
    window.open_file(vmfb)
    qtbot.waitUntil(lambda: window.context.module is not None and not window.is_loading, timeout=10000)


def click_item(qtbot, tree, item) -> None:
    tree.scrollToItem(item)
    rect = tree.visualItemRect(item)
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(rect.x() + 20, rect.center().y()))


def item_named(view, group: str, name: str):
    parent = view.expand_path(group)
    for i in range(parent.childCount()):
        if re.sub(r"^\[\d+\] ", "", parent.child(i).text(0)) == name:
            return parent.child(i)
    raise AssertionError(f"no {name} under {group}")


@pytest.mark.parametrize("function", ["add", "add_then_mul", "scalar_math"])
def test_clicking_a_function_shows_the_tools_disassembly(qtbot, main_window, compiled, function):
    vmfb = compiled.path("multi_function", "llvm-cpu")
    open_module(qtbot, main_window, vmfb)
    view = main_window.module_view
    click_item(qtbot, view.tree, item_named(view, "Functions", function))
    expected = tool_function_text(dump(vmfb, "disassembly"), function)
    qtbot.waitUntil(lambda: view.disassembly.text() == expected, timeout=10000)
    assert main_window.context.function == function
    assert view.detail.tabText(view.detail.currentIndex()) == "Disassembly"
    assert QFontInfo(view.disassembly.editor.font()).fixedPitch()


def test_branch_targets_navigate_and_back_returns(qtbot, main_window, compiled):
    vmfb = compiled.path("control_flow", "llvm-cpu")
    open_module(qtbot, main_window, vmfb)
    view = main_window.module_view
    click_item(qtbot, view.tree, item_named(view, "Functions", "collatz_steps"))
    dis = view.disassembly
    qtbot.waitUntil(lambda: "vm.cond_br" in dis.text() or "vm.br " in dis.text(), timeout=10000)
    lines = dis.text().splitlines()
    # The first branch whose target label is on another line.
    for n, line in enumerate(lines):
        m = re.search(r"\b(vm\.br|vm\.cond_br)\b.*?\^(bb\d+)", line)
        if m and dis.labels.get(m.group(2)) not in (None, n):
            break
    else:
        pytest.fail("no branch in collatz_steps")
    target = m.group(2)
    label_line = lines.index(f"^{target}:")
    assert dis.labels[target] == label_line

    # Click on the target with the mouse, as a user would.
    col = line.index(f"^{target}", m.start(1))
    cursor = QTextCursor(dis.editor.document().findBlockByNumber(n))
    cursor.movePosition(QTextCursor.MoveOperation.Right, n=col + 2)
    dis.editor.setTextCursor(cursor)
    dis.editor.ensureCursorVisible()
    rect = dis.editor.cursorRect(cursor)
    qtbot.mouseClick(dis.editor.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert dis.current_line() == label_line
    assert main_window.context.pc is not None  # the label's pc was broadcast
    assert dis.back_action.isEnabled()
    dis.back_action.trigger()
    assert dis.current_line() == n
    assert not dis.back_action.isEnabled()


def test_rodata_hex_and_strings_match_the_tool(qtbot, main_window, compiled):
    vmfb = compiled.path("multi_function", "llvm-cpu")
    open_module(qtbot, main_window, vmfb)
    view = main_window.module_view
    tool_rodata = dict(
        re.findall(r"^vm\.rodata\[(\d+)\] = ([0-9A-F]*)$", dump(vmfb, "disassembly"), re.MULTILINE)
    )
    strings = dict(re.findall(r"\.rodata\[\s*(\d+)\] embedded\s+\d+ bytes `([^`]*)`", dump(vmfb, "metadata")))
    group = view.expand_path("Rodata")
    assert group.childCount() == len(tool_rodata)
    for ordinal in ("0", "4"):
        click_item(qtbot, view.tree, group.child(int(ordinal)))
        model = view.hex.hex_model
        data = bytes.fromhex(tool_rodata[ordinal])
        assert model.byte_count == len(data)
        row0 = model.data(model.index(0, 1))
        assert row0.replace(" ", "") == data[:16].hex()
        last = model.rowCount() - 1
        assert model.data(model.index(last, 1)).replace(" ", "") == data[last * 16 :].hex()
        if ordinal in strings:
            qtbot.waitUntil(lambda o=ordinal: strings[o] in view.decoded.toPlainText(), timeout=5000)
    # Segment 4 is the ELF: its decoded view is the executable's summary.
    qtbot.waitUntil(lambda: "embedded-elf-x86_64" in view.decoded.toPlainText(), timeout=5000)


def test_hex_model_renders_rows_of_a_large_buffer_lazily(qapp):
    from app.views.hex_view import HexModel

    data = bytearray(64 * 1024 * 1024)
    data[-3:] = b"END"
    model = HexModel()
    model.set_data(memoryview(data), base=0x1000)
    assert model.rowCount() == len(data) // 16
    last = model.rowCount() - 1
    assert model.data(model.index(last, 0)) == f"{0x1000 + last * 16:08x}"
    assert model.data(model.index(last, 2)).endswith("END")


def _embedded_dispatch_names(vmfb: Path) -> list[str]:
    previews = re.findall(r"\.rodata\[\s*\d+\] embedded\s+\d+ bytes `([^`]*)`", dump(vmfb, "metadata"))
    return [p for p in previews if "_dispatch_" in p]


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx", "vulkan-spirv"])
def test_executable_details_per_format(qtbot, main_window, compiled, target):
    vmfb = compiled.path("multi_function", target)
    open_module(qtbot, main_window, vmfb)
    view = main_window.module_view
    group = view.expand_path("Executables")
    fmt = {"llvm-cpu": "embedded-elf-x86_64", "vmvx": "vmvx-bytecode-fb", "vulkan-spirv": "vulkan-spirv-fb"}[
        target
    ]
    all_details = ""
    for i in range(group.childCount()):
        click_item(qtbot, view.tree, group.child(i))
        assert group.child(i).text(1) == fmt and f"format: {fmt}" in view.info.toPlainText()
        all_details += view.info.toPlainText()
    dispatches = _embedded_dispatch_names(vmfb)
    assert dispatches
    for name in dispatches:  # the tool's previews are cut at 32 characters
        assert name.rstrip(".") in all_details, (name, all_details)

    item = group.child(0)
    click_item(qtbot, view.tree, item)
    qtbot.waitUntil(lambda: view.decoded.toPlainText() not in ("", "decoding..."), timeout=30000)
    text = view.decoded.toPlainText()
    entry_name = re.search(r"^archive entry: (\S+)$", view.info.toPlainText(), re.MULTILINE).group(1)
    if target == "llvm-cpu":
        assert ".text" in text and "iree_hal_executable_library_query" in text
    elif target == "vmvx":
        # The nested module is a .vmfb of its own: compare with the tool run on it.
        nested = vmfb.with_name(vmfb.name + ".nested.vmfb")
        with zipfile.ZipFile(vmfb) as z:
            nested.write_bytes(z.read(entry_name))
        tool = dump(nested, "disassembly")
        exports = re.findall(r"^vm\.export @(\S+)", tool, re.MULTILINE)
        assert exports
        for export in exports:
            assert tool_function_text(tool, export) in text
    else:
        assert re.search(r"OpEntryPoint GLCompute %\w+ \"\w+_dispatch_", text)
    # Children: the entry points first (and, per format, sections/symbols or nested functions).
    item.setExpanded(True)
    assert item.childCount() > 0 and item.child(0).text(0) == "entry point 0"
    assert "_dispatch_" in item.child(0).text(1)
    if target == "vmvx":
        assert any(it.parent() is item for it in view.find_items(DetailKind.FUNCTION))
