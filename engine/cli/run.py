"""``iree-lens run``: call one function of a module, like ``iree-run-module``, on either engine."""

from __future__ import annotations

import argparse
import sys

from engine.errors import LensError
from engine.runtime.check import CheckRecorder, imports_check_module, reference_check_module
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


def _runner(args, checks: CheckRecorder | None):
    """The engine's runner; with ``checks``, the ``check`` module (IREE's e2e expectations) is linked in."""
    if args.engine == "reference":
        from engine.runtime.reference import ReferenceRunner

        extra = [reference_check_module(checks)] if checks is not None else []
        return ReferenceRunner(args.module, args.device, extra_modules=extra)
    from engine.session.debug_run import DebugRunner

    trace = (lambda line: print(line)) if args.trace else None
    if checks is None:
        return DebugRunner(args.module, args.device, trace=trace)
    from engine.runtime.check.debug_module import CheckModule

    return DebugRunner(args.module, args.device, trace=trace, extra_modules=[CheckModule(checks)])


def run(args: argparse.Namespace) -> int:
    checks = None
    try:
        # The check imports are optional: without the module a program would skip its expectations silently.
        checks = CheckRecorder() if imports_check_module(args.module) else None
        runner = _runner(args, checks)
        arg_kinds, _ = split_cconv(runner.cconv(args.function))
        inputs = parse_inputs(args.input, arg_kinds)
        print(f"EXEC @{args.function}", flush=True)
        if checks is not None:
            checks.begin(args.function)
        results = runner.invoke(args.function, inputs)
        if args.output:
            sys.stdout.write(write_outputs(args.output, results))
        else:
            sys.stdout.write(format_results(results))
        return _report_checks(checks)
    except LensError as e:
        _report_checks(checks)  # expectations that failed before the error are still news
        print(f"iree-lens run: {e}", file=sys.stderr)
        return 1


def _report_checks(checks: CheckRecorder | None) -> int:
    """Print failed expectations (what was expected, what was found) to stderr; 1 if any failed."""
    if checks is None or not checks.failures:
        return 0
    sys.stdout.flush()
    sys.stderr.write(checks.report())
    print(f"iree-lens run: {len(checks.failures)} expectation(s) failed", file=sys.stderr)
    return 1
