"""Every executable of a program substituted by its own source: ``iree-lens sources``, then one run of the
module with ``--substitute`` for every ``.mlir`` written (built by one iree-compile), against the plain run.
Prints the time of each step and whether the outputs are bit-identical (on each engine asked for).

    .venv/bin/python benchmarks/substitute_every_executable.py [PROGRAM.mlir[.xz] FUNCTION INPUT.npy]
                     [--engine=reference,debug] [IREE flags...]

Without a program, the bundled mlp sample on a random 2x16xf32 input.
"""

from __future__ import annotations

import lzma
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def lens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.launcher", *args], capture_output=True, text=True)


def timed(label: str, *args: str) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    proc = lens(*args)
    print(f"{label}: {time.perf_counter() - t0:.1f} s", flush=True)
    if proc.returncode != 0:
        sys.exit(f"{label} failed:\n{proc.stderr}")
    return proc


def main(argv: list[str]) -> None:
    positional = [a for a in argv if not a.startswith("--")]
    if positional and len(positional) < 3:
        sys.exit(__doc__)
    if positional:
        program, function, x = Path(positional[0]), positional[1], Path(positional[2])
    else:  # the bundled sample
        from engine.samples import sample_path

        program, function = sample_path("mlp"), "main"
        x = Path(tempfile.mkdtemp(prefix="lens-subst-input-")) / "x.npy"
        np.save(x, np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32))
    engines = ["reference", "debug"]
    flags = []
    for a in argv[3 if positional else 0 :]:
        if a.startswith("--engine="):
            engines = a.split("=", 1)[1].split(",")
        else:
            flags.append(a)
    with tempfile.TemporaryDirectory(prefix="lens-subst-all-") as d:
        work = Path(d)
        if program.suffix == ".xz":
            source = work / program.with_suffix("").name
            source.write_bytes(lzma.decompress(program.read_bytes()))
            program = source
        out = work / "src"
        written = [Path(p) for p in timed("iree-lens sources", "sources", str(program), f"--out={out}", *flags).stdout.split()]
        vmfb = next(p for p in written if p.suffix == ".vmfb")
        sources = [p for p in written if p.suffix == ".mlir"]
        folded = sum("dense_resource<" in p.read_text() for p in sources)
        print(f"{len(sources)} executables, {folded} with folded weights")
        subs = [f"--substitute={p.stem}={p}" for p in sources]
        common = ["run", str(vmfb), f"--function={function}", f"--input=@{x}"]
        timed("plain run (reference)", *common, "--engine=reference", f"--output=@{work / 'plain.npy'}")
        plain = np.load(work / "plain.npy")
        for engine in engines:
            result = work / f"{engine}.npy"
            timed(f"every executable substituted ({engine})", *common, f"--engine={engine}", *subs, f"--output=@{result}")
            same = np.load(result).tobytes() == plain.tobytes()
            print(f"  outputs {'bit-identical' if same else 'DIFFER'} ({engine})")


if __name__ == "__main__":
    main(sys.argv[1:])
