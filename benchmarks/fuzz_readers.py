"""A large fuzz campaign over every file reader; prints cases run, parsed, rejected and failures per reader.

.venv/bin/python benchmarks/fuzz_readers.py [CASES_PER_READER]   (default 20,000)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.compiler.targets import target_flags  # noqa: E402
from engine.fuzz_readers import READERS, fuzz, seed_corpus  # noqa: E402
from engine.samples import sample_path  # noqa: E402


def main() -> None:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    compiler = Path(sys.executable).parent / "iree-compile"
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for sample, target in (
            ("mlp", "llvm-cpu"),
            ("softmax", "vulkan-spirv"),
            ("matmul", "vmvx"),
            ("dynamic", "llvm-cpu"),
        ):
            out = Path(tmp) / f"{sample}.{target}.vmfb"
            subprocess.run(
                [str(compiler), str(sample_path(sample)), *target_flags(target), "-o", str(out)], check=True
            )
            paths.append(out)
        corpus = seed_corpus(paths)
    total_failures = 0
    for name, reader in READERS.items():
        start = time.perf_counter()
        result = fuzz(reader, corpus[name], cases, seed=7)
        total_failures += len(result.failures)
        print(
            f"{name:12s} cases {result.cases:7,d}  parsed {result.parsed:7,d}  rejected {result.rejected:7,d}  "
            f"failures {len(result.failures):4d}  ({time.perf_counter() - start:.1f} s)"
        )
        for what, tb in result.failures[:2]:
            print(f"    {what}\n    " + tb.strip().splitlines()[-1])
    print(f"total failures: {total_failures}")
    sys.exit(1 if total_failures else 0)


if __name__ == "__main__":
    main()
