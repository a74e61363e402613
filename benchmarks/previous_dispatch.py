"""Previous Dispatch deep in a long command buffer (issue 29): the time-travel session parked at dispatch N of
the 96-layer transformer (964 dispatches in one memoized command buffer) travels back to dispatch N-1 and
parks in it, as the window's Previous Dispatch does (``TravelTo(dispatch=N-1, park=True)``).

A travel restores the checkpoint before the ``queue.execute`` instruction and replays it: the dispatches
before N-1 run as one native batch (passed over), N-1 alone. Prints the time of each travel (goal <= 1 s)
and the process's peak memory before and after the travels (bounded: no per-dispatch copies kept).

    .venv/bin/python benchmarks/previous_dispatch.py [--at 900] [--travels 5] [--model PATH.mlir[.xz]]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from native_batches import MODELS, compiled  # noqa: E402

from engine.session.inprocess import InProcessSession  # noqa: E402
from engine.session.protocol import Breakpoint, Call, Open, Opened, SetBreakpoints, Stopped, TravelTo  # noqa: E402
from engine.session.timetravel_session import TimeTravelSession  # noqa: E402


class _Events:
    def __init__(self):
        import queue

        self.queue = queue.Queue()

    def __call__(self, event):
        self.queue.put(event)

    def next(self, timeout: float = 600.0):
        return self.queue.get(timeout=timeout)


def _stopped(events: _Events):
    while True:
        event = events.next()
        if isinstance(event, Stopped):
            return event
        if type(event).__name__ in ("Failed", "Finished", "Crashed"):
            raise SystemExit(f"expected a stop, got {event}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--at", type=int, default=900)
    parser.add_argument("--travels", type=int, default=5)
    parser.add_argument("--model", default=str(MODELS / "transformer96.mlir.xz"))
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "iree_lens_native_batches"))
    args = parser.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    source = Path(args.model)
    vmfb = compiled(source, cache)
    x = source.parent / f"{source.name.removesuffix('.xz').removesuffix('.mlir')}_x.npy"
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    events = _Events()
    session = InProcessSession(TimeTravelSession, events)
    try:
        session.send(Open(str(vmfb), "local-sync"))
        opened = events.next()
        assert isinstance(opened, Opened), opened
        session.send(SetBreakpoints((Breakpoint("dispatch", ordinal=args.at),)))
        start = time.perf_counter()
        session.send(Call("main", (f"@{x}",)))
        stop = _stopped(events)
        assert stop.location.dispatch_info.ordinal == args.at, stop
        print(f"run to the breakpoint at dispatch {args.at}: {time.perf_counter() - start:.3f} s")
        session.send(SetBreakpoints(()))
        peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        times = []
        for k in range(args.travels):
            target = args.at - 1 - k
            start = time.perf_counter()
            session.send(TravelTo(dispatch=target, park=True))
            stop = _stopped(events)
            times.append(time.perf_counter() - start)
            info = stop.location.dispatch_info
            assert info is not None and info.ordinal == target and str(info.when) == "before", stop
        peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        shown = ", ".join(f"{t:.3f}" for t in times)
        print(f"Previous Dispatch from {args.at} ({args.travels} travels back, one dispatch each): {shown} s")
        print(f"  best {min(times):.3f} s, worst {max(times):.3f} s (goal <= 1 s)")
        print(f"  peak memory {peak_before:.0f} MiB before the travels, {peak_after:.0f} MiB after")
    finally:
        session.close()


if __name__ == "__main__":
    main()
