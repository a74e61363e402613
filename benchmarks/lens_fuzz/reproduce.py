"""Run one saved fuzz input again, under the same limits as the campaign that found it.

    python benchmarks/lens_fuzz/reproduce.py READER INPUT [--seconds S] [--memory-mb M] [--in-process]

READER is a key of ``lens_fuzz.readers.READERS`` (vmfb, vke1, elf, input, npy, timing, diagnostics,
session) or ``module:attribute`` naming a ``Reader``. Prints the outcome; exits 1 for a failure.
``--in-process`` runs it here without limits (for a debugger or a traceback of a hang with Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
# module:attribute readers may live in a test module (tests/), the built-in ones here (benchmarks/).
sys.path[:0] = [str(BENCHMARKS), str(BENCHMARKS.parent), str(BENCHMARKS.parent / "tests")]

from lens_fuzz.bounded import Limits, run_cases, run_one  # noqa: E402
from lens_fuzz.readers import READERS, Reader  # noqa: E402


def find_reader(name: str) -> Reader:
    if name in READERS:
        return READERS[name]
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reader")
    ap.add_argument("input")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--in-process", action="store_true")
    args = ap.parse_args(argv)
    reader = find_reader(args.reader)
    data = Path(args.input).read_bytes()
    if args.in_process:
        kind, detail = run_one(reader, data)
    else:
        limits = Limits(args.seconds, args.memory_mb << 20)
        report = run_cases(reader, [(0, "saved", data)], limits=limits)
        f = report.failures[0] if report.failures else None
        kind, detail = (f.kind, f.detail) if f else ("ok" if report.parsed else "rejected", "")
    print(f"{args.reader} {args.input}: {kind}")
    if detail:
        print(detail)
    return 1 if kind not in ("ok", "rejected") else 0


if __name__ == "__main__":
    sys.exit(main())
