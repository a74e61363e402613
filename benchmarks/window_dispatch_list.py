"""Typing in the run dispatch list's filter at model scale: seconds per keystroke with N rows, for the list as
the window builds it (columns fitted once per change, rows filtered by name) and, for comparison, the same
table with Qt's ResizeToContents columns (what the list used before issue 35).

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/window_dispatch_list.py [--rows 2000]

Rows are dispatches named as IREE names a transformer's (``main$async_dispatch_N_…``); each keystroke applies
the filter and paints the table, as the window does once typing pauses.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication, QHeaderView  # noqa: E402

from app.views.run_dispatch_list import RunDispatch, RunDispatchList  # noqa: E402

KINDS = ("matmul_16x32x32_f32", "reduction_16x32_f32", "elementwise_16x32_f32", "attention_16x16x32_f32")


def rows(n: int) -> list[RunDispatch]:
    return [RunDispatch(i, f"main$async_dispatch_{i % 97}_{KINDS[i % 4]}", i * 3) for i in range(n)]


def keystrokes(view: RunDispatchList, text: str) -> list[float]:
    times = []
    for k in range(1, len(text) + 1):
        view.filter_edit.setText(text[:k])
        start = time.perf_counter()
        view.filter_typing.apply()
        view.repaint()
        QApplication.processEvents()
        times.append(time.perf_counter() - start)
    view.filter_edit.clear()
    view.filter_typing.apply()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2000)
    a = p.parse_args()
    app = QApplication.instance() or QApplication([])
    view = RunDispatchList(services=None)
    view.resize(900, 400)
    view.show()
    start = time.perf_counter()
    view.model.set_rows(rows(a.rows))
    QApplication.processEvents()
    fill = time.perf_counter() - start
    ordinal_ok = view.table.columnWidth(0) > view.table.fontMetrics().horizontalAdvance(str(a.rows - 1))
    fitted = keystrokes(view, "matmul")
    header = view.table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
    QApplication.processEvents()
    measured = keystrokes(view, "matmul")
    print(f"rows: {a.rows:,}; list filled and columns fitted in {fill * 1000:.0f} ms; ordinal #{a.rows - 1} in full: {ordinal_ok}")
    print(f"per keystroke, fitted columns: median {statistics.median(fitted) * 1000:.1f} ms, max {max(fitted) * 1000:.1f} ms")
    print(f"per keystroke, ResizeToContents: median {statistics.median(measured) * 1000:.1f} ms, max {max(measured) * 1000:.1f} ms")
    print(f"load average: {os.getloadavg()[0]:.1f} (on {os.cpu_count()} CPUs)")
    view.close()
    app.processEvents()


if __name__ == "__main__":
    main()
