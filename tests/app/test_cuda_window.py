"""A CUDA build in the window on a machine without a CUDA driver: the module view shows its kernels and PTX,
opening it says in the driver's one sentence why it cannot run here, and the Device panel says why no CUDA
device is listed. (With a driver, the panel's listing is checked by tests/test_cuda_executables.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import compile_for, cuda_driver_present

from app import engine_adapter
from engine.runtime.hal.cuda.driver import NO_DRIVER
from engine.runtime.vmfb.cda1 import read_cda1
from engine.runtime.vmfb.module import open_vmfb

TIMEOUT = 60_000
PROGRAM = """
func.func @scale(%a: tensor<64xf32>) -> tensor<64xf32> {
  %0 = arith.mulf %a, %a : tensor<64xf32>
  return %0 : tensor<64xf32>
}
"""

pytestmark = pytest.mark.skipif(cuda_driver_present(), reason="a CUDA driver is present: these check the no-driver window")


@pytest.fixture
def cuda_build(tmp_path) -> Path:
    source = tmp_path / "scale.mlir"
    source.write_text(PROGRAM)
    return compile_for(source, tmp_path / "scale_cuda.vmfb", "cuda")


def test_module_view_shows_cuda_kernels_and_their_ptx(cuda_build):
    module = open_vmfb(cuda_build)
    [exe] = module.executables
    cuda = read_cda1(exe.data)
    assert engine_adapter.text_title(exe) == "PTX"
    assert engine_adapter.executable_entry_points(exe) == list(cuda.export_names)
    text = engine_adapter.executable_text(module, exe)
    assert ".target sm_80" in text  # the PTX itself, as text
    assert f".entry {cuda.export_names[0]}(" in text
    x, y, z = cuda.exports[0].block_dims
    assert f"block {x}x{y}x{z}" in text
    assert "bindings (read-only, read-write)" in text
    from app.views.module_tree import executable_children

    children = {n.label: n.value for n in executable_children(module, exe)}
    assert children["PTX module 0"] == f"{len(cuda.modules[0].ptx):,} characters"


def test_opening_a_cuda_build_says_there_is_no_driver(qtbot, main_window, cuda_build):
    window = main_window
    devices = window.panels["device"]
    qtbot.waitUntil(lambda: devices.listed and devices.cuda_missing is not None, timeout=TIMEOUT)
    assert devices.cuda_status.text() == "CUDA is not available: no CUDA driver (libcuda.so.1) on this machine."
    assert devices.cuda_status.toolTip() == f"CUDA is not available: {NO_DRIVER}"  # and what to do instead
    assert all(not str(devices.combo.itemData(i)).startswith("cuda") for i in range(devices.combo.count()))
    window.open_file(cuda_build)
    qtbot.waitUntil(lambda: window.workbench.state.mismatch is not None, timeout=TIMEOUT)
    assert window.workbench.state.mismatch.needs == "cuda"
    text = window.mismatch_bar.label.text()
    assert "built for a CUDA device (cuda-nvptx-fb)" in text
    assert NO_DRIVER[0].upper() + NO_DRIVER[1:] in text
    assert window.workbench.device == "local-sync"  # nothing runs it here: it stays where it was


def test_the_editor_offers_a_cuda_builds_ptx_and_checks_an_edit(qtbot, cuda_build, tmp_path):
    """The module alone: its PTX is the editable text; an edit that keeps IREE's kernel arguments builds, one
    that drops a parameter is refused with the reason, before any run."""
    from app.views.executable_editor import editor_for_module
    from engine.substitute.documents import DraftStore

    editor = editor_for_module(cuda_build, drafts=DraftStore(tmp_path / "drafts"))
    qtbot.addWidget(editor)
    [doc] = editor.documents
    assert doc.kind == "ptx" and doc.title.endswith("(PTX)")
    [exe] = open_vmfb(cuda_build).executables
    kernel = read_cda1(exe.data).export_names[0]
    assert editor.document_for_dispatch(kernel) == 0  # a stop at the kernel's dispatch opens its PTX
    from types import SimpleNamespace

    editor.follow_dispatch(SimpleNamespace(export=kernel))  # ...at the kernel's .entry line
    assert editor.text.textCursor().block().text().startswith(f".visible .entry {kernel}(")
    editor.open_document(0)
    assert "mul.rn.f32" in editor.text.toPlainText()
    editor.text.setPlainText(editor.text.toPlainText().replace("mul.rn.f32", "add.rn.f32"))
    editor.apply()
    qtbot.waitUntil(lambda: not editor.busy(), timeout=TIMEOUT)
    assert editor.status.text().startswith(f"Built {doc.name}"), editor.status.text()
    text = editor.text.toPlainText()
    first_param = text.index(".param", text.index(f".entry {kernel}("))
    editor.text.setPlainText(text[:first_param] + text[text.index(".param", first_param + 1):])
    editor.apply()
    qtbot.waitUntil(lambda: not editor.busy(), timeout=TIMEOUT)
    assert "interface mismatch" in editor.status.text() and "IREE passes" in editor.status.text()


def test_a_hip_build_in_the_window_without_rocm(qtbot, main_window, tmp_path):
    """The module view shows a HIP build's kernels and code objects; opening it says in the runtime's one
    sentence why it cannot run here, and the Device panel says why no HIP device is listed."""
    from engine.runtime.hal.devices import hip_absence
    from engine.runtime.hal.hip.driver import NO_RUNTIME
    from engine.runtime.vmfb.hip1 import read_hip1

    if hip_absence() is None:
        pytest.skip("a HIP device is present: this checks the window without ROCm")
    source = tmp_path / "scale.mlir"
    source.write_text(PROGRAM)
    hip_build = compile_for(source, tmp_path / "scale_hip.vmfb", "rocm")
    module = open_vmfb(hip_build)
    [exe] = module.executables
    assert engine_adapter.text_title(exe) == "HSACO"
    assert engine_adapter.executable_entry_points(exe) == list(read_hip1(exe.data).export_names)
    text = engine_adapter.executable_text(module, exe)
    assert "code object [0]: " in text and "gfx942" in text and ".text" in text
    from app.views.module_tree import executable_children

    children = {n.label: n.value for n in executable_children(module, exe)}
    assert children["code object 0"].endswith("bytes, gfx942")
    window = main_window
    devices = window.panels["device"]
    qtbot.waitUntil(lambda: devices.listed and devices.hip_missing is not None, timeout=TIMEOUT)
    assert devices.hip_status.text() == "HIP is not available: no HIP runtime (libamdhip64.so, ROCm) on this machine."
    assert devices.hip_status.toolTip() == f"HIP is not available: {NO_RUNTIME}"
    window.open_file(hip_build)
    qtbot.waitUntil(lambda: window.workbench.state.mismatch is not None, timeout=TIMEOUT)
    assert window.workbench.state.mismatch.needs == "hip"
    bar = window.mismatch_bar.label.text()
    assert "built for an AMD GPU (HIP) (rocm-hsaco-fb)" in bar and NO_RUNTIME[0].upper() + NO_RUNTIME[1:] in bar
