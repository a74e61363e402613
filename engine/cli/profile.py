"""``iree-lens profile``: run a function and write its timing zones as Chrome trace-event JSON.

Every executed dispatch is one complete event (``"ph": "X"``, ``"cat": "dispatch"``) named by its export,
with ``args`` ``ordinal`` (its place in the run), ``executable`` and ``workgroup_count``; the rest of what
the engine saw is there too (VM calls and imports, command buffers, IREE's queue operations).

* ``--engine=reference``: IREE's own HAL profiler (``iree-run-module --device_profiling_mode=...``, then
  ``iree-profile export``), so the dispatches are exactly those IREE records;
* ``--engine=debug``: IREE Lens's VM and emulated HAL with a ``ZoneRecorder``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from engine.cli.program_arguments import (
    add_device_argument,
    add_program_arguments,
    is_replay,
    missing_function,
    module_device,
    no_inputs_problem,
    warn_partial_subgroups,
)
from engine.errors import LensError
from engine.trace.chrome import write_chrome_json
from engine.trace.model import Trace


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("profile", help="run a function and write its timing zones (Chrome trace JSON)")
    add_program_arguments(p, "the .vmfb to run (or an .ireereplay, replayed on the debug engine)")
    p.add_argument(
        "--engine",
        choices=("reference", "debug"),
        default="reference",
        help="reference: IREE's runtime and HAL profiler; debug: IREE Lens's VM and emulated HAL",
    )
    add_device_argument(p)
    p.add_argument("--repeat", type=int, default=1, help="call the function N times (default 1)")
    p.add_argument("--out", required=True, help="where the Chrome trace JSON goes")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds one reference run may take (default 600)"
    )
    p.add_argument(
        "--by-source",
        default=None,
        metavar="ATTR.json",
        help="also write the dispatch time by source line of the input program (JSON)",
    )
    p.add_argument(
        "--source",
        default=None,
        help="the input program the module was compiled from (default: the file its locations name)",
    )
    p.set_defaults(func=run)


def profile_reference(
    module: str, function: str, inputs: list[str], device: str, repeat: int = 1, timeout_s: float = 600.0,
    parameters: Sequence[str] = (), modules: Sequence[str] = (),
) -> Trace:
    """IREE's HAL profile of ``repeat`` calls in one process (``iree-run-module``, or
    ``iree-benchmark-module`` for several calls: the initializer runs once, as on the debug engine)."""
    from engine.runtime.module_dependencies import linked_modules
    from engine.runtime.parameters import archives_beside
    from engine.runtime.vmfb.module import open_vmfb
    from engine.trace.ireeprof import capture_ireeprof, load_ireeprof

    if not parameters:  # as the debug engine takes them: the archive beside it that holds its weights
        parameters = [str(s) for s in archives_beside(module, open_vmfb(module))]
    with tempfile.TemporaryDirectory(prefix="lens-profile-") as d:
        out = Path(d) / "run.ireeprof"
        capture_ireeprof(module, function, inputs, out, device=device, timeout_s=timeout_s, repeat=repeat,
                         extra_flags=[f"--parameters={p}" for p in parameters],
                         modules=[m.path for m in linked_modules(module, modules)])
        trace = load_ireeprof(out)
    trace.source = str(module)
    trace.metadata["device"] = device
    return trace


def profile_debug(
    module: str, function: str, inputs: list[str], device: str, repeat: int = 1, parameters: Sequence[str] = (),
    modules: Sequence[str] = (),
) -> Trace:
    """Zones of ``repeat`` calls on the debug engine (VM calls, imports, command buffers, dispatches)."""
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner, create_device
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.module import HalModule
    from engine.runtime.parameters import ParameterArchives
    from engine.trace.recorder import ZoneRecorder

    recorder = ZoneRecorder()
    hal_device = create_device(device)

    runner = DebugRunner(
        module,
        device,
        hal_module=HalModule(hal_device),
        # Record the module's initializer too: IREE's profile has its dispatches.
        before_init=lambda loaded: recorder.attach(loaded.context.interpreter, loaded.device),
        parameters=ParameterArchives.open_given(parameters),
        run_init=function != INITIALIZER,
        modules=tuple(modules),
    )
    arg_kinds, _ = split_cconv(runner.cconv(function))
    values = parse_inputs(inputs, arg_kinds)
    for _ in range(repeat):
        runner.invoke(function, values)
    recorder.detach(runner.context.interpreter, runner.device)
    trace = recorder.trace(source=str(module))
    trace.metadata["device"] = device
    return trace


def module_problem(module: str, function: str) -> str | None:
    """Why ``module`` cannot be profiled calling ``function`` (a damaged file, no such export), or None: said
    before IREE's tools run it (their 'rodata[0] external reference out of range' or 'no function exported'
    does not name the module)."""
    from engine.runtime.vmfb.module import open_vmfb

    try:
        opened = open_vmfb(module)
        names = [e.name for e in opened.exports]
        _ = opened.rodata_segments  # a truncated file ends inside them: said with the bytes missing
    except (LensError, OSError, ValueError) as e:
        return str(e)
    if function not in names:
        return f"{module} exports no function {function!r} (it exports {', '.join(names) or 'none'})"
    return None


def run(args: argparse.Namespace) -> int:
    if is_replay(args.module):
        from engine.cli.replay import profile

        if args.by_source:
            print("iree-lens profile: --by-source needs the module (.vmfb) its locations come from, "
                  "not a replay", file=sys.stderr)  # fmt: skip
            return 2

        return profile(args)
    if missing_function("profile", args):
        return 2
    if args.repeat < 1:
        print("iree-lens profile: --repeat must be at least 1", file=sys.stderr)
        return 2
    problem = module_problem(args.module, args.function) or no_inputs_problem(args.module, args.function, args.input)
    for out in (args.out, args.by_source):
        if not problem and out and not Path(out).resolve().parent.is_dir():
            problem = f"no folder {Path(out).resolve().parent} to write {out} in"
    if problem:
        print(f"iree-lens profile: {problem}", file=sys.stderr)
        return 1
    try:
        args.device = module_device(args.module, args.device)
        warn_partial_subgroups("profile", args.module, args.device)
        if args.engine == "reference":
            trace = profile_reference(
                args.module, args.function, args.input, args.device, args.repeat, args.timeout, args.parameters,
                modules=args.modules,
            )
        else:
            trace = profile_debug(args.module, args.function, args.input, args.device, args.repeat, args.parameters,
                                  modules=args.modules)  # fmt: skip
        write_profile(trace, args.out)
        if args.by_source:
            write_by_source(trace, args.module, args.by_source, args.source, args.timeout)
    except (LensError, OSError) as e:
        print(f"iree-lens profile: {e}", file=sys.stderr)
        return 1
    return 0


def write_profile(trace: Trace, out: str) -> None:
    """Write ``trace`` as Chrome trace JSON to ``out`` and say how many dispatches and zones it holds."""
    write_chrome_json(trace, out)
    dispatches = (
        int((trace.zones.category == trace.categories.id_of("dispatch")).sum()) if len(trace.zones) else 0
    )
    print(f"{dispatches} dispatches, {len(trace.zones)} zones -> {out}")


def write_by_source(trace: Trace, module: str, out: str, source: str | None, timeout_s: float) -> None:
    """Write the dispatch time of ``trace`` by source line to ``out`` and print the top lines."""
    from engine.trace.by_source import FRONTEND_OPS_SAID, attribute, source_map

    attribution = attribute(trace, source_map(module, source=source, timeout_s=timeout_s))
    attribution.write_json(out)
    for note in attribution.notes:
        print(f"  {note}")
    total = attribution.dispatch_time_ns
    print(f"{total / 1e3:.1f} us of dispatch time on {len(attribution.by_source)} source lines "
          f"({attribution.coverage * 100:.1f} % on lines holding the frontend's ops: {FRONTEND_OPS_SAID}) -> {out}")  # fmt: skip
    for row in attribution.by_source[:5]:
        share = row.time_ns / total * 100 if total else 0.0
        print(f"  {share:5.1f} %  {row.time_ns / 1e3:10.1f} us  {row.loc}  {row.op_said()}")
