"""``iree-lens split``: a program made into one standalone test per distinct dispatch, and such a folder
checked against another build, flag set or device.

    iree-lens split PROGRAM.mlir --function=F --input=... --out=DIR [--max-occurrences=N] [compile flags]
    iree-lens split --check DIR [--target=T | IREE target flags] [--device=D] [--json] [--atol/--rtol/--ulps]

Splitting compiles the program (the flags as for ``phases``), runs it once on IREE's runtime and writes, for
every distinct dispatch, ``DIR/<test>/dispatch.mlir`` (``func.func @main``: the dispatch's operations as the
flow phase holds them, its tensor operands as arguments and its results as results), ``inputs/*.npy``,
``expected/*.npy`` and ``DIR/manifest.json``. Checking compiles each test with ``iree-compile`` and runs it
with ``iree-run-module``. The split's own build on a local CPU device (the same flags, compiler, CPU and device:
its kernels re-run on their recorded inputs) is judged within 16 epsilons of each output's scale, another build by the default
rounding rule (2048 for f32, wider for a long reduction); --atol/--rtol/--ulps replace either.

Exit status (as diff and cmp): --check gives 0 when every test agrees, 1 when any diverged or failed to
compile or run, 2 for trouble (bad usage, a folder that cannot be read, every test failing the same way: a
flag iree-compile does not know, a device with no driver); splitting gives 0, 1 when no
dispatch could be written as a test, 2 for trouble.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli.compile_arguments import (
    add_compile_options,
    add_compile_parser,
    compile_request,
    option_default,
    take_own_options,
)
from engine.cli.exit_status import TROUBLE, trouble
from engine.cli.program_arguments import PARAMETERS_HELP
from engine.errors import CompileCancelled, LensError


def _own_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    add_compile_options(parser, defaults)
    parser.add_argument("--function", default=option_default(None, defaults), help="the function to run")
    parser.add_argument(
        "--input", action="append", default=option_default([], defaults), help="an input, as iree-run-module takes it"
    )
    parser.add_argument("--parameters", action="append", default=option_default([], defaults), metavar="[SCOPE=]FILE",
                        help=PARAMETERS_HELP + " (for the run that traces the dispatches; each test holds its data)")  # fmt: skip
    parser.add_argument(
        "--max-occurrences", type=int, default=option_default(None, defaults),
        help="keep the data of the first N runs of a repeated dispatch (default: every run)",
    )  # fmt: skip
    parser.add_argument(
        "--check", action="store_true", default=option_default(False, defaults),
        help="check the split folder given as the program instead of splitting",
    )  # fmt: skip
    parser.add_argument("--device", default=option_default(None, defaults), help="runtime device (--check)")
    parser.add_argument("--json", action="store_true", default=option_default(False, defaults), help="print JSON")
    parser.add_argument("--jobs", type=int, default=option_default(2, defaults), help="tests checked at once")
    parser.add_argument("--all-occurrences", action="store_true", default=option_default(False, defaults),
                        help="--check every kept occurrence, not only the first")  # fmt: skip
    for name in ("atol", "rtol", "ulps"):
        parser.add_argument(f"--{name}", type=float, default=option_default(None, defaults),
                            help=f"--check: {name} (replaces the rounding rule)")  # fmt: skip


def add_parser(subparsers) -> None:
    add_compile_parser(
        subparsers, "split", "write every dispatch of a run as a standalone test; --check such a folder",
        __doc__, _own_options, run,
    )  # fmt: skip


def check_flags_and_device(args: argparse.Namespace, iree_flags: list[str]) -> tuple[list[str], str]:
    """The iree-compile flags and the runtime device ``--check`` uses (``ValueError`` when they clash)."""
    from engine.compiler.request import selects_target, target_of_flags
    from engine.compiler.targets import TARGETS, find_target

    if selects_target(iree_flags):
        if args.target is not None:
            raise ValueError("--target and IREE's own target flags both choose the target; give one of them")
        chosen = target_of_flags(tuple(iree_flags))
        device = args.device or (TARGETS[chosen].device if chosen in TARGETS else None)
        if device is None:
            raise ValueError("these target flags choose no device this machine runs; give --device")
        return list(iree_flags), device
    target = find_target(args.target or "llvm-cpu")
    flags = list(target.flags)
    if args.target_cpu is not None:
        flags = [f for f in flags if not f.startswith("--iree-llvmcpu-target-cpu=")]
        flags.append(f"--iree-llvmcpu-target-cpu={args.target_cpu}")
    return flags + list(iree_flags), args.device or target.device


def run(args: argparse.Namespace) -> int:
    iree_flags = take_own_options(args, _own_options)
    try:
        return _check(args, iree_flags) if args.check else _split(args, iree_flags)
    except (ValueError, FileNotFoundError, CompileCancelled, LensError) as e:
        # one line: IREE's runtime errors go on with its VM stack
        print(f"iree-lens split: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}", file=sys.stderr)
        return TROUBLE
    except BrokenPipeError:
        raise
    except Exception as e:  # trouble, never "a test diverged" (1): see engine.cli.exit_status
        return trouble("split", e)


def _split(args: argparse.Namespace, iree_flags: list[str]) -> int:
    from pathlib import Path

    from engine.cli.compile_arguments import compiled_module
    from engine.split.splitter import split_program

    if Path(args.source).is_file() and compiled_module(Path(args.source)):  # iree-compile's 'unexpected character' would say less
        print(f"iree-lens split: {args.source} is a compiled module; split compiles the program itself: give the "
              ".mlir (or .mlirbc) it was compiled from, with the IREE flags it was compiled with", file=sys.stderr)  # fmt: skip
        return 2
    if args.out is None or args.function is None:
        print("iree-lens split: --out=DIR and --function=F are required (or --check DIR)", file=sys.stderr)
        return 2
    if args.max_occurrences is not None and args.max_occurrences < 1:  # tests without data check nothing
        print("iree-lens split: --max-occurrences must be at least 1 (the data a test is checked with)", file=sys.stderr)
        return 2
    request = compile_request(args, iree_flags)
    result = split_program(
        request, args.function, args.input, args.out, device=args.device,
        max_occurrences=args.max_occurrences, timeout_s=args.timeout, parameters=tuple(args.parameters or ()),
    )  # fmt: skip
    failed = [t for t in result.tests if t.error]
    if args.json:
        print(json.dumps({"out": str(result.directory), "tests": [t.to_json() for t in result.tests],
                          "dispatches": result.dispatches, "initializer_dispatches": result.initializer_dispatches,
                          "compile_s": result.compile_s, "run_s": result.run_s,
                          "write_s": result.write_s}))  # fmt: skip
    else:
        for t in result.tests:
            runs = f" x{len(t.occurrences)}" if len(t.occurrences) > 1 else ""
            print(f"{t.dir}{runs}  {t.loc or '(no location)'}" + (f"  NOT WRITTEN: {t.error}" if t.error else ""))
        initializer = f" (and {result.initializer_dispatches} of the module's initializer)" if result.initializer_dispatches else ""
        print(f"{len(result.tests)} tests from {result.dispatches} dispatches{initializer} in {result.directory} "
              f"(compile {result.compile_s:.2f} s, run {result.run_s:.2f} s, write {result.write_s:.2f} s)")  # fmt: skip
    if failed:
        print(f"iree-lens split: {len(failed)} dispatches not written as tests (manifest.json's not_written says why)",
              file=sys.stderr)  # fmt: skip
    return 1 if failed and len(failed) == len(result.tests) else 0


def _check(args: argparse.Namespace, iree_flags: list[str]) -> int:
    from engine.dispatch.numerics import Tolerance
    from engine.split.check import FAILED, SAME_BUILD_RULE, check_split, same_build_as_split, save_check
    from engine.split.reduce import same_message

    flags, device = check_flags_and_device(args, iree_flags)
    tolerance = Tolerance(args.atol, args.rtol, args.ulps)
    other_build = same_build_as_split(args.source, flags, device)
    if tolerance.explicit:
        rule = tolerance.describe()
    elif other_build is None:
        rule = f"{SAME_BUILD_RULE} (its kernels re-run on their recorded inputs give them bit for bit)"
    else:
        rule = f"the default rounding rule: not the split's own build ({other_build})"
    if not args.json:
        print(f"judged by {rule}", flush=True)

    def report(verdict) -> None:
        if not args.json:
            detail = verdict.reason or "; ".join(
                f"{o['name']}: max abs {o['max_abs_error']}" for o in verdict.outputs if o["verdict"] != "exact"
            )
            print(f"{verdict.verdict:16} {verdict.dir}" + (f"  {detail}" if detail else ""), flush=True)

    verdicts = check_split(
        args.source, flags, device, tolerance=tolerance, jobs=args.jobs,
        max_occurrences=None if args.all_occurrences else 1, on_test=report,
    )  # fmt: skip
    bad = [v for v in verdicts if not v.agrees]
    failed = [v for v in verdicts if v.verdict == FAILED]
    if len(verdicts) > 1 and len(failed) == len(verdicts) and all(same_message(v.reason, failed[0].reason) for v in failed):
        # Not the tests' doing: the flags or the device (an unknown flag, a device with no driver here).
        print(f"iree-lens split: every test failed the same way, so no test is at fault: {failed[0].reason}",
              file=sys.stderr)  # fmt: skip
        return TROUBLE
    save_check(args.source, flags, device, verdicts)  # the window shows each build's verdicts
    if args.json:
        print(json.dumps({"flags": flags, "device": device, "same_build": other_build is None, "rule": rule,
                          "tests": [v.to_json() for v in verdicts]}))  # fmt: skip
    else:
        print(f"{len(verdicts)} tests, {len(bad)} diverged or failed ({' '.join(flags)} on {device})")
    return 1 if bad else 0
