"""The window's side of ``iree-lens split``: a split folder opens as a table of its tests with their
verdicts per build (saved checks and checks made here), and a dispatch of the run's list is exported as a
standalone test that IREE's own tools compile and run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt
from support import iree_compile, iree_tool, tiny_program

from app.views.run_dispatch_list import RunDispatch
from app.views.split_document import SplitDocument
from engine.compiler import CompileRequest
from engine.compiler.targets import TARGETS
from engine.split.check import check_split, save_check
from engine.split.splitter import read_manifest, split_program

TIMEOUT = 180_000


def _split_tiny(tmp_path: Path) -> Path:
    source = tiny_program(tmp_path / "tiny.mlir")
    out = tmp_path / "split"
    split_program(CompileRequest.from_file(source), "main", ["4x16xf32=0.25"], out)
    return out


def _cells(document: SplitDocument, column: int) -> list[str]:
    model = document.model
    return [model.data(model.index(row, column)) for row in range(model.rowCount())]


def test_split_folder_opens_as_a_table_with_verdicts_per_build(qtbot, main_window, tmp_path):
    out = _split_tiny(tmp_path)
    # a check saved by `split --check` (here: its library call), with one test broken by hand
    tests = read_manifest(out)
    broken = out / tests[1].dir / "dispatch.mlir"
    broken.write_text(broken.read_text().replace("arith.maximumf", "arith.minimumf", 1))
    flags = list(TARGETS["llvm-cpu"].flags)
    save_check(out, flags, "local-sync", check_split(out, flags, "local-sync"))

    main_window.open_file(out)
    document = main_window.documents.document(f"split:{out.resolve()}")
    assert isinstance(document, SplitDocument)
    model = document.model
    assert model.rowCount() == 2
    assert [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())] == [
        "Test", "Runs", "Source line", "llvm-cpu on local-sync"]  # fmt: skip
    assert _cells(document, 0) == [t.dir for t in tests]
    assert _cells(document, 2)[0].endswith("tiny.mlir:16")
    assert _cells(document, 3)[1] == "diverged" and _cells(document, 3)[0] in ("exact", "within rounding")

    # Check with vmvx from the window: a second build column; the broken test diverges there too
    with qtbot.waitSignal(main_window.worker.idle, timeout=TIMEOUT):
        document.target_box.setCurrentText("vmvx")
        document.check_button.click()
    assert model.headerData(4, Qt.Orientation.Horizontal) == "vmvx on local-sync"
    assert _cells(document, 4)[1] == "diverged" and _cells(document, 4)[0] in ("exact", "within rounding")
    assert "max abs" in model.data(model.index(1, 4), Qt.ItemDataRole.ToolTipRole)
    # the check was saved: the folder opened again shows both builds
    again = SplitDocument(out)
    qtbot.addWidget(again)
    assert again.model.columnCount() == 5


def test_export_a_dispatch_of_the_run_list_as_a_test(qtbot, main_window, tmp_path):
    source = tiny_program(tmp_path / "tiny.mlir")
    main_window.open_file(source)
    qtbot.waitUntil(lambda: main_window.workbench.module is not None, timeout=TIMEOUT)
    main_window.workbench.set_call("main", ["4x16xf32=0.25"])
    listing = main_window.show_panel("run_dispatch_list")
    names = [e for e in _export_names(main_window.workbench.module.path) if "dispatch_1" in e]
    listing.model.set_rows([RunDispatch(0, "not_this_one", None), RunDispatch(1, names[0], None)])
    assert listing.why_no_export() is None

    out = tmp_path / "exported"
    with qtbot.waitSignal(main_window.worker.idle, timeout=TIMEOUT):
        assert listing.export_test_to(1, out) is not None
    [entry] = json.loads((out / "manifest.json").read_text())["tests"]
    assert entry["dispatch"] == names[0] and entry["ordinal"] == 1
    qtbot.waitUntil(lambda: main_window.documents.document(f"split:{out.resolve()}") is not None, timeout=TIMEOUT)
    # the exported test is what IREE's own tools compile and run to its expected output
    test_dir = out / entry["dir"]
    vmfb = tmp_path / "t.vmfb"
    compiled = iree_compile([str(test_dir / "dispatch.mlir"),
                               *TARGETS["llvm-cpu"].flags, "-o", str(vmfb)], text=True)  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr
    result = tmp_path / "r.npy"
    ran = subprocess.run([iree_tool("iree-run-module"), f"--module={vmfb}", "--function=main",
                          *[f"--input=@{test_dir / 'inputs' / n}" for n in entry["inputs"]], f"--output=@{result}"],
                         capture_output=True, text=True)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    np.testing.assert_allclose(np.load(result), np.load(test_dir / "expected" / "result0.npy"), rtol=1e-5, atol=1e-5)


def _export_names(vmfb: Path) -> list[str]:
    """The dispatches' export names, as the module's host code looks them up."""
    from engine.runtime.vmfb.call_sites import dispatch_call_sites
    from engine.runtime.vmfb.module import open_vmfb

    return [site.export for site in dispatch_call_sites(open_vmfb(vmfb)) if site.export]
