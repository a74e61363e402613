"""A long mutation-fuzzing campaign of the .vmfb reader, every case under a time and memory limit.

    .venv/bin/python benchmarks/fuzz_vmfb.py [--cases N] [--seed S] [--seconds T] [--memory-mb M]
                                             [--corpus DIR] [MODULE.vmfb...]

With no modules given, the sample programs are compiled for every target first; nested VMVX modules
are fuzzed as modules too. Each case reads the whole module (metadata, JSON, disassembly with source
locations, debug database, executables). Prints cases/s and the totals; every failure (hang, memory,
crash, untyped error) is saved under --corpus with the command that reproduces it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from lens_fuzz.bounded import Limits, run_cases  # noqa: E402
from lens_fuzz.mutate import module_cases  # noqa: E402
from lens_fuzz.readers import READERS  # noqa: E402

from engine.compiler.targets import TARGETS  # noqa: E402
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
    ap.add_argument("--cases", type=int, default=2000)  # a campaign: 20,000 or more
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10.0, help="wall-clock limit per case")
    ap.add_argument("--memory-mb", type=int, default=1024, help="memory a case may add to its worker")
    ap.add_argument("--corpus", default=str(Path(tempfile.gettempdir()) / "iree-lens-fuzz" / "vmfb"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(p) for p in args.modules] or compile_samples(Path(tmp), sample_names())
        samples = {p.name: Path(p).read_bytes() for p in paths}
        for p in paths:
            for x in open_vmfb(p).executables:
                if x.format == "vmvx-bytecode-fb":
                    samples[f"{p.name}:{x.name}"] = bytes(x.data)
    limits = Limits(args.seconds, args.memory_mb << 20)
    print(
        f"samples: {len(samples)} ({sum(map(len, samples.values())):,} bytes)  cases: {args.cases:,}  "
        f"limits: {limits.seconds:g} s, +{args.memory_mb} MiB per case",
        flush=True,
    )

    def progress(r) -> None:
        if r.cases % 5000 < 500:
            print(
                f"  {r.cases:7,d} cases  {r.cases_per_second:6.1f}/s  failures {len(r.failures)}", flush=True
            )

    report = run_cases(
        READERS["vmfb"],
        module_cases(samples, args.cases, args.seed),
        limits=limits,
        corpus_dir=args.corpus,
        progress=progress,
    )
    counts = report.counts()
    print(
        f"cases: {report.cases:,}  time: {report.seconds:.1f} s  ({report.cases_per_second:.1f} cases/s)  "
        f"slowest case: {report.slowest_case_seconds:.2f} s  workers: {report.workers}"
    )
    print(
        f"parsed: {report.parsed:,}  VmfbFormatError: {report.rejected:,}  "
        + "  ".join(f"{k}: {v}" for k, v in counts.items())
    )
    for f in report.failures[:10]:
        print(f"--- case {f.case} ({f.mutation}) {f.kind}\n{f.command}\n{f.detail}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
