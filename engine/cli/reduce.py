"""``iree-lens reduce``: a failing test of a split folder shrunk to the operations that still fail.

    iree-lens reduce DIR/<test> [--target=T | IREE target flags] [--device=D] --against=B [--reference=FILE] [--json]

A is the build given by the flags (default llvm-cpu) and ``--device``. ``--against`` says B: a target name
(``vmvx``), a device (``local-task``, ``vulkan``), or a quoted line of flags (``"--target=vmvx"``,
``"--iree-opt-level=O0 --device=local-task"``); B's flags default to A's. ``--reference=FILE``: B compiles
FILE (same operations, e.g. the test before a hand edit) instead of the test's dispatch.mlir. Writes
``DIR/<test>/reduced/``: reduced.mlir, inputs/, expected/, steps.json; prints each kept step.

reduce compares two builds, not a build with the test's expected/ outputs (removed operations are fed B's
values of them, which expected/ does not hold): to reduce what ``split --check`` found against expected/,
give as B the build split ran (its compile flags and device), with ``--reference`` if the program was edited.

Exit status (as grep, and as split): 0 when the test was reduced, 1 when there is nothing to reduce (A and B
agree on the whole test), 2 for trouble (bad usage, a folder that cannot be read, B failing on the test).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from engine.cli.compile_arguments import (
    add_compile_options,
    add_compile_parser,
    option_default,
    take_own_options,
)
from engine.cli.exit_status import TROUBLE
from engine.errors import LensError

NOTHING_TO_REDUCE = 1  # as grep's "no line selected" and split's "no dispatch written": not trouble


def _own_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    add_compile_options(parser, defaults)
    parser.add_argument("--device", default=option_default(None, defaults), help="A's runtime device")
    parser.add_argument("--against", default=option_default(None, defaults), help="B: a target, a device or flags")
    parser.add_argument("--reference", type=Path, default=option_default(None, defaults),
                        help="the program B compiles (default: the test's dispatch.mlir)")  # fmt: skip
    parser.add_argument("--json", action="store_true", default=option_default(False, defaults), help="print JSON")


def add_parser(subparsers) -> None:
    add_compile_parser(subparsers, "reduce", "shrink a failing split test to the operations that still fail",
                       __doc__, _own_options, run)  # fmt: skip


def against_build(text: str, a_flags: list[str], a_device: str, reference: Path | None):
    """B from ``--against``'s text (see the module doc)."""
    from engine.cli.split import check_flags_and_device
    from engine.compiler.targets import TARGETS
    from engine.split.reduce import Build

    tokens = shlex.split(text or "")
    if len(tokens) == 1 and not tokens[0].startswith("-"):
        if tokens[0] in TARGETS:
            return Build(tuple(TARGETS[tokens[0]].flags), TARGETS[tokens[0]].device, reference)
        return Build(tuple(a_flags), tokens[0], reference)
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--target", default=None)
    own.add_argument("--target-cpu", default=None)
    own.add_argument("--device", default=None)
    parsed, iree_flags = own.parse_known_args(tokens)
    if parsed.target is None and not iree_flags:
        return Build(tuple(a_flags), parsed.device or a_device, reference)
    flags, device = check_flags_and_device(parsed, iree_flags)
    return Build(tuple(flags), device, reference)


def run(args: argparse.Namespace) -> int:
    from engine.cli.split import check_flags_and_device
    from engine.split.reduce import Build, NothingToReduce, reduce_test

    iree_flags = take_own_options(args, _own_options)
    try:
        if args.against is None and args.reference is None:
            raise ValueError("--against=B (a target, a device or flags) or --reference=FILE is required")
        flags, device = check_flags_and_device(args, iree_flags)
        a = Build(tuple(flags), device)
        b = against_build(args.against, flags, device, args.reference)
        log = None if args.json else (lambda line: print(line, flush=True))
        result = reduce_test(args.source, a, b, log=log)
    except NothingToReduce as e:  # the answer, not trouble: said whole (how to reduce against expected/)
        print(f"iree-lens reduce: {e}", file=sys.stderr)
        return NOTHING_TO_REDUCE
    except (ValueError, FileNotFoundError, LensError) as e:
        # one line: IREE's runtime errors go on with its VM stack
        print(f"iree-lens reduce: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}", file=sys.stderr)
        return TROUBLE
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(f"kept {len(result.kept)} of {result.total} operations ({', '.join(result.kept)}) in {result.tries} tries; "
              f"{result.failure}")  # fmt: skip
        print(result.directory / "reduced.mlir")
    return 0
