"""``iree-lens run --golden=DIR``: replay a capture bundle's inputs and compare the outputs with its own.

Kept apart from ``engine.cli.run`` so that command only gains three calls: the options, filling the
module/function/inputs from the bundle, and the comparison after the run.
"""

from __future__ import annotations

import sys

import numpy as np

from engine.dispatch.bundle import Bundle
from engine.dispatch.numerics import Tolerance, compare
from engine.errors import LensError


def add_golden_arguments(p) -> None:
    p.add_argument(
        "--golden",
        metavar="DIR",
        help="a capture bundle (iree-lens capture): run its inputs, compare with its outputs",
    )
    p.add_argument(
        "--golden-atol", type=float, default=None, help="absolute tolerance against --golden (default: rounding rule)"
    )
    p.add_argument("--golden-rtol", type=float, default=None, help="relative tolerance against --golden")
    p.add_argument("--golden-ulps", type=float, default=None, help="ulps allowed against --golden")


def apply_golden(args) -> None:
    """Fill what the command line left out (module, function, inputs) from the bundle ``args.golden``."""
    if not getattr(args, "golden", None):
        if not args.module or not args.function:
            raise LensError("give MODULE and --function (or --golden=DIR)")
        return
    bundle = Bundle(args.golden)
    args.module = args.module or bundle.module
    args.function = args.function or bundle.function
    if not args.input:
        args.input = [f"@{bundle.directory / name}" for name in bundle.manifest.get("inputs", [])]
    if not args.module or not args.function:
        raise LensError(f"{args.golden}: the manifest names no module/function; give them")


def check_golden(args, results: list) -> int:
    """Compare ``results`` with the bundle's outputs; print one line per output; 1 if any differs."""
    if not getattr(args, "golden", None):
        return 0
    from engine.runtime.function_io import Tensor

    bundle = Bundle(args.golden)
    expected = bundle.program_tensors("outputs")
    tensors = [r for r in results if isinstance(r, Tensor)]
    failed = 0
    if len(tensors) != len(expected):
        print(f"golden: {len(tensors)} tensor results, the bundle has {len(expected)}", file=sys.stderr)
        failed = 1
    for i, (got, want) in enumerate(zip(tensors, expected)):
        tolerance = Tolerance(args.golden_atol, args.golden_rtol, getattr(args, "golden_ulps", None))
        c = compare(got.array, np.asarray(want), tolerance=tolerance)
        if c.ok:
            print(f"golden: output {i} matches, {c.summary()}")
        else:
            failed = 1
            print(f"golden: output {i} DIFFERS: {c.summary()} {c.note}".rstrip(), file=sys.stderr)
    return failed
