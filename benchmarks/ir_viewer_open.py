"""Time opening and scrolling a ~50 MB MLIR dump in the IR viewer (offscreen).

    .venv/bin/python benchmarks/ir_viewer_open.py [--mb 50] [--compare-plaintext]

The file is a real phase dump (the ``vm`` phase of the mlp sample, with its embedded ELF as a long hex
line) repeated up to the size asked. Prints: file size and lines; index build; open to first paint;
scrolling (page steps and random jumps, each repainted); find of a token near the end; fold all.
``--compare-plaintext`` also times QPlainTextEdit.setPlainText on the same text (why the viewer is a
virtual view).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_dump(mb: float, folder: Path) -> Path:
    from engine.compiler.job import iree_compile_path
    from engine.samples import sample_path

    subprocess.run(
        [iree_compile_path(), str(sample_path("mlp")), "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
         f"--dump-compilation-phases-to={folder}", "-o", str(folder / "mlp.vmfb")],
        check=True, capture_output=True,
    )  # fmt: skip
    chunk = (folder / "mlp.12.vm.mlir").read_bytes()
    big = folder / "big.mlir"
    n = int(mb * 1e6) // len(chunk) + 1
    with big.open("wb") as f:
        for i in range(n):
            f.write(chunk.replace(b"@main", b"@main_%d" % i))
        f.write(b"// END_MARKER_TOKEN\n")
    return big


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--compare-plaintext", action="store_true")
    args = ap.parse_args()
    from PySide6.QtWidgets import QPlainTextEdit

    from app.main import make_application
    from app.views.ir_document import IrDocument
    from app.views.ir_viewer import IrViewer

    # The application as the window makes it (None pinned before anything paints: app/qt_none_refcount.py).
    app = make_application([])
    with tempfile.TemporaryDirectory() as tmp:
        path = make_dump(args.mb, Path(tmp))
        size = path.stat().st_size
        w = IrViewer()
        w.resize(1200, 800)
        w.show()
        app.processEvents()

        t0 = time.perf_counter()
        doc = IrDocument.from_file(path)
        t1 = time.perf_counter()
        w.set_document(doc, path.name)
        w.view.viewport().repaint()
        app.processEvents()
        t2 = time.perf_counter()
        print(
            f"file: {size / 1e6:.1f} MB, {doc.line_count:,} lines, longest line {doc.max_line_length:,} bytes"
        )
        print(f"index (read + numpy line/brace index): {t1 - t0:.3f} s")
        print(f"open to first paint: {t2 - t0:.3f} s")

        bar = w.view.verticalScrollBar()
        frames = []
        for _ in range(300):
            t = time.perf_counter()
            bar.setValue(bar.value() + bar.pageStep())
            w.view.viewport().repaint()
            frames.append(time.perf_counter() - t)
        frames.sort()
        print(
            f"scroll by page, 300 repaints: median {frames[150] * 1e3:.2f} ms, max {frames[-1] * 1e3:.2f} ms"
        )
        import random

        rnd = random.Random(0)
        frames = []
        for _ in range(200):
            t = time.perf_counter()
            bar.setValue(rnd.randrange(bar.maximum() + 1))
            w.view.viewport().repaint()
            frames.append(time.perf_counter() - t)
        frames.sort()
        print(f"random jumps, 200 repaints: median {frames[100] * 1e3:.2f} ms, max {frames[-1] * 1e3:.2f} ms")
        hs = w.view.horizontalScrollBar()
        t = time.perf_counter()
        for v in range(0, hs.maximum(), max(1, hs.maximum() // 50)):
            hs.setValue(v)
            w.view.viewport().repaint()
        print(
            f"horizontal scroll over the longest line, 50 repaints: {(time.perf_counter() - t) / 50 * 1e3:.2f} ms each"
        )

        w.view.go_to_line(0)
        t = time.perf_counter()
        m = w.find_next("END_MARKER_TOKEN")
        print(f"find a token at the end: {time.perf_counter() - t:.3f} s (line {m.line + 1 if m else None})")
        t = time.perf_counter()
        w.view.fold_all(2)
        w.view.viewport().repaint()
        print(f"fold all (depth 2): {time.perf_counter() - t:.3f} s, {len(w.view._visible):,} rows left")

        if args.compare_plaintext:
            text = path.read_text()
            e = QPlainTextEdit()
            e.resize(1200, 800)
            e.show()
            t = time.perf_counter()
            e.setPlainText(text)
            e.viewport().repaint()
            app.processEvents()
            print(f"QPlainTextEdit.setPlainText + first paint, same file: {time.perf_counter() - t:.3f} s")
            e.close()
        w.close()


if __name__ == "__main__":
    main()
