"""Inspector figures on a 1 GiB f32 tensor: statistics (min/max/mean/std, NaN/Inf counts) plus a
downsampled heatmap image (goal: under a second together), and the histogram and a compare for reference.

    nice -n 19 .venv/bin/python benchmarks/dispatch_tensor_stats.py [ROUNDS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.dispatch.compare import compare  # noqa: E402
from engine.dispatch.statistics import heatmap_image, histogram, tensor_stats  # noqa: E402


def best(f, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    a = np.random.default_rng(0).standard_normal((16384, 16384), dtype=np.float32)  # 1 GiB
    a[123, 456] = np.nan
    a[9000, 9] = np.inf
    print(f"tensor: {a.shape} f32, {a.nbytes / 2**30:.2f} GiB")
    stats = best(lambda: tensor_stats(a), rounds)
    heat = best(lambda: heatmap_image(a), rounds)
    both = best(lambda: (tensor_stats(a), heatmap_image(a)), rounds)
    hist = best(lambda: histogram(a), rounds)
    s = tensor_stats(a)
    print(f"statistics {stats * 1e3:.0f} ms ({s.health}; mean {s.mean:.3g}, std {s.std:.4f})")
    print(f"heatmap image (1024x1024 RGBA) {heat * 1e3:.0f} ms")
    print(f"statistics + heatmap {both * 1e3:.0f} ms (goal < 1000 ms)")
    print(f"histogram (1M samples) {hist * 1e3:.0f} ms")
    b = a.copy()
    b[5, 5] += 1.0
    cmp = best(lambda: compare(a, b, 1e-6, 0.0), 1)
    print(f"compare with another 1 GiB tensor {cmp * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
