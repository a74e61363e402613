"""``iree-lens capture``: run a function and write its golden bundle (every dispatch's tensors)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.cli.program_arguments import (
    add_device_argument,
    add_no_rebuild_argument,
    add_program_arguments,
    is_replay,
    missing_function,
    module_device,
    no_inputs_problem,
    parameter_archives,
    positive_int,
    warn_partial_subgroups,
)
from engine.errors import LensError
from engine.session.protocol import INITIALIZER

if TYPE_CHECKING:
    from engine.dispatch.capture import CaptureResult
    from engine.replay.capture import ReplayCaptureResult


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "capture", help="run a function and save its inputs, outputs and every dispatch's tensors"
    )
    add_program_arguments(p, "the .vmfb to run (or an .ireereplay: the replay is the run)")
    p.add_argument(
        "--engine",
        choices=("debug", "reference"),
        default="debug",
        help="debug: IREE Lens's VM (sees every dispatch); reference: IREE's runtime (needs a "
        "module compiled with --iree-flow-trace-dispatch-tensors)",
    )
    add_device_argument(p)
    p.add_argument("--out", required=True, help="the bundle directory to write")
    p.add_argument(
        "--sources",
        action="append",
        default=[],
        help="(debug engine) executable sources that type the tensors: a folder written by "
        "--iree-hal-dump-executable-sources-to, IREE Lens's compile output folder, .mlir files of hal.executable "
        "ops or a hal-phase snapshot (default: a sources folder beside the module, e.g. executables/sources, "
        "else a rebuild of the program the module's debug locations name, used only when it gives the module's "
        "own executables, as the debugger does; without sources each binding is captured as exactly its bytes)",
    )
    add_no_rebuild_argument(p)
    p.add_argument(
        "--type",
        action="append",
        default=[],
        metavar="ORDINAL:input|output:N=TYPE",
        help="override a tensor's type: dispatch ORDINAL's tensor filed as inputN/outputN (the bundle's "
        "slot; the manifest's labels give its binding: binding 3, write, output 0), e.g. 3:output:0=4x16xf32",
    )
    p.add_argument("--dot", metavar="FILE", help="also write the dispatch dependency graph (Graphviz DOT)")
    p.add_argument(
        "--calls",
        type=positive_int,
        default=1,
        metavar="N",
        help="capture call N of the function: the N-1 before run first with the same inputs, not captured (a "
        "program that keeps state between calls: a KV cache, a counter); the manifest keeps them",
    )
    p.set_defaults(func=run)


def parse_overrides(specs: list[str]) -> dict:
    from engine.dispatch.tensor_types import TensorType

    out = {}
    for spec in specs:
        where, _, type_text = spec.partition("=")
        parts = where.split(":")
        if len(parts) != 3 or parts[1] not in ("input", "output") or not type_text:
            raise LensError(f"bad --type {spec!r}: expected ORDINAL:input|output:N=TYPE")
        try:
            out[(int(parts[0]), parts[1], int(parts[2]))] = TensorType.parse(type_text)
        except ValueError as e:
            raise LensError(f"bad --type {spec!r}: {e}") from None
    return out


def run(args: argparse.Namespace) -> int:
    if is_replay(args.module):
        from engine.cli.replay import capture

        if args.calls > 1:
            print("iree-lens capture: a replay is one recorded run: --calls applies to a module", file=sys.stderr)
            return 2

        return capture(args)
    if missing_function("capture", args):
        return 2
    problem = no_inputs_problem(args.module, args.function, args.input)
    if problem:
        print(f"iree-lens capture: {problem}", file=sys.stderr)
        return 1
    from engine.dispatch.capture import capture_debug, capture_reference
    from engine.dispatch.rebuild_sources import found_or_rebuilt
    from engine.dispatch.typed_tensors import find_sources

    calls_before = [(args.function, tuple(args.input))] * (args.calls - 1)
    try:
        args.device = module_device(args.module, args.device)
        warn_partial_subgroups("capture", args.module, args.device)
        if args.engine == "reference":
            if args.function == INITIALIZER:
                raise LensError("the reference engine is IREE's runtime, which runs the module's initializer "
                                f"({INITIALIZER}) as it loads the module: capture it with --engine=debug")
            if args.sources or args.type:
                print("iree-lens capture: --sources/--type apply to the debug engine only", file=sys.stderr)
            result = capture_reference(args.module, args.function, args.input, args.out, device=args.device,
                                       parameters=parameter_archives(args), calls_before=calls_before,
                                       modules=args.modules)  # fmt: skip
        else:
            if args.sources or args.no_rebuild:
                sources = find_sources(args.module, args.sources)
                if args.sources and not sources.found:
                    raise LensError(f"no hal.executable sources in {', '.join(args.sources)}")
            else:  # as the debugger types them: beside the module, else the checked rebuild
                sources = found_or_rebuilt(args.module)
                print(f"iree-lens capture: {_typing_note(sources)}", file=sys.stderr)
            result = capture_debug(
                args.module,
                args.function,
                args.input,
                args.out,
                device=args.device,
                sources=sources,
                overrides=parse_overrides(args.type),
                parameters=parameter_archives(args),
                calls_before=calls_before,
                modules=args.modules,
            )
    except LensError as e:
        print(f"iree-lens capture: {e}", file=sys.stderr)
        return 1
    for note in result.notes:
        print(f"iree-lens capture: {note}", file=sys.stderr)
    report_bundle(result, f"@{args.function}", args.dot)
    return 0


def _typing_note(sources) -> str:
    """What types the tensors of a capture given no --sources (said on stderr, as diverge says it)."""
    return f"tensors typed by {sources.describe()}" if sources.found else sources.describe()


def report_bundle(result: CaptureResult | ReplayCaptureResult, what: str, dot: str | None) -> None:
    """Say what a capture wrote (``result``: a ``CaptureResult`` of a module's ``what``, or a replay's), and
    write its dependency graph to ``dot`` if asked."""
    if dot:
        from engine.dispatch.bundle import Bundle
        from engine.dispatch.graph import dependency_graph

        with open(dot, "w") as f:
            f.write(dependency_graph(Bundle(result.directory).dispatches).to_dot())
    before = getattr(result, "initializer_dispatches", 0)
    print(
        f"captured {_dispatches(result.dispatches)} of {what} into {result.directory} "
        f"({result.bytes_written} bytes of tensors)"
        + (f"; the module's initializer ran {_dispatches(before)} before the call, not captured (--function="
           f"{INITIALIZER} captures them)" if before else "")
    )


def _dispatches(n: int) -> str:
    return f"{n} dispatch" if n == 1 else f"{n} dispatches"
