"""``iree-lens run --golden=DIR``: replay a capture bundle's inputs and compare the outputs with its own;
``--golden=Y.npy`` (or ``.npz``, arrays in result order): compare the outputs with a framework's.
Judged by ``numerics`` (rounding-level differences agree unless tolerances are given).

Kept apart from ``engine.cli.run`` so that command only gains three calls: the options, filling the
module/function/inputs from the bundle, and the comparison after the run.
"""

from __future__ import annotations

import sys

import numpy as np

from engine.dispatch.bundle import Bundle
from engine.dispatch.numerics import Tolerance, compare, load_golden
from engine.errors import LensError


def add_golden_arguments(p) -> None:
    p.add_argument(
        "--golden",
        metavar="DIR",
        help="a capture bundle (iree-lens capture): run its inputs, compare with its outputs; or a "
        ".npy/.npz of expected outputs (a framework's)",
    )
    p.add_argument(
        "--golden-atol", type=float, default=None, help="absolute tolerance against --golden (default: rounding rule)"
    )
    p.add_argument("--golden-rtol", type=float, default=None, help="relative tolerance against --golden")
    p.add_argument("--golden-ulps", type=float, default=None, help="ulps allowed against --golden")


def apply_golden(args) -> None:
    """Fill what the command line left out (module, function, inputs) from the bundle ``args.golden``."""
    if not getattr(args, "golden", None) or _is_array_file(args.golden):
        if args.module and not args.function:
            from engine.cli.program_arguments import only_function

            args.function = only_function(args.module)
        if not args.module or not args.function:
            raise LensError("give MODULE and --function (or --golden=DIR)")
        return
    bundle = Bundle(args.golden)
    replay = bundle.manifest.get("replay")
    if replay:
        raise LensError(
            f"{args.golden} is a capture of the replay {replay}: a replay has no function to call and its "
            f"program values are raw bytes; rerun the replay itself: iree-lens run {replay}"
        )
    args.module = args.module or bundle.module
    args.function = args.function or bundle.function
    if not args.input:
        # Files, or storage given by its size (``&512xi8``: a function's transients, ``capture``).
        args.input = [name if name.startswith("&") else f"@{bundle.directory / name}"
                      for name in bundle.manifest.get("inputs", [])]  # fmt: skip
    if not args.module or not args.function:
        raise LensError(f"{args.golden}: the manifest names no module/function; give them")


def check_golden(args, results: list) -> int:
    """Compare ``results`` with the bundle's outputs; print one line per output; 1 if any differs."""
    if not getattr(args, "golden", None):
        return 0
    from engine.runtime.function_io import Tensor

    if _is_array_file(args.golden):
        expected = [array for _, array in load_golden(args.golden)]
    else:
        expected = Bundle(args.golden).program_tensors("outputs")
    tensors = [r for r in results if isinstance(r, Tensor)]
    failed = 0
    if len(tensors) != len(expected):
        print(f"golden: {len(tensors)} tensor results, the bundle has {len(expected)}", file=sys.stderr)
        failed = 1
    for i, (got, want) in enumerate(zip(tensors, expected)):
        tolerance = Tolerance(args.golden_atol, args.golden_rtol, getattr(args, "golden_ulps", None))
        c = compare(got.array, np.asarray(want), tolerance=tolerance)
        if c.ok:  # its note says what the match rests on (a shape that differs, compared flat)
            print(f"golden: output {i} matches, {c.summary()}" + (f" ({c.note})" if c.note else ""))
        else:
            failed = 1
            note = c.note if c.shape_matches else ""  # the summary names a shape mismatch itself
            print(f"golden: output {i} DIFFERS: {c.summary()} {note}".rstrip(), file=sys.stderr)
    return failed


def _is_array_file(path: str) -> bool:
    from pathlib import Path

    return Path(path).suffix in (".npy", ".npz") and Path(path).is_file()
