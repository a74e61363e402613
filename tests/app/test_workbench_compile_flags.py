"""The compile panel with IREE's own target flags in its Flags field: they replace the Target choice, and
the snapshots are byte-identical to ``iree-compile --dump-compilation-phases-to`` with the same flags,
found under the module's name (``module @module``) whatever the file is called."""

from __future__ import annotations

from PySide6.QtCore import QSettings
from support import iree_compile

from app.views.compile_panel import CompilePanel
from engine.compiler import PHASES

SOURCE = """\
module @module {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = math.exp %a : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""
FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx"]


def test_iree_target_flags_in_the_panel_replace_the_target(qtbot, tmp_path):
    source = tmp_path / "torch_export.mlir"
    source.write_text(SOURCE)
    panel = CompilePanel(settings=QSettings(str(tmp_path / "lens.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(panel)
    panel.set_source(source)
    panel.options.target.setCurrentText("llvm-cpu")  # the flags below must win over this
    panel.options.flags.setText(" ".join(FLAGS))
    with qtbot.waitSignal(panel.compilationFinished, timeout=120_000) as done:
        panel.compile()
    qtbot.waitUntil(lambda: not panel.is_busy())
    comp = done.args[0]
    assert comp.ok and comp.request.target == "vmvx"
    assert [p.phase for p in comp.phases] == list(PHASES)

    direct = tmp_path / "direct"
    direct.mkdir()
    iree_compile(
        [str(source), *FLAGS, f"--dump-compilation-phases-to={direct}", "-o",
         str(direct / "m.vmfb")],
        check=True,
        )
    for snapshot in comp.phases:
        assert snapshot.path.name.startswith("module.")
        assert snapshot.path.read_bytes() == (direct / snapshot.path.name).read_bytes(), snapshot.path.name
    assert "llvm-cpu" not in comp.phase("hal").text()
