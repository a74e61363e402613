""""When did the contents of this global change?" on a large buffer (a KV cache) after a long call.

The program keeps a ``ROWS x 4096`` f32 cache (32 MB at 2048 rows), writes one row of it in each call, and
runs a host loop of ``--iterations`` (about 6 VM instructions each) before the write and, after it, one that
reads an element of the new cache first (so the write is done before it), as a decode step's host code does. The search replays the call instruction by instruction from the end back to the write;
it reads the watched bytes only after calls of imports (device memory changes only there, unless the VM's
own buffer ops share the memory), so the question costs the instructions replayed plus one read of the
buffer per hal call, not one read per instruction (which cost 45 ms an instruction at 32 MB: 29 s for 640
instructions; now 1.3 s for 600, 1.7 s for 60,000, on a 2-core Xeon).

    .venv/bin/python benchmarks/when_changed_scale.py [--rows 2048] [--iterations 100 1000 10000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.session.protocol import (  # noqa: E402
    Call,
    Finished,
    Globals,
    LastChange,
    Open,
    ReadGlobals,
    Step,
    WatchGlobalContents,
    WhenChanged,
)
from engine.session.timetravel_session import TimeTravelSession  # noqa: E402

LOOP = """
  %r{k}:2 = scf.while (%i = %c0, %acc = %c1) : (i32, i32) -> (i32, i32) {{
    %more = arith.cmpi slt, %i, {n} : i32
    scf.condition(%more) %i, %acc : i32, i32
  }} do {{
  ^bb0(%i: i32, %acc: i32):
    %m = arith.muli %acc, %c7 : i32
    %x = arith.xori %m, %i : i32
    %next = arith.addi %i, %c1 : i32
    scf.yield %next, %x : i32, i32
  }}"""

PROGRAM = """
util.global private mutable @cache = dense<0.0> : tensor<{rows}x4096xf32>
func.func @step(%row: tensor<1x4096xf32>, %n: i32) -> i32 {{
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c7 = arith.constant 7 : i32{before}
  %k = arith.andi %r0#1, %c7 : i32
  %ki = arith.index_cast %k : i32 to index
  %c = util.global.load @cache : tensor<{rows}x4096xf32>
  %rr = arith.addf %row, %row : tensor<1x4096xf32>
  %u = tensor.insert_slice %rr into %c[%ki, 0] [1, 4096] [1, 1] : tensor<1x4096xf32> into tensor<{rows}x4096xf32>
  util.global.store %u, @cache : tensor<{rows}x4096xf32>
  %z = arith.constant 0 : index
  %e = tensor.extract %u[%ki, %z] : tensor<{rows}x4096xf32>
  %ei = arith.fptosi %e : f32 to i32
  %n1 = arith.addi %n, %ei : i32{after}
  return %r1#1 : i32
}}
"""


def _events(log: list):
    return lambda event: log.append(event)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--iterations", type=int, nargs="+", default=[100, 1000, 10000])
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "cache.mlir"
        source.write_text(PROGRAM.format(rows=args.rows, before=LOOP.format(k=0, n="%n"), after=LOOP.format(k=1, n="%n1")))
        lens = Path(sys.executable).parent / "iree-lens"
        subprocess.run([str(lens), "phases", str(source), f"--out={tmp}/out"], check=True, capture_output=True)
        vmfb = next(Path(tmp, "out").glob("*.vmfb"))
        megabytes = args.rows * 4096 * 4 / 2**20
        for iterations in args.iterations:
            log: list = []
            session = TimeTravelSession(_events(log))
            session.handle(Open(str(vmfb), "local-sync"))
            session.handle(Call("step", ("1x4096xf32=1", str(iterations)), True))
            session.handle(Step("into", 20 * iterations + 10_000))
            assert isinstance(log[-1], Finished), log[-1]
            session.handle(ReadGlobals())
            globals_ = log[-1]
            assert isinstance(globals_, Globals), globals_
            (cache,) = [v.index for v in globals_.variables if v.name == "cache"]
            start = time.perf_counter()
            session.handle(WhenChanged(WatchGlobalContents("module", cache)))
            seconds = time.perf_counter() - start
            answer = log[-1]
            assert isinstance(answer, LastChange) and answer.change is not None, answer
            latest = session.travel.latest if session.travel is not None else 0
            print(f"{megabytes:.0f} MB cache, {iterations} iterations ({latest} instructions): the question took "
                  f"{seconds:.2f} s; answer: instruction {answer.change.position}, {answer.change.via}")  # fmt: skip
            session.close()


if __name__ == "__main__":
    main()
