"""``iree-lens split`` at model scale: its time against one plain compile plus one run of the same program.

The goal (issue "Every dispatch a unit test"): splitting EfficientViT-M0 (336 dispatches) takes at most 3x
one plain ``iree-compile`` (llvm-cpu) plus one ``iree-run-module`` call. Each side runs in its own process,
one after the other, on the same machine; the load average is printed with the figures, since the machine
is shared. The shared models are read from ``../shared/models`` beside the repository.

    .venv/bin/python benchmarks/split_scale.py [--model efficientvit_m0|squeezenet1_1|small_cnn] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import target_flags  # noqa: E402

MODELS = ROOT / ".." / "shared" / "models"
BIN = Path(sys.executable).parent


def _source(model: str, tmp: Path) -> tuple[Path, str, Path]:
    if (MODELS / f"{model}.mlir").exists():
        function = "main" if model not in ("small_cnn", "attention_block") else model
        return MODELS / f"{model}.mlir", function, MODELS / f"{model}_x.npy"
    source = tmp / f"{model}.mlir"
    with lzma.open(MODELS / f"{model}.mlir.xz") as src, open(source, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return source, "main", MODELS / f"{model}_x.npy"


def _timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:2])} failed: {proc.stderr[-2000:]}")
    return elapsed, proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="efficientvit_m0")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="split-bench-") as tmp_text:
        tmp = Path(tmp_text)
        source, function, x = _source(args.model, tmp)
        rows = []
        for _ in range(args.rounds):
            load = os.getloadavg()[0]
            vmfb = tmp / "plain.vmfb"
            compile_s, _ = _timed([str(BIN / "iree-compile"), str(source), *target_flags("llvm-cpu"), "-o", str(vmfb)])
            run_s, _ = _timed([str(BIN / "iree-run-module"), f"--module={vmfb}", "--device=local-sync",
                               f"--function={function}", f"--input=@{x}"])  # fmt: skip
            out = tmp / "split"
            shutil.rmtree(out, ignore_errors=True)
            split_s, proc = _timed([sys.executable, "-m", "app.launcher", "split", str(source), f"--function={function}",
                                    f"--input=@{x}", f"--out={out}", "--json"])  # fmt: skip
            report = json.loads(proc.stdout)
            rows.append((compile_s, run_s, split_s, report, load, os.getloadavg()[0]))
        for compile_s, run_s, split_s, report, load_before, load_after in rows:
            base = compile_s + run_s
            print(f"{args.model}: {report['dispatches']} dispatches -> {len(report['tests'])} tests "
                  f"({sum(1 for t in report['tests'] if 'error' in t)} not written)")  # fmt: skip
            print(f"  plain iree-compile {compile_s:.2f} s + iree-run-module {run_s:.2f} s = {base:.2f} s")
            print(f"  iree-lens split {split_s:.2f} s (its compile {report['compile_s']:.2f} s, run {report['run_s']:.2f} s, "
                  f"writing tests {report['write_s']:.2f} s)")  # fmt: skip
            print(f"  ratio {split_s / base:.2f}x (goal <= 3x); load average {load_before:.1f} -> {load_after:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
