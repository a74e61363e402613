"""``iree-lens run``: call one function of a module, like ``iree-run-module``, on either engine."""

from __future__ import annotations

import argparse
import sys

from engine.errors import LensError
from engine.runtime.function_io import format_results, parse_inputs, split_cconv, write_outputs


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a function of a .vmfb (like iree-run-module)")
    p.add_argument("module", help="the .vmfb to run")
    p.add_argument("--function", required=True, help="exported function to call")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    p.add_argument("--output", action="append", default=[], help="where each result goes: -, @f.npy, +f.npy")
    p.add_argument(
        "--device", default="local-sync", help="local-sync, local-task or vulkan (default local-sync)"
    )
    p.add_argument(
        "--engine",
        choices=("debug", "reference"),
        default="debug",
        help="debug: IREE Lens's stepping VM and emulated HAL; reference: IREE's runtime",
    )
    p.add_argument("--trace", action="store_true", help="(debug engine) print every executed instruction")
    p.set_defaults(func=run)


def _runner(args):
    if args.engine == "reference":
        from engine.runtime.reference import ReferenceRunner

        return ReferenceRunner(args.module, args.device)
    from engine.session.debug_run import DebugRunner

    trace = (lambda line: print(line)) if args.trace else None
    return DebugRunner(args.module, args.device, trace=trace)


def run(args: argparse.Namespace) -> int:
    try:
        runner = _runner(args)
        arg_kinds, _ = split_cconv(runner.cconv(args.function))
        inputs = parse_inputs(args.input, arg_kinds)
        print(f"EXEC @{args.function}", flush=True)
        results = runner.invoke(args.function, inputs)
        if args.output:
            sys.stdout.write(write_outputs(args.output, results))
        else:
            sys.stdout.write(format_results(results))
        return 0
    except LensError as e:
        print(f"iree-lens run: {e}", file=sys.stderr)
        return 1
