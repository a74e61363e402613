"""The Dispatches panel in the main window with a real compile: picking a dispatch moves the compile
panel's IR viewer to its line, the panel shows its code and its call sites (checked against
``iree-dump-module``), and a click on a call site moves the inspector's disassembly there."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QPoint, Qt
from support import grep, tool_call_sites

from app.context import LensContext, LoadedModule
from app.messages import MessageLog
from app.panels import PanelServices
from app.views.dispatch_panel import DispatchPanel
from app.workers import EngineWorker
from engine.compiler import CompileRequest, compile_program
from engine.runtime.vmfb.module import open_vmfb
from engine.samples import sample_path


def click(qtbot, tree, item, column: int = 0) -> None:
    tree.scrollToItem(item)
    rect = tree.visualItemRect(item)
    x = rect.x() + 10 if column == 0 else tree.header().sectionPosition(column) + 10
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, rect.center().y()))


def cursor_line(viewer) -> int:
    """1-based line of the IR viewer's cursor."""
    return viewer.view.cursor_position()[0] + 1


@pytest.fixture
def compiled_in_window(qtbot, main_window):
    """transpose_concat (4 dispatches in one linked executable) compiled by the compile panel, its
    .vmfb opened in the inspector."""
    compile_panel = main_window.panels["compile"]
    compile_panel.set_source(sample_path("transpose_concat"))
    compile_panel.options.target.setCurrentText("llvm-cpu")
    with qtbot.waitSignal(compile_panel.compilationFinished, timeout=120_000) as done:
        compile_panel.compile()
    qtbot.waitUntil(lambda: not compile_panel.is_busy())
    comp = done.args[0]
    assert comp.ok
    main_window.open_file(comp.vmfb_path)
    qtbot.waitUntil(
        lambda: main_window.context.module is not None and not main_window.is_loading, timeout=20_000
    )
    return main_window, comp


def test_picking_a_dispatch_moves_the_ir_and_lists_call_sites(qtbot, compiled_in_window):
    window, comp = compiled_in_window
    panel: DispatchPanel = window.panels["dispatches"]
    window.docks["dispatches"].raise_()
    compile_panel = window.panels["compile"]
    flow = comp.phase("flow").text()
    expected_names = re.findall(r"^  flow\.executable private @(\w+) \{", flow, re.MULTILINE)
    assert panel.names() == expected_names and len(expected_names) == 4

    # Pick main_dispatch_2 with the mouse: the context names it, the IR viewer shows it in flow.
    item = panel.dispatch_list.topLevelItem(expected_names.index("main_dispatch_2"))
    click(qtbot, panel.dispatch_list, item)
    assert window.context.dispatch == "main_dispatch_2"
    assert compile_panel.shown_phase == "flow"  # the vm phase shown after the compile has no such dispatch
    assert compile_panel.viewer.document().text() == flow
    (definition,) = grep(flow, r"^  flow\.executable private @main_dispatch_2 \{")
    assert cursor_line(compile_panel.viewer) == definition
    assert compile_panel.viewer.view.is_line_visible(definition - 1)

    # Where it appears: clicking the stream row shows the stream phase at its definition.
    stream = comp.phase("stream").text()
    rows = [panel.locations.topLevelItem(i) for i in range(panel.locations.topLevelItemCount())]
    assert {r.text(0) for r in rows} >= {"dispatch-creation", "flow", "stream", "hal"}
    stream_row = next(r for r in rows if r.text(0) == "stream")
    click(qtbot, panel.locations, stream_row)
    assert compile_panel.shown_phase == "stream" and window.context.phase == "stream"
    assert compile_panel.viewer.document().text() == stream
    assert [cursor_line(compile_panel.viewer)] == grep(
        stream, r"^  stream\.executable private @main_dispatch_2 \{"
    )
    # ... and the dispatch-creation row shows the region it was formed from (third region of @main).
    creation = comp.phase("dispatch-creation").text()
    click(qtbot, panel.locations, next(r for r in rows if r.text(0) == "dispatch-creation"))
    assert compile_panel.shown_phase == "dispatch-creation"
    assert cursor_line(compile_panel.viewer) == grep(creation, r"flow\.dispatch\.workgroups")[2]

    # Call sites are the tool's dispatch calls of this dispatch's export.
    (export,) = re.findall(r"flow\.executable\.export public @(main_dispatch_2_\w+)", flow)
    expected_sites = [(f, pc, text) for f, pc, e, text in tool_call_sites(comp.vmfb_path) if e == export]
    shown = panel.shown_call_sites()
    assert [(s.function_ordinal, s.pc, s.text) for s in shown] == expected_sites and expected_sites
    # Clicking the call site moves the inspector's disassembly to that instruction.
    site = shown[0]
    view = window.module_view
    panel.detail_tabs.setCurrentWidget(panel.call_sites)
    assert panel.detail_tabs.tabText(1) == f"Call sites ({len(expected_sites)})"
    qtbot.mouseClick(
        panel.call_sites.viewport(),
        Qt.MouseButton.LeftButton,
        pos=panel.call_sites.visualItemRect(panel.call_sites.item(0)).center(),
    )
    assert (window.context.function, window.context.pc) == (site.function_name, site.pc)
    module = open_vmfb(comp.vmfb_path)
    qtbot.waitUntil(lambda: "hal.command_buffer.dispatch" in view.disassembly.text(), timeout=10_000)
    line = view.disassembly.text().splitlines()[view.disassembly.current_line()]
    assert line.strip() == site.text
    assert module.functions[site.function_ordinal].name == site.function_name

    # The code tabs: source, configuration, LLVM IR and assembly, each at the export's code.
    labels = [panel.code_tabs.tabText(i) for i in range(panel.code_tabs.count())]
    assert labels[:2] == ["Source", "Configuration"]
    assert any(label.startswith("LLVM IR") for label in labels) and any(
        label.startswith("Assembly") for label in labels
    )
    ll_tab = next(i for i, label in enumerate(labels) if label.startswith("LLVM IR (linked)"))
    ll = panel.code_viewers[ll_tab]
    assert grep(ll.document().text(), rf"^define .*@{export}\(") == [cursor_line(ll)]
    source = panel.code_viewers[0]
    assert source.document().text() == comp.executable("main_dispatch_2").source.read_text()


def test_vulkan_dispatch_shows_spirv_and_follows_the_context(qtbot, tmp_path):
    comp = compile_program(CompileRequest(sample_path("mlp"), target="vulkan-spirv"), out_dir=tmp_path / "c")
    comp.raise_if_failed()
    context = LensContext()
    worker = EngineWorker()
    services = PanelServices(context, worker, MessageLog(), lambda _path: None)
    panel = DispatchPanel(services)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    try:
        # A module alone: its dispatches by export name, from the host code.
        module = open_vmfb(comp.vmfb_path)
        context.set_module(LoadedModule(comp.vmfb_path, module))
        exports = [e for _, _, e, _ in tool_call_sites(comp.vmfb_path)]
        assert panel.names() == exports and len(exports) == 2
        # With the compilation: dispatch names; a dispatch set elsewhere (by export name) is shown.
        context.set_compilation(comp)
        assert panel.names() == ["main_dispatch_0", "main_dispatch_1"]
        context.set_dispatch("main_dispatch_1")
        assert panel.current == "main_dispatch_1"
        labels = [panel.code_tabs.tabText(i) for i in range(panel.code_tabs.count())]
        assert "SPIR-V" in labels and "SPIR-V dialect" in labels
        spirv = panel.code_viewers[labels.index("SPIR-V")]
        text = spirv.document().text()
        assert grep(text, r'OpEntryPoint GLCompute %\S+ "main_dispatch_1_matmul_2x4x32_f32"')
        assert "main_dispatch_1_matmul_2x4x32_f32 = OpFunction" in text.splitlines()[cursor_line(spirv) - 1]
        assert [s.export for s in panel.shown_call_sites()] == ["main_dispatch_1_matmul_2x4x32_f32"]
        # Picking in the list publishes the dispatch name.
        click(qtbot, panel.dispatch_list, panel.dispatch_list.topLevelItem(0))
        assert context.dispatch == "main_dispatch_0"
    finally:
        worker.shutdown() if hasattr(worker, "shutdown") else None
