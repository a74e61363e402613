"""An .mlir that does not compile: the log gives the compiler's diagnostics, not the loader's traceback.

Walk (a program using an undeclared value, opened at 1366x768): the banner named the error, and the Log
under it printed a Python traceback of app/module_loader.py, a CompileError being an expected answer."""

from __future__ import annotations

from app.messages import Level

BROKEN = """\
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  %1 = arith.mulf %0, %c : tensor<4xf32>
  %2 = arith.subf %1, %d : tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""


def test_a_compile_error_logs_its_diagnostics(qtbot, main_window, tmp_path):
    window = main_window
    source = tmp_path / "broken.mlir"
    source.write_text(BROKEN)
    errors = []
    window.messages.messageAdded.connect(lambda m: m.level == Level.ERROR and errors.append(m))
    window.open_file(source)
    qtbot.waitUntil(lambda: bool(errors), timeout=120_000)
    message = errors[0]
    assert message.text.startswith("Cannot open broken.mlir: iree-compile failed"), message.text
    assert "Traceback" not in message.details and "module_loader.py" not in message.details, message.details
    assert "broken.mlir:3:" in message.details and "use of undeclared SSA value" in message.details
