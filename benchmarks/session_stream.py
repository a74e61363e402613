"""The session over a byte stream (``iree-lens serve --stdio``) against the in-process session (figures).

Prints:

  step round trip   median time of one ``Step(into)`` -> ``Stopped`` on a small program (the matmul sample),
                    in process and over ``serve --stdio`` (the ratio must stay within 2x), the reply read on
                    the caller's thread (a blocking client); in brackets: read by the transport's reader
                    thread and handed over (a callback client: the GUI, the DAP adapter)
  tensor read       ``ReadBinding`` of a dispatch's input of SIZE MiB (default 1024: a 1 GiB tensor of
                    random f32, which does not compress), stopped before the dispatch: MB/s over the stream,
                    and the same read in process for comparison; ``--zeros`` reads a tensor of zeros
                    (the compressed path)

Each measurement is printed with the load average before and after it (this machine is shared: compare the
stream's figure with the in-process figure of the same run). ``--repeat N`` measures N times.

Run: ``.venv/bin/python benchmarks/session_stream.py [--mib 1024] [--steps 200] [--repeat 3] [--zeros]
[--remote=COMMAND]``.
"""

from __future__ import annotations

import argparse
import os
import queue
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.samples import sample_path  # noqa: E402
from engine.session.debug_session import DebugSession  # noqa: E402
from engine.session.inprocess import InProcessSession  # noqa: E402
from engine.session.protocol import (  # noqa: E402
    BindingBytes,
    Breakpoint,
    BreakpointKind,
    Call,
    Continue,
    Finished,
    Open,
    Opened,
    ReadBinding,
    SetBreakpoints,
    Step,
    Stopped,
)
from engine.session.stream import StreamSession  # noqa: E402

NEGATE = """
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


def compile_to(source: Path, out: Path) -> Path:
    compiler = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(compiler), str(source), *TARGETS["llvm-cpu"].flags, "-o", str(out)], check=True,
                   capture_output=True)
    return out


class Driver:
    """A session (in process or over serve --stdio) and a blocking ``ask(command) -> event``."""

    server: list[str] = [sys.executable, "-m", "app.launcher", "serve", "--stdio"]

    def __init__(self, remote: bool, pull: bool = True):
        self.events: queue.Queue = queue.Queue()
        self.pull = remote and pull
        if remote:
            self.session = StreamSession(self.server, "debug", self.events.put, pull=self.pull)
        else:
            self.session = InProcessSession(DebugSession, self.events.put)

    def ask(self, command, timeout: float = 600):
        self.session.send(command)
        if self.pull and self.events.empty():
            self.session.pump()  # the reply is read on this thread (as a blocking SessionClient's next_event())
        return self.events.get(timeout=timeout)

    def close(self) -> None:
        self.session.close()


def step_round_trips(module: Path, steps: int) -> dict[str, list[float]]:
    """Step times in process and over the stream (the reply read by the caller, a blocking client's way,
    and by the transport's reader thread, a callback client's), interleaved one by one so that all see the
    same load (this machine is shared: medians of alternating samples compare fairly)."""
    drivers = {"in process": Driver(remote=False), "stream": Driver(remote=True),
               "stream, reader thread": Driver(remote=True, pull=False)}
    times: dict[str, list[float]] = {name: [] for name in drivers}
    inputs = ("4x8xf32=0.5", "8x16xf32=0.25")
    try:
        for driver in drivers.values():
            assert isinstance(driver.ask(Open(str(module))), Opened)
            assert isinstance(driver.ask(Call("main", inputs, stop_at_entry=True)), Stopped)
        while len(times["stream"]) < steps:
            for name, driver in drivers.items():
                start = time.perf_counter()
                event = driver.ask(Step())
                times[name].append(time.perf_counter() - start)
                if not isinstance(event, Stopped):  # the program ended: call it again
                    assert isinstance(driver.ask(Call("main", inputs, stop_at_entry=True)), Stopped)
    finally:
        for driver in drivers.values():
            driver.close()
    return times


def tensor_read(module: Path, data: Path, remote: bool) -> tuple[float, int]:
    driver = Driver(remote)
    try:
        assert isinstance(driver.ask(Open(str(module))), Opened)
        driver.session.send(SetBreakpoints((Breakpoint(BreakpointKind.DISPATCH, ordinal=0),)))
        stop = driver.ask(Call("main", (f"@{data}",)))
        assert isinstance(stop, Stopped), stop
        start = time.perf_counter()
        answer = driver.ask(ReadBinding(0))
        array = answer.tensor.to_numpy()
        seconds = time.perf_counter() - start
        assert isinstance(answer, BindingBytes), answer
        nbytes = array.nbytes
        del array, answer
        assert isinstance(driver.ask(Continue()), Finished)
    finally:
        driver.close()
    return seconds, nbytes


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="size of the tensor read (MiB; 0: none)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--zeros", action="store_true", help="a tensor of zeros (compressible)")
    parser.add_argument("--repeat", type=int, default=1, help="measure everything this many times")
    parser.add_argument("--remote", metavar="COMMAND", help="the server command (default: serve --stdio here), "
                        "e.g. 'ssh HOST iree-lens serve --stdio' (the temporary files must be visible there)")
    args = parser.parse_args()
    if args.remote:
        Driver.server = shlex.split(args.remote)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        matmul = compile_to(sample_path("matmul"), tmp / "matmul.vmfb")
        (tmp / "negate.mlir").write_text(NEGATE)
        negate = compile_to(tmp / "negate.mlir", tmp / "negate.vmfb")
        count = args.mib * (1 << 20) // 4
        values = np.zeros(count, np.float32) if args.zeros else np.random.default_rng(0).random(count, np.float32)
        np.save(tmp / "x.npy", values)
        del values
        for _ in range(args.repeat):
            print(f"load average {load()} on {os.cpu_count()} cores (this machine is shared)")
            medians = {name: statistics.median(t) for name, t in step_round_trips(matmul, args.steps).items()}
            local, remote, threaded = medians["in process"], medians["stream"], medians["stream, reader thread"]
            print(f"step round trip   in process {local * 1e3:7.3f} ms   stream {remote * 1e3:7.3f} ms   "
                  f"ratio {remote / local:.2f}x (limit 2x)   [reader thread {threaded * 1e3:7.3f} ms "
                  f"{threaded / local:.2f}x]")
            for where, remote_read in (("in process", False), ("over the stream", True)) if args.mib else ():
                seconds, nbytes = tensor_read(negate, tmp / "x.npy", remote_read)
                print(f"tensor read       {where:15s} {nbytes / 2**20:6.0f} MiB in {seconds:6.3f} s = "
                      f"{nbytes / seconds / 1e6:8.0f} MB/s" + ("" if not remote_read else "   (limit >= 200 MB/s)"))
            print(f"load average {load()} after", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
