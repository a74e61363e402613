"""``iree-lens diverge``: the first dispatch where two configurations part ways, and its reproducer."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from engine.errors import LensError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "diverge", help="run two modules/devices and name the first dispatch whose outputs differ"
    )
    p.add_argument("modules", nargs="*", metavar="MODULE", help="A.vmfb B.vmfb (B may equal A)")
    p.add_argument("--function", help="exported function to call")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    p.add_argument("--device-a", default="local-sync", help="device of run A (default local-sync)")
    p.add_argument("--device-b", default=None, help="device of run B (default: the same as A)")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0)")
    p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--repro", metavar="DIR", help="write a reproducer of the diverging dispatch to DIR")
    p.add_argument(
        "--sources",
        action="append",
        default=[],
        help="executable sources (files or a dump directory): type tensors, and the diverging one's source is copied into the reproducer",
    )
    p.add_argument("--keep", metavar="DIR", help="keep both captures (DIR/a, DIR/b) instead of a temporary")
    p.add_argument("--replay", metavar="DIR", help="rerun a reproducer; exit 1 while it still diverges")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.replay:
            return _replay(args)
        if len(args.modules) != 2 or not args.function:
            print("iree-lens diverge: give A.vmfb B.vmfb and --function", file=sys.stderr)
            return 2
        return _diverge(args)
    except LensError as e:
        print(f"iree-lens diverge: {e}", file=sys.stderr)
        return 1


def _diverge(args) -> int:
    from pathlib import Path

    from engine.dispatch.bundle import Bundle
    from engine.dispatch.capture import capture_debug
    from engine.dispatch.divergence import walk, write_reproducer
    from engine.dispatch.tensor_types import interfaces_from_files

    module_a, module_b = args.modules
    device_b = args.device_b or args.device_a
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="iree-lens-diverge-")
    root = Path(args.keep or tmp.name)
    try:
        # Sources type the tensors and cut packed bindings into them (same interfaces in A and B).
        interfaces = interfaces_from_files(args.sources) if args.sources else None
        capture_debug(
            module_a, args.function, args.input, root / "a", device=args.device_a, interfaces=interfaces
        )
        capture_debug(module_b, args.function, args.input, root / "b", device=device_b, interfaces=interfaces)
        result = walk(Bundle(root / "a"), Bundle(root / "b"), args.atol, args.rtol)
        repro_path = None
        if result.first_divergence is not None and args.repro:
            repro_path = write_reproducer(
                args.repro,
                result.first_divergence,
                module_a=module_a,
                module_b=module_b,
                function=args.function,
                inputs=args.input,
                device_a=args.device_a,
                device_b=device_b,
                atol=args.atol,
                rtol=args.rtol,
                sources=args.sources,
            )
    finally:
        if tmp is not None:
            tmp.cleanup()
    d = result.first_divergence
    if args.json:
        obj = {
            "first_divergence": d.to_json() if d else None,
            "dispatches_compared": result.compared,
            "first_input_difference": result.first_input_difference,
            "notes": result.notes,
            "repro": str(repro_path.parent) if repro_path else None,
        }
        print(json.dumps(obj))
    else:
        for note in result.notes:
            print(f"note: {note}")
        if d is None:
            print(f"no divergence in {result.compared} dispatches (atol={args.atol}, rtol={args.rtol})")
        else:
            print(f"first divergence: dispatch {d.ordinal} {d.name} (executable {d.executable})")
            print(
                f"  output {d.output_index}: {d.mismatches} elements differ, max abs error {d.max_abs_error:g}, "
                f"max rel error {d.max_rel_error:g}, first at {d.first_mismatch}"
            )
            if repro_path:
                print(f"  reproducer: {repro_path.parent}")
    return 0


def _replay(args) -> int:
    from engine.dispatch.divergence import replay

    result = replay(args.replay, args.device_b)
    worst = {i: c.to_json() for i, c in result.comparisons.items()}
    if args.json:
        print(
            json.dumps(
                {
                    "ordinal": result.ordinal,
                    "name": result.name,
                    "reproduced": result.reproduced,
                    "bindings": worst,
                },
                default=str,
            )
        )
    else:
        state = "still diverges" if result.reproduced else "now matches"
        print(f"dispatch {result.ordinal} {result.name}: {state}")
        for i, c in result.comparisons.items():
            print(f"  binding {i}: {c.mismatches} elements differ, max abs error {c.max_abs_error:g}")
    return 1 if result.reproduced else 0
