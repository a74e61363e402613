"""A large mutation-fuzzing campaign over every file reader, each case under a time and memory limit;
prints cases run, parsed, rejected and failures per reader.

    .venv/bin/python benchmarks/fuzz_readers.py [CASES_PER_READER] [--corpus DIR]   (default 2,000; a campaign: 20,000)
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
from lens_fuzz.mutate import reader_cases  # noqa: E402
from lens_fuzz.readers import READERS, seed_corpus  # noqa: E402

from engine.compiler.targets import target_flags  # noqa: E402
from engine.samples import sample_path  # noqa: E402

SEED_PROGRAMS = (
    ("mlp", "llvm-cpu"),
    ("softmax", "vulkan-spirv"),
    ("matmul", "vmvx"),
    ("dynamic", "llvm-cpu"),
)


def compile_seeds(tmp: Path) -> list[Path]:
    compiler = Path(sys.executable).parent / "iree-compile"
    paths = []
    for sample, target in SEED_PROGRAMS:
        out = tmp / f"{sample}.{target}.vmfb"
        subprocess.run(
            [str(compiler), str(sample_path(sample)), *target_flags(target), "-o", str(out)], check=True
        )
        paths.append(out)
    return paths


def record_replay_seed(mlp_vmfb: Path, out: Path) -> Path:
    """IREE's own HAL replay of one call of mlp (``iree-run-module --device_replay_output``)."""
    run_module = Path(sys.executable).parent / "iree-run-module"
    subprocess.run(
        [str(run_module), "--device=local-sync", f"--module={mlp_vmfb}", "--function=main", "--input=2x16xf32=0.5",
         f"--device_replay_output={out}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="?", type=int, default=2_000)  # a campaign: 20,000 or more
    ap.add_argument("--corpus", default=str(Path(tempfile.gettempdir()) / "iree-lens-fuzz" / "readers"))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--memory-mb", type=int, default=1024)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        modules = compile_seeds(Path(tmp))
        corpus = seed_corpus(modules, [record_replay_seed(modules[0], Path(tmp) / "mlp.ireereplay")])
    limits = Limits(args.seconds, args.memory_mb << 20)
    total_failures = 0
    for name, reader in READERS.items():
        r = run_cases(
            reader, reader_cases(corpus[name], args.cases, seed=7), limits=limits, corpus_dir=args.corpus
        )
        total_failures += len(r.failures)
        print(
            f"{name:12s} cases {r.cases:7,d}  parsed {r.parsed:7,d}  rejected {r.rejected:7,d}  "
            f"failures {len(r.failures):4d} {r.counts()}  ({r.seconds:.1f} s, {r.cases_per_second:.0f}/s)",
            flush=True,
        )
        for f in r.failures[:2]:
            print(f"    {f.kind} {f.mutation}: {f.command}\n    " + f.detail.strip().splitlines()[-1])
    print(f"total failures: {total_failures}")
    return 1 if total_failures else 0


if __name__ == "__main__":
    sys.exit(main())
