"""What typing costs a debug session's plain calls (no stop armed), on the CPU (figures, not a timed test).

With the executables' sources, a session follows which bytes of each in-place tensor the program defined
(``engine.session.undefined_bytes``): the dispatches that work in place run one at a time, their in-place
tensors copied before and compared after, and the device's fills are followed. For each shared model
(``../shared/models``: EfficientViT-M0, SqueezeNet 1.1, the 96-layer transformer), compiled for the host CPU:

  untyped   an in-process ``DebugSession`` opened without sources (``rebuild_sources=False``): the call
            runs in native batches
  typed     the same with the sources (rebuilt from the model and waited for at open, as ``iree-lens debug``
            does; the first rebuild of a model takes up to minutes, then it is kept)

Each line: the median and best of ``--repeats`` calls after a first one, and the typed/untyped ratio.
Measured on the 2-core development machine (untyped / typed, each model's own input): EfficientViT 9 / 36 ms,
SqueezeNet 120 / 172 ms, transformer96 1.1 / 1.1 ms. Before the watch copied only the in-place tensors (it
had every binding copied), kept what is defined as byte masks (Python ranges: tens of thousands a
convolution) and did nothing for a program with no in-place dispatch (3051e95): 149 ms, 0.99 s and 10.5 ms.

    .venv/bin/python benchmarks/typed_session_calls.py [--repeats N] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.native_batches import DEFAULT, MODELS, compiled  # noqa: E402
from engine.session.debug_session import DebugSession  # noqa: E402
from engine.session.inprocess import InProcessSession  # noqa: E402
from engine.session.protocol import Call, Failed, Finished, Log, Open, Opened  # noqa: E402


def _next(events: queue.Queue, kind: type, timeout: float = 1800):
    while isinstance(event := events.get(timeout=timeout), Log):
        pass
    if isinstance(event, Failed) or not isinstance(event, kind):
        raise RuntimeError(f"expected {kind.__name__}, got {event}")
    return event


def call_times(vmfb: Path, x: Path, typed: bool, repeats: int) -> list[float]:
    events: queue.Queue = queue.Queue()
    session = InProcessSession(DebugSession, events.put)
    try:
        session.send(Open(str(vmfb), rebuild_sources=typed, wait_for_sources=typed))
        _next(events, Opened)
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            session.send(Call("main", (f"@{x}",), results_text=False))
            _next(events, Finished)
            times.append(time.perf_counter() - start)
        return times[1:]  # the first call plans the device's batches
    finally:
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "iree_lens_native_batches"))
    args = parser.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for stem in DEFAULT:
        source, x = MODELS / f"{stem}.mlir.xz", MODELS / f"{stem}_x.npy"
        if not source.exists() or not x.exists():
            print(f"{stem}: skipped ({source} or {x} is absent)")
            continue
        vmfb = compiled(source, cache)
        medians = {}
        for typed in (False, True):
            times = call_times(vmfb, x, typed, args.repeats)
            medians[typed] = statistics.median(times)
            print(f"{stem:16} {'typed' if typed else 'untyped':8} median {medians[typed] * 1e3:9.2f} ms  "
                  f"best {min(times) * 1e3:9.2f} ms")  # fmt: skip
        print(f"{stem:16} typed / untyped {medians[True] / medians[False]:.2f}x")


if __name__ == "__main__":
    main()
