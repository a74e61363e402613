"""``iree-lens kernel``: step one workgroup of one dispatch, statement by statement.

    iree-lens kernel MODULE.vmfb --function=F --input=... --dispatch=N --workgroup=X,Y,Z
                     [--until=nan|LINE] [--json] [--sources=PATH]

Runs the program on the debug engine to dispatch N (its ordinal in the call, as ``iree-lens debug``'s ``break
dispatch N`` counts: dispatches of the module's initializer are not counted), records workgroup (X,Y,Z) and
prints one record per executed statement: its source location (the executable's MLIR ``FILE:LINE``), the MLIR
op there and its values; a store also says the binding, the byte offset in it and the value. ``--json`` prints
one object per line (NaN and the infinities as the strings "nan", "inf", "-inf"). ``--until=nan`` stops after
the first statement with a NaN or Inf value (printed last); ``--until=LINE`` at the first statement of that
source line. VMVX builds are interpreted by IREE Lens's VM; llvm-cpu builds are rebuilt from their LLVM IR
with every value and store recorded (the IR comes from the sources beside the module, ``--sources``, or a
rebuild of the program the module names). Exit 1 with one line of reason when it cannot be done.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli.program_arguments import add_parameters_argument
from engine.errors import LensError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "kernel",
        help="step one workgroup of one dispatch statement by statement (llvm-cpu and VMVX builds)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("module", help="the .vmfb to run")
    p.add_argument("--function", required=True, help="exported function to call")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    add_parameters_argument(p)
    p.add_argument("--dispatch", type=int, required=True, help="the dispatch's ordinal in the call, from 0 (as the debugger counts)")
    p.add_argument("--workgroup", default="0,0,0", help="the workgroup id X,Y,Z (default 0,0,0)")
    p.add_argument("--until", help="nan: stop after the first NaN/Inf value; LINE: at that source line")
    p.add_argument("--json", action="store_true", help="one JSON object per statement")
    p.add_argument("--sources", action="append", default=[],
                   help="executable sources or LLVM IR (files or folders); default: beside the module")  # fmt: skip
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"iree-lens kernel: {' '.join(str(message).split())}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    from engine.kernel.stepper import record_workgroup
    from engine.kernel.trace import parse_workgroup

    until = (args.until or "").strip().lower()
    if until and until != "nan" and not until.isdigit():
        return _fail(f"bad --until {args.until!r}: expected nan or a source line number")
    if args.dispatch < 0:
        return _fail(f"no dispatch {args.dispatch}: dispatch ordinals count from 0")
    # Recording ends at the statement asked for: the rest of the workgroup is not interpreted or decoded.
    stop_at = None
    if until == "nan":
        stop_at = lambda step: step.nonfinite  # noqa: E731
    elif until:
        stop_at = lambda step: step.location is not None and step.location.line == int(until)  # noqa: E731
    try:
        workgroup = parse_workgroup(args.workgroup)
        trace, _ = record_workgroup(args.module, args.function, args.input, args.dispatch, workgroup, args.sources,
                                    stop_at, args.parameters)  # fmt: skip
    except (LensError, ValueError, OSError) as e:
        return _fail(str(e))
    steps = trace.steps
    stop = None
    if until == "nan":
        stop = trace.first_nonfinite()
        if stop is None:
            print("iree-lens kernel: note: no statement of the workgroup made a NaN or Inf", file=sys.stderr)
    elif until:
        stop = trace.first_at_line(int(until))
        if stop is None:
            print(f"iree-lens kernel: note: no statement of the workgroup is at line {until}", file=sys.stderr)
    if stop is not None:
        steps = steps[: stop + 1]
    for note in trace.notes:
        print(f"iree-lens kernel: note: {note}", file=sys.stderr)
    if not args.json:
        count = f"{len(trace.steps)} statements" + ("" if trace.complete else " recorded up to the one asked for")
        print(f"dispatch {trace.dispatch} {trace.export} workgroup {','.join(map(str, trace.workgroup))} of "
              f"{','.join(map(str, trace.workgroup_count))} ({trace.backend}): {count}")  # fmt: skip
    out = sys.stdout
    for step in steps:
        out.write((json.dumps(step.to_json()) if args.json else step.text()) + "\n")
    return 0
