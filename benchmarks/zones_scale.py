"""Ten million zones: build, save/load, bytes per zone, query and offscreen redraw of the timeline.

* build: ``TraceBuilder.build`` from unsorted columns (sort into lanes, depth from nesting);
* load: ``.lenstrace`` (the model's columns) from disk, and the zones per second of a Chrome JSON load;
* memory: the model's bytes per zone (the columns), and the process's resident growth while loading;
* redraw: a ``ZoneTimeline`` 1600x900 rendered offscreen (``widget.grab()``, which paints everything:
  axes, boxes, labels) at full zoom-out and at a deep zoom; the first full zoom-out also builds the
  levels of detail, reported apart.

Usage: ``QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/zones_scale.py [--zones N]``
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from engine.trace.chrome import load_chrome_json, write_chrome_json  # noqa: E402
from engine.trace.model import TraceBuilder  # noqa: E402
from engine.trace.native import load_lenstrace, save_lenstrace  # noqa: E402
from engine.trace.query import ZoneIndex  # noqa: E402


def synthetic(n: int, tracks: int = 8, seed: int = 0) -> TraceBuilder:
    """``n`` zones on ``tracks`` tracks: leaf dispatches of 0.2-2 µs, grouped under parents of 100."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder("synthetic")
    names = [b.names.intern(f"dispatch_{k}") for k in range(64)]
    parent = b.names.intern("command buffer")
    per_track = n // tracks
    leaves = per_track - per_track // 101
    for t in range(tracks):
        tid = b.track(("t", t), f"queue {t}", "queue")
        dur = rng.integers(200, 2000, leaves)
        gap = rng.integers(10, 400, leaves)
        start = np.cumsum(dur + gap) - dur
        end = start + dur
        g = np.arange(0, leaves, 100)
        last = np.minimum(g + 99, leaves - 1)
        s = np.concatenate([start, start[g]])
        e = np.concatenate([end, end[last]])
        nm = np.concatenate([rng.choice(names, leaves), np.full(len(g), parent)])
        shuffle = rng.permutation(len(s))  # readers hand zones over unsorted
        b.add_zone_arrays(s[shuffle], e[shuffle], np.full(len(s), tid), nm[shuffle])
    return b


def time_grab(timeline, repeats: int = 7) -> tuple[list[float], list[float]]:
    """Wall time of ``grab()`` (the whole widget) and of the zones item's own paint, per redraw."""
    out, item = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        timeline.grab()
        out.append((time.perf_counter() - t) * 1e3)
        item.append(timeline.item.last_paint_ms)
    return out, item


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--zones", type=int, default=10_000_000)
    ap.add_argument("--json-zones", type=int, default=200_000, help="zones in the Chrome JSON load test")
    args = ap.parse_args()
    n = args.zones

    b = synthetic(n)
    t = time.perf_counter()
    trace = b.build()
    print(
        f"build (sort into lanes, nesting depth) of {len(trace.zones):,} zones: {time.perf_counter() - t:.2f} s"
    )
    z = trace.zones
    print(f"model: {z.nbytes / len(z):.1f} bytes per zone ({z.nbytes / 2**20:.0f} MiB for {len(z):,} zones)")

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.lenstrace"
        t = time.perf_counter()
        save_lenstrace(trace, path)
        print(
            f"save .lenstrace: {time.perf_counter() - t:.2f} s, {path.stat().st_size / len(z):.1f} bytes per zone on disk"
        )
        del trace, z, b
        # Load in a fresh process, so its resident memory counts the loaded trace and nothing freed before.
        probe = (
            "import sys, time; sys.path.insert(0, sys.argv[2]); import numpy;"
            "from engine.trace.native import load_lenstrace;"
            "rss = lambda: int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20;"
            "r0 = rss(); t = time.perf_counter(); tr = load_lenstrace(sys.argv[1]); dt = time.perf_counter() - t;"
            "print(dt, rss() - r0, len(tr.zones))"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path), str(ROOT)], capture_output=True, text=True, check=True
        ).stdout.split()
        load_s, grew, count = float(out[0]), float(out[1]), int(out[2])
        print(
            f"load .lenstrace of {count:,} zones (fresh process): {load_s:.2f} s (goal <= 3 s); "
            f"resident memory +{grew:.0f} MiB = {grew * 2**20 / count:.1f} bytes per zone"
        )
        trace = load_lenstrace(path)

        small = synthetic(args.json_zones, seed=1).build()
        jpath = Path(d) / "small.json"
        write_chrome_json(small, jpath)
        t = time.perf_counter()
        back = load_chrome_json(jpath)
        dt = time.perf_counter() - t
        print(
            f"Chrome JSON load: {len(back.zones):,} zones in {dt:.2f} s = {len(back.zones) / dt / 1e6:.2f} M zones/s "
            f"({jpath.stat().st_size / len(back.zones):.0f} bytes per zone in the file)"
        )

    index = ZoneIndex(trace)
    lo, hi = trace.span
    t = time.perf_counter()
    boxes = index.visible(lo, hi, (hi - lo) // 1600)
    print(
        f"query full range at 1600 px (first: builds levels of detail): {(time.perf_counter() - t) * 1e3:.0f} ms, {len(boxes)} boxes"
    )
    for label, t0, t1 in (("full", lo, hi), ("deep (20 µs)", (lo + hi) // 2, (lo + hi) // 2 + 20_000)):
        res = max((t1 - t0) // 1600, 1)
        times = []
        for _ in range(20):
            t = time.perf_counter()
            boxes = index.visible(t0, t1, res)
            times.append((time.perf_counter() - t) * 1e3)
        print(f"query {label}: median {np.median(times):.2f} ms, {len(boxes)} boxes")

    from PySide6.QtWidgets import QApplication

    from app.main import configure_pyqtgraph
    from app.views.zones_timeline import ZoneTimeline

    app = QApplication.instance() or QApplication([])
    configure_pyqtgraph()
    timeline = ZoneTimeline()
    timeline.resize(1600, 900)
    timeline.set_trace(trace, index)
    timeline.show()
    app.processEvents()
    timeline.item.setVisible(False)
    empty, _ = time_grab(timeline)
    timeline.item.setVisible(True)
    print(f"redraw of the plot without zones (axes, background): median {np.median(empty):.1f} ms")
    full, item = time_grab(timeline)
    print(
        f"redraw full zoom-out (1600x900, grab): median {np.median(full):.1f} ms, best {min(full):.1f} ms "
        f"(goal <= 16 ms); zones item paint median {np.median(item):.1f} ms, best {min(item):.1f} ms; boxes {timeline.item.painted_count}"
    )
    mid = float((hi - lo) / 2)
    timeline.getViewBox().setXRange(mid, mid + 20_000, padding=0)
    app.processEvents()
    deep, item = time_grab(timeline)
    print(
        f"redraw deep zoom (20 µs):              median {np.median(deep):.1f} ms, best {min(deep):.1f} ms "
        f"(goal <= 16 ms); zones item paint median {np.median(item):.1f} ms, best {min(item):.1f} ms; boxes {timeline.item.painted_count}"
    )
    timeline.getViewBox().setXRange(mid, mid + 2_000_000, padding=0)
    app.processEvents()
    middle, item = time_grab(timeline)
    print(
        f"redraw 2 ms window:                     median {np.median(middle):.1f} ms; zones item paint "
        f"median {np.median(item):.1f} ms; boxes {timeline.item.painted_count}"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
