"""``iree-lens compare-builds``: two builds of one program side by side, by source line.

    iree-lens compare-builds A.vmfb B.vmfb --function=F [--input=...] [--repeat=10] [--source=PROGRAM]
                             [--no-outputs] [--sources=DIR] [--no-rebuild] [--json]

Both builds are profiled with IREE's HAL profiler (``--rounds`` runs of ``--repeat`` calls each, A and B
alternating, neither always first); their dispatches are matched
by the source line and op they came from (``profile --by-source``'s attribution: one dispatch of A can
match several of B where fusion differs). Per line: how many dispatches hold it in each build, their code
size, the line's median time per call in A and B with its spread, and whether it changed beyond noise
(``engine.trace.build_compare``): a line is slower or faster only when its medians differ by more than
10 % and 1 us, B's calls sit apart from A's, B was slower (faster) in every round (all but one in five
from five rounds on) and B's rounds are apart from A's by that bar, each round by its median and by its
fastest call; a difference that fails reads "noise", and the notes say why.
The two builds also run in lockstep on the debug engine (``diverge``'s
runs: B's dispatches fed A's inputs), so each line says whether its dispatches' outputs agree (the
numerics verdicts), and the function's results are compared. Those outputs are typed by A's executable
sources (``--sources``, a sources folder beside A, else a rebuild of the program A names, kept once built;
``--no-rebuild`` skips it: outputs are then compared as bytes, which cannot tell rounding from divergence).

Options may stand anywhere on the line, between the two modules too.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli.exit_status import DIFFERENT, SAME, TROUBLE, epilog, trouble
from engine.cli.program_arguments import add_no_rebuild_argument, add_parameters_argument
from engine.errors import LensError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare-builds",
        help="two builds of one program side by side: time, code size and outputs by source line",
        description=__doc__,
        epilog=epilog(
            "the lockstep run finds outputs that diverge, a line's dispatches' or the function's results' "
            '(--json: "outputs", or a line\'s "outputs", is "diverged")',
            "A change of time is reported, never a status: with --no-outputs the status is 0 or 2.",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("modules", nargs=2, metavar="MODULE", help="A.vmfb B.vmfb")
    p.add_argument("--function", required=True, help="exported function to call")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    add_parameters_argument(p)
    p.add_argument(
        "--device", default=None, help="device of both runs (default: what module A was compiled for)"
    )
    p.add_argument("--repeat", type=int, default=10, help="calls per profiled run (default 10)")
    p.add_argument(
        "--rounds", type=int, default=3, help="profiled runs per build, A and B alternating (default 3)"
    )
    p.add_argument(
        "--source", default=None, help="the input program (default: the file the modules' locations name)"
    )
    p.add_argument("--no-outputs", action="store_true", help="skip the lockstep comparison of outputs")
    p.add_argument(
        "--sources",
        action="append",
        default=[],
        help="executable sources of A (files or a dump directory) that type the compared outputs (default: a "
        "sources folder beside A, else a rebuild of the program A names)",
    )
    add_no_rebuild_argument(p)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one profiled run may take")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def compare_builds(
    module_a: str,
    module_b: str,
    function: str,
    inputs: list[str],
    *,
    device: str | None = None,
    repeat: int = 10,
    rounds: int = 3,
    source: str | None = None,
    outputs: bool = True,
    timeout_s: float = 600.0,
    executable_sources: tuple[str, ...] = (),
    rebuild: bool = True,
    parameters: tuple[str, ...] = (),
):
    """The ``BuildComparison`` of two builds (see the module's docstring); each runs on ``device``, else on
    the device its module was compiled for (two targets: an llvm-cpu build against a Vulkan one). The compared
    outputs are typed by ``executable_sources`` of A, else as the debugger types them (sources beside A, else,
    with ``rebuild``, the checked rebuild of the program A names). ``parameters``: the [SCOPE=]FILE archives
    both builds load their weights from."""
    from engine.cli.profile import profile_reference
    from engine.cli.program_arguments import module_device
    from engine.trace.build_compare import BuildComparison, code_sizes, compare_lines
    from engine.trace.by_source import (
        dispatched,
        export_locations,
        input_program_of,
        source_map,
        target_flags_of,
    )
    from engine.trace.source_ops import flow_with_locations

    notes: list[str] = []
    flows: dict[
        tuple, str
    ] = {}  # one flow compile per (program, target flags): builds of one program share it

    programs: list = []  # the input program found for A: B's, where B records no locations (VMVX)

    def sources_of(module: str):
        program = (
            source
            or input_program_of(export_locations(module), module)
            or (programs[0] if programs else None)
        )
        if program is None:
            return source_map(module, timeout_s=timeout_s)
        programs.append(program)
        key = (str(program), tuple(target_flags_of(module)))
        if key not in flows:
            try:
                flows[key] = flow_with_locations(program, list(key[1]), timeout_s)
            except LensError as e:
                notes.append(f"{e}: dispatches by their exports' locations")
                return source_map(module, flow_text="", timeout_s=timeout_s)
        return source_map(module, flow_text=flows[key])

    device_a = module_device(module_a, device)
    device_b = module_device(module_b, device)
    traces_a, traces_b = [], []
    for k in range(rounds):  # alternating, so a change in the machine's load hits both builds alike;
        # A, B, B, A, ...: the one run second (in a process started as the other's ends) is not always B
        order = ((traces_a, module_a, device_a), (traces_b, module_b, device_b))
        for traces, module, device_of in order if k % 2 == 0 else order[::-1]:
            traces.append(profile_reference(module, function, inputs, device_of, repeat, timeout_s, parameters))
    sources_a, sources_b = sources_of(module_a), sources_of(module_b)
    for label, sources, traces in (("A", sources_a, traces_a), ("B", sources_b, traces_b)):
        ran = {export for trace in traces for export in dispatched(trace)}  # the function's, not the module's
        notes += [f"{label}: {n}" for n in sources.notes_for(ran)]
    lines = compare_lines(
        traces_a, sources_a, code_sizes(module_a), traces_b, sources_b, code_sizes(module_b), repeat
    )
    result = BuildComparison(lines, None, notes)
    if outputs:
        _compare_outputs(result, sources_b, module_a, module_b, function, inputs, (device_a, device_b),
                         executable_sources, rebuild, parameters)  # fmt: skip
    return result


def _compare_outputs(result, sources_b, module_a: str, module_b: str, function: str, inputs: list[str],
                     devices: tuple[str, str], executable_sources: tuple[str, ...], rebuild: bool,
                     parameters: tuple[str, ...]) -> None:  # fmt: skip
    """The two builds run in lockstep, every dispatch's outputs judged: the verdicts go on ``result``'s lines
    (``with_output_verdicts``), the function results' on ``result.outputs``, what was not judged in its notes."""
    from engine.dispatch.lockstep import run_lockstep
    from engine.dispatch.numerics import worst_verdict
    from engine.dispatch.rebuild_sources import found_or_rebuilt, other_build_sources
    from engine.dispatch.typed_tensors import find_sources
    from engine.runtime.parameters import ParameterArchives
    from engine.trace.build_compare import with_output_verdicts

    notes = result.notes
    # Typed as the debugger types them: untyped bytes cannot tell rounding from a divergence.
    if executable_sources or not rebuild:
        typing = find_sources(module_a, executable_sources)
    else:
        typing = found_or_rebuilt(module_a)
    if not typing.found:
        why = typing.note or "none given or beside A" + ("; --no-rebuild: the program A names was not rebuilt"
                                                       if not rebuild and not executable_sources else "")
        notes.append(f"outputs compared without executable sources: {why}")
    typing_b = typing
    if not executable_sources:  # given sources type both builds
        typing_b, said = other_build_sources(module_a, module_b, typing)
        if said and typing_b is not typing:
            notes.append(f"outputs typed: {said}")
    try:
        lockstep = run_lockstep(
            module_a, module_b, function, inputs, device_a=devices[0], device_b=devices[1],
            interfaces=typing.interfaces or None, interfaces_b=typing_b.interfaces or None,
            parameters=ParameterArchives.open_given(parameters),
        )  # fmt: skip
    except LensError as e:
        notes.append(f"outputs not compared: {e}")
        return
    # A dispatch whose untyped bytes differ, or whose outputs A and B type otherwise, is not judged: its lines
    # show no verdict, the note says why.
    runs = [(r.name, str(r.verdict) if r.judged else None) for r in lockstep.dispatches]
    notes += lockstep.unjudged_notes()
    result.lines = with_output_verdicts(result.lines, runs, sources_b)
    result.outputs = str(worst_verdict(c.verdict for c in lockstep.outputs)) if lockstep.outputs else None
    notes += [f"lockstep: {n}" for n in lockstep.notes]


def diverged(result) -> bool:
    """Whether the lockstep comparison of a ``BuildComparison`` found outputs that diverge (exit status 1)."""
    return result.outputs == "diverged" or any(line.outputs == "diverged" for line in result.lines)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from engine.cli.profile import module_problem
    from engine.cli.program_arguments import module_device, no_inputs_problem

    a, b = args.modules
    if args.repeat < 1 or args.rounds < 1:
        print("iree-lens compare-builds: --repeat and --rounds must be at least 1", file=sys.stderr)
        return TROUBLE
    device = args.device
    try:
        for label, module in (("A", a), ("B", b)):  # named before anything runs (IREE's tools would say less)
            if not Path(module).is_file():
                raise LensError(f"no such file: {module}")
            problem = module_problem(module, args.function)
            if problem:
                raise LensError(f"{label}: {problem}")
        problem = no_inputs_problem(a, args.function, args.input)
        if problem:
            raise LensError(problem)
        result = compare_builds(a, b, args.function, args.input, device=device, repeat=args.repeat, rounds=args.rounds,
                                source=args.source, outputs=not args.no_outputs, timeout_s=args.timeout,
                                executable_sources=tuple(args.sources), rebuild=not args.no_rebuild,
                                parameters=tuple(args.parameters))  # fmt: skip
    except BrokenPipeError:
        raise
    except Exception as e:  # trouble, never "they differ" (1): see engine.cli.exit_status
        return trouble("compare-builds", e)
    status = DIFFERENT if diverged(result) else SAME
    if args.json:
        print(json.dumps(result.as_dict()))
        return status
    devices = device or f"{module_device(a)} / {module_device(b)}"
    print(f"A: {a}\nB: {b}\n{devices}, {args.rounds} x {args.repeat} calls each; times are medians per call")
    header = f"{'source line':40} {'op':28} {'A n':>3} {'A bytes':>8} {'A us':>10} {'B n':>3} {'B bytes':>8} {'B us':>10}  change   outputs"
    print(header)
    for line in result.lines:
        print(row_text(line))
    for line in result.lines:
        if line.noise:
            print(f"  {line.loc}: {line.noise}")
    if result.outputs is not None:
        print(f"function results, B against A: {result.outputs}")
    for note in result.notes:
        print(f"  {note}")
    return status


def row_text(line) -> str:
    """One line of the text table: a "same" line whose difference did not hold up reads "noise"."""
    def side(t):
        if t is None:
            return f"{'-':>3} {'-':>8} {'-':>10}"
        size = str(t.code_bytes) if t.code_bytes is not None else "?"
        return f"{len(t.dispatches):>3} {size:>8} {t.median_ns / 1e3:>10.2f}"

    loc = line.loc if len(line.loc) <= 40 else "…" + line.loc[-39:]
    op = (line.op or "(op unknown)")[:28]
    change = "noise" if line.noise else line.change  # "same", with a difference that did not hold up
    return f"{loc:40} {op:28} {side(line.a)} {side(line.b)}  {change:8} {line.outputs or '-'}"
