"""What dispatch stops cost in the debug session (figures, not a timed test).

On a real-frontend model (``attention_block`` from the shared models folder when present, else the
matmul sample) compiled for llvm-cpu, prints:

  runner            DebugRunner.invoke, no observer (and with --input parsing and the results text, the
                    rest of what a session call does)
  session           the same call through an in-process DebugSession (the DispatchGate observes, no stop),
                    with the results printed as text and without (``Call(results_text=False)``: a caller
                    that only watches; compare it with the bare runner, the first with the runner + text)
  session + nan     with a NaN/Inf breakpoint (every binding scanned before and after each dispatch)
  stop every        ``break dispatch *``, a Continue at each stop: stops per second, in process and in a
                    child process (the stop and the resume cross a pipe)

Run: ``.venv/bin/python benchmarks/session_dispatch_stops.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import format_results, parse_inputs, split_cconv  # noqa: E402
from engine.samples import sample_path  # noqa: E402
from engine.session.child import ChildSession  # noqa: E402
from engine.session.debug_session import DebugSession  # noqa: E402
from engine.session.inprocess import InProcessSession  # noqa: E402
from engine.session.protocol import (  # noqa: E402
    Breakpoint,
    Call,
    Continue,
    Finished,
    Open,
    Opened,
    SetBreakpoints,
    Stopped,
)

MODELS = ROOT / ".." / "shared" / "models"


def program(out_dir: Path, *flags: str) -> tuple[Path, str, tuple[str, ...]]:
    source = MODELS / "attention_block.mlir"
    if source.exists():
        function, inputs = "attention_block", (f"@{MODELS / 'attention_block_x.npy'}",)
    else:
        source, function, inputs = sample_path("matmul"), "main", ("4x8xf32=0.1", "8x16xf32=0.3")
    out_dir.mkdir(exist_ok=True)
    out = out_dir / "program.vmfb"
    tool = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(tool), str(source), *TARGETS["llvm-cpu"].flags, *flags, "-o", str(out)], check=True)
    return out, function, inputs


def run_session(
    session_factory, path, function, inputs, breakpoints, repeat: int, results_text: bool = True
) -> tuple[float, int]:
    """The best time of ``repeat`` calls in one session (the first one warms the VM up), and the stops."""
    events: queue.Queue = queue.Queue()
    session = session_factory(events.put)
    best, stops = float("inf"), 0
    try:
        session.send(Open(str(path)))
        assert isinstance(events.get(), Opened)
        session.send(SetBreakpoints(tuple(breakpoints)))
        for _ in range(repeat + 1):
            start = time.perf_counter()
            session.send(Call(function, inputs, results_text=results_text))
            stops = 0
            while True:
                event = events.get()
                if isinstance(event, Finished):
                    break
                assert isinstance(event, Stopped), event
                stops += 1
                session.send(Continue())
            best = min(best, time.perf_counter() - start)
        return best, stops
    finally:
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, function, inputs = program(Path(tmp))
        runner = DebugRunner(path)
        arg_kinds, _ = split_cconv(runner.cconv(function))
        values = parse_inputs(list(inputs), arg_kinds)
        best = float("inf")
        runner.invoke(function, values)  # warm-up, as the sessions get
        for _ in range(args.repeat):
            start = time.perf_counter()
            runner.invoke(function, values)
            best = min(best, time.perf_counter() - start)
        dispatches = runner.device.dispatch_count // (args.repeat + 1)
        # What a session call does besides running: read the --input strings, print the results as text.
        whole = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            format_results(runner.invoke(function, parse_inputs(list(inputs), arg_kinds)))
            whole = min(whole, time.perf_counter() - start)
        print(f"program: {path.name} ({function}), {dispatches} dispatches a call")
        print(f"runner (no observer):          {best * 1e3:8.1f} ms")
        print(f"runner + inputs + results text:{whole * 1e3:8.1f} ms  (iree-lens run's work)")

        def in_process(on_event):
            return InProcessSession(DebugSession, on_event)

        def child(on_event):
            return ChildSession("engine.session.debug_session:DebugSession", on_event)

        cases = [
            ("session (gate, no stop)", in_process, [], True),
            ("  the same, no results text", in_process, [], False),
            ("session + nan watch", in_process, [Breakpoint("nan")], True),
        ]
        for name, factory, bps, text in cases:
            t, _ = run_session(factory, path, function, inputs, bps, args.repeat, text)
            print(f"{name + ':':31s}{t * 1e3:8.1f} ms  ({t / best:.2f}x the runner, {t / whole:.2f}x with inputs and text)")
        # The same module with its executables' sources beside it (as every compile IREE Lens runs keeps
        # them): the session types each dispatch's tensors and watches in-place ones for undefined bytes.
        typed = Path(tmp) / "typed"
        typed.mkdir()
        shutil.copy(path, typed / path.name)
        program(Path(tmp) / "dump", f"--iree-hal-dump-executable-sources-to={typed / (path.stem + '.sources')}")
        t, _ = run_session(in_process, typed / path.name, function, inputs, [], args.repeat, False)
        print(f"{'session, sources beside:':31s}{t * 1e3:8.1f} ms  ({t / best:.2f}x the runner, no results text)")
        for name, factory in (("in process", in_process), ("child process", child)):
            t, stops = run_session(factory, path, function, inputs, [Breakpoint("dispatch", dispatch="*")], args.repeat)
            print(f"stop at every dispatch, {name + ':':15s}{stops / t:8.1f} stops/s ({stops} stops, {t * 1e3:.0f} ms a call)")


if __name__ == "__main__":
    main()
