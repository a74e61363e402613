"""A long mutation-fuzzing campaign of the .vmfb reader; prints cases run and failures.

    .venv/bin/python benchmarks/fuzz_vmfb.py [--cases N] [--seed S] MODULE.vmfb...

With no modules given, the sample programs are compiled for every target first.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.runtime.vmfb.fuzzing import FuzzFailure, campaign  # noqa: E402
from engine.runtime.vmfb.module import open_vmfb  # noqa: E402
from engine.samples import KNOWN_COMPILE_FAILURES, sample_names, sample_path  # noqa: E402


def compile_samples(out: Path, names: list[str]) -> list[Path]:
    paths = []
    bindir = Path(sys.executable).parent
    for s in names:
        for t, target in TARGETS.items():
            if (s, t) in KNOWN_COMPILE_FAILURES:
                continue
            p = out / f"{s}.{t}.vmfb"
            cmd = [str(bindir / "iree-compile"), str(sample_path(s)), *target.flags, "-o", str(p)]
            if subprocess.run(cmd, capture_output=True).returncode == 0:
                paths.append(p)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*")
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(p) for p in args.modules] or compile_samples(Path(tmp), sample_names())
        samples = {p.name: Path(p).read_bytes() for p in paths}
        # Nested VMVX executables are modules too.
        for p in paths:
            for x in open_vmfb(p).executables:
                if x.format == "vmvx-bytecode-fb":
                    samples[f"{p.name}:{x.name}"] = bytes(x.data)
    t0 = time.perf_counter()
    counts: collections.Counter[str] = collections.Counter()
    failures: list[FuzzFailure] = []
    for _case, _name, _kind, outcome in campaign(samples, args.cases, args.seed):
        if isinstance(outcome, FuzzFailure):
            failures.append(outcome)
            counts["failure"] += 1
        else:
            counts[outcome] += 1
    dt = time.perf_counter() - t0
    print(f"samples: {len(samples)}  cases: {args.cases}  time: {dt:.1f} s  ({args.cases / dt:.0f} cases/s)")
    print(f"parsed: {counts['ok']}  VmfbFormatError: {counts['error']}  failures: {counts['failure']}")
    for f in failures[:10]:
        print(f"--- case {f.case} ({f.mutation})\n{f.error}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
