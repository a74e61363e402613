"""``iree-lens diverge``: the first dispatch where two configurations part ways, and its reproducer.

By default the two runs go in lockstep, each dispatch of B given A's input bytes (``engine.dispatch.lockstep``)
and judged by ``engine.dispatch.numerics``: rounding-level differences (another target, device or
reduction order) are "within rounding", not divergence; ``--atol/--rtol/--ulps`` replace that rule."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial

from engine.cli.exit_status import DIFFERENT, SAME, TROUBLE, epilog, trouble
from engine.cli.program_arguments import (
    add_no_rebuild_argument,
    add_parameters_argument,
    only_function,
    parameter_archives,
    positive_int,
)
from engine.errors import LensError
from engine.temp_caches import scratch_dir


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "diverge",
        help="run two modules/devices and name the first dispatch whose outputs differ",
        epilog=epilog(
            "a first divergence is named (--json: first_divergence is not null; --replay: the reproducer "
            "still diverges)",
            "Options may stand anywhere on the line, between the two modules too.",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "modules",
        nargs="*",
        metavar="MODULE",
        help="A.vmfb B.vmfb (B may equal A; one module given with --device-a/--device-b runs on both devices)",
    )
    p.add_argument("--function", help="exported function to call")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    add_parameters_argument(p)  # both builds load their weights from the same archives
    p.add_argument("--device-a", default=None, help="device of run A (default: what module A was compiled for)")
    p.add_argument(
        "--device-b", default=None, help="device of run B (default: A's for the same module, else B's own)"
    )
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance (replaces the rounding rule)")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance (replaces the rounding rule)")
    p.add_argument(
        "--ulps", type=float, default=None, help="units in the last place allowed (replaces the rounding rule)"
    )
    p.add_argument(
        "--calls",
        type=positive_int,
        default=1,
        metavar="N",
        help="call the function N times in each run, with the same inputs (a program that keeps state between "
        "calls, a KV cache or a counter): dispatches are compared call by call (default 1)",
    )
    p.add_argument(
        "--own-inputs",
        action="store_true",
        help="run B on its own data instead of A's input bytes per dispatch (differences accumulate)",
    )
    p.add_argument(
        "--golden",
        metavar="FILE",
        help="a framework's final outputs (.npy, or .npz in result order): both runs' results are compared",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--repro", metavar="DIR", help="write a reproducer of the diverging dispatch to DIR")
    p.add_argument(
        "--sources",
        action="append",
        default=[],
        help="executable sources (files or a dump directory): type tensors, and the diverging one's source is copied into the reproducer",
    )
    add_no_rebuild_argument(p)
    p.add_argument(
        "--keep",
        metavar="DIR",
        help="capture both runs to bundles (DIR/a, DIR/b) and compare those, each run on its own inputs",
    )
    p.add_argument(
        "--replay", metavar="DIR", help="rerun a reproducer; exit 1 while it still diverges, 0 once it matches"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.replay:
            return _replay(args)
        if len(args.modules) == 1 and (args.device_a or args.device_b):
            args.modules = [args.modules[0]] * 2  # one module on two devices
        if len(args.modules) != 2:
            print(
                "iree-lens diverge: give A.vmfb B.vmfb, or one module with --device-a/--device-b "
                "[--function=F] [--input=...]",
                file=sys.stderr,
            )
            return TROUBLE
        from pathlib import Path

        for module in args.modules:
            if not Path(module).is_file():
                raise LensError(f"no such file: {module}")
        args.function = args.function or only_function(args.modules[0])
        if not args.function:
            print("iree-lens diverge: the module exports several functions; give --function", file=sys.stderr)
            return TROUBLE
        from engine.runtime.vmfb.module import open_vmfb

        for side, module in zip("AB", args.modules):  # said before either runs, naming the module
            vmfb = open_vmfb(module)
            try:
                vmfb.function(args.function)
            except KeyError:
                exports = ", ".join(e.name for e in vmfb.exports if not e.name.startswith("__"))
                raise LensError(f"module {side} ({module}) has no function {args.function!r}; it exports {exports}") from None
        if not args.input:
            args.input = _generated_inputs(args.modules[0], args.function)
        return _diverge(args)
    except BrokenPipeError:
        raise  # the reader stopped reading (``| head``): the command line's own affair
    except Exception as e:  # trouble, never "it diverged" (1): see engine.cli.exit_status
        return trouble("diverge", e)


def _generated_inputs(module: str, function: str) -> list[str]:
    """Seeded random inputs (uniform in [-1, 1), small integers) shaped as the function's host code checks
    them, for a run without ``--input``; both runs get the same files. Empty when shapes are unknown."""

    import numpy as np

    from engine.dispatch.tensor_types import element_dtype
    from engine.runtime.vmfb.input_asserts import asserted_inputs
    from engine.runtime.vmfb.module import open_vmfb

    try:
        found = asserted_inputs(open_vmfb(module), function)
    except (LensError, ValueError, KeyError):
        return []
    if not found:
        return []
    folder = scratch_dir("iree-lens-diverge-inputs-")
    rng = np.random.default_rng(0)
    specs = []
    for arg in sorted(found, key=lambda a: a.index):
        element = arg.element_type.removeprefix("s").replace("ui", "u")
        try:
            dtype = element_dtype(element if element[0] != "u" else "i" + element[1:])
        except ValueError:
            return []
        if dtype.kind == "f" or dtype.name == "bfloat16":
            data = rng.uniform(-1.0, 1.0, arg.shape).astype(dtype)
        else:
            data = rng.integers(0, 8, arg.shape).astype(dtype)
        path = folder / f"input{arg.index}.npy"
        np.save(path, data)
        specs.append(f"@{path}")
    print(f"iree-lens diverge: no --input given: seeded random inputs in {folder}", file=sys.stderr)
    return specs


def _devices(args) -> tuple[str, str]:
    from pathlib import Path

    from engine.cli.program_arguments import module_device

    module_a, module_b = args.modules
    device_a = module_device(module_a, args.device_a, "--device-a")
    if args.device_b:
        return device_a, module_device(module_b, args.device_b, "--device-b")
    same = Path(module_a).resolve() == Path(module_b).resolve()
    return device_a, device_a if same else module_device(module_b)


def _diverge(args) -> int:
    from engine.dispatch.numerics import Tolerance
    from engine.dispatch.tensor_types import interfaces_from_files

    module_a, module_b = args.modules
    device_a, device_b = _devices(args)
    tolerance = Tolerance(args.atol, args.rtol, args.ulps)
    # Sources type the tensors and cut packed bindings into them: --sources both builds', else A's found or rebuilt,
    # and B's as other_build_sources decides (A's where B formed the same dispatches).
    if args.sources:
        interfaces = interfaces_b = interfaces_from_files(args.sources)
    else:
        interfaces, interfaces_b = _sources_found(module_a, module_b, not args.no_rebuild)
    if args.keep:
        if args.calls > 1:
            raise LensError("--keep captures one call of each run; --calls compares several in lockstep: give one")
        return _diverge_bundles(args, device_a, device_b, interfaces, interfaces_b)
    from engine.dispatch.lockstep import run_lockstep

    result = run_lockstep(
        module_a, module_b, args.function, args.input, device_a=device_a, device_b=device_b,
        tolerance=tolerance, feed=not args.own_inputs, interfaces=interfaces, interfaces_b=interfaces_b,
        on_report=None if args.json else partial(_print_report, many_calls=args.calls > 1),
        parameters=parameter_archives(args), calls=args.calls,
    )  # fmt: skip
    result.notes += result.unjudged_notes()
    divergence = _first_divergence(result, module_a, module_b)
    repro_path = None
    if divergence is not None and args.repro:
        repro_path = _write_repro(args, result, divergence, device_a, device_b)
    golden = None
    if args.golden:
        # Fed, B's results are its last dispatches run on A's bytes: mostly A's own. Against the framework
        # B is judged on what it computes alone.
        results_b = result.results_b if args.own_inputs else _own_run(module_b, args.function, args.input, device_b, args)
        golden = _golden(args.golden, result.results_a, results_b, tolerance)
    counts: dict[str, int] = {}
    for d in result.dispatches:
        key = d.label.replace(" ", "_")  # the verdict's name, or what kept it from being judged
        counts[key] = counts.get(key, 0) + 1
    if args.json:
        obj = {
            "first_divergence": divergence.to_json() if divergence else None,
            "dispatches_compared": len(result.dispatches),
            "calls": args.calls,
            "first_input_difference": result.first_input_difference,
            "notes": result.notes,
            "repro": str(repro_path.parent) if repro_path else None,
            "devices": [device_a, device_b],
            "same_inputs": not args.own_inputs,
            "tolerance": tolerance.to_json(),
            "verdicts": counts,
            "dispatches": [d.to_json() for d in result.dispatches],
            "outputs": [c.to_json() for c in result.outputs],
            "golden": golden,
        }
        print(json.dumps(obj))
    else:
        _print_verdict(args, result, divergence, repro_path, golden, counts, tolerance)
    return SAME if divergence is None else DIFFERENT


def _first_divergence(result, module_a: str, module_b: str):
    """The lockstep's culprit as a ``Divergence`` (None where A and B agree); a race hazard either build's
    kernel has is added to the result's notes."""
    from engine.dispatch.divergence import Divergence, dispatch_locations, source_line

    culprit = result.culprit
    if culprit is None:
        return None
    c = culprit.comparison
    location = result.locations.get(culprit.name) or dispatch_locations(module_b).get(culprit.name)
    divergence = Divergence(
        culprit.ordinal, culprit.name, culprit.executable,
        c.max_abs_error if c else float("inf"), c.max_rel_error if c else float("inf"),
        c.mismatches if c else 0, culprit.worst_output or 0, c.first_mismatch if c else None,
        culprit.workgroups, culprit.inputs_verdict != "diverged" or culprit.fed, c,
        str(culprit.inputs_verdict), culprit.fed, location, source_line(location), culprit.call,
    )  # fmt: skip
    # A kernel that shares workgroup memory with no barrier diverges by scheduling on GPUs whose
    # subgroup is smaller than its workgroup (IREE's default Vulkan target on an NVIDIA H100).
    from engine.dispatch.spirv_hazards import race_note
    from engine.runtime.vmfb.module import open_vmfb

    for side, path in (("B", module_b), ("A", module_a)):
        note = race_note(open_vmfb(path), culprit.name, side)
        if note:
            result.notes.append(note)
    return divergence


def _write_repro(args, result, divergence, device_a: str, device_b: str):
    from engine.dispatch.divergence import write_reproducer

    module_a, module_b = args.modules
    step = result.culprit_step
    return write_reproducer(
        args.repro, divergence, module_a=module_a, module_b=module_b, function=args.function,
        inputs=args.input, device_a=device_a, device_b=device_b, atol=args.atol, rtol=args.rtol,
        ulps=args.ulps, sources=args.sources, before=step.before if step else None,
        after=step.after if step else None, record=result.culprit_record,
        elements=_binding_elements(step) if step else None, tensors=_binding_tensors(step) if step else None,
    )  # fmt: skip


def _print_verdict(args, result, divergence, repro_path, golden, counts: dict[str, int], tolerance) -> None:
    for note in result.notes:
        print(f"note: {note}")
    summary = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items())
    how = "each on A's input bytes" if not args.own_inputs else "each run on its own inputs"
    if divergence is None:
        said = "; ".join(part for part in (summary, how, tolerance.describe()) if part)  # no dispatches: no counts
        # Where the builds formed their dispatches otherwise, the count compared is not the whole program's.
        of = f" of B's {result.count_b}" if result.count_b != len(result.dispatches) else ""
        print(f"no divergence in {len(result.dispatches)}{of} dispatches ({said})")
    else:
        d = divergence
        call = f"call {d.call}, " if args.calls > 1 else ""
        print(f"first divergence: {call}dispatch {d.ordinal} {d.name} (executable {d.executable})")
        if d.location:
            print(f"  from {d.location}" + (f": {d.source_line}" if d.source_line else ""))
        if d.comparison is not None:
            print(f"  output {d.output_index}: {d.comparison.summary()}")
        if repro_path:
            print(f"  reproducer: {repro_path.parent}")
    fed = " (B's dispatches on A's inputs)" if not args.own_inputs else ""
    for c in result.outputs:
        print(f"program output, B against A{fed}: {c.summary()}")
    for line in golden or []:
        print(f"golden {line['run']} output {line['output']}: {line['summary']}")


def _sources_found(module_a: str, module_b: str, rebuild: bool = True) -> tuple[dict | None, dict | None]:
    """The interfaces of A's and B's executable sources where no --sources were given: A's a sources folder
    beside it, else (``rebuild``) a rebuild of the program its debug locations name (kept, checked to give the
    module's own executables), as the debugger finds them; B's as ``other_build_sources`` decides. None (said
    on stderr) where there are none."""
    from engine.dispatch.rebuild_sources import found_or_rebuilt, other_build_sources
    from engine.dispatch.typed_tensors import find_sources

    sources = found_or_rebuilt(module_a) if rebuild else find_sources(module_a)
    if sources.found:
        print(f"iree-lens diverge: tensors typed by {sources.describe()}", file=sys.stderr)
    else:
        print(f"iree-lens diverge: {sources.describe()}", file=sys.stderr)
    sources_b, said = other_build_sources(module_a, module_b, sources)
    if said:
        print(f"iree-lens diverge: {said}", file=sys.stderr)
    return sources.interfaces or None, sources_b.interfaces or None


def _print_report(d, many_calls: bool = False) -> None:
    """One line a dispatch, as the runs go (text mode); ``many_calls``: each run makes several calls."""
    detail = f" {d.comparison.summary()}" if d.comparison is not None and str(d.verdict) != "exact" else ""
    if d.layout_differs:
        detail = f" {d.note}"
    elif d.structural:
        detail += f" ({d.note})"
    call = f"call {d.call} " if many_calls else ""
    print(f"  {call}#{d.ordinal:<4} {d.label:<16} {d.name}{detail}", flush=True)


def _binding_elements(step) -> dict[int, str]:
    """Element types of the culprit's written bindings where one typed output fills a binding."""
    from engine.dispatch.numerics import element_of

    written = [i for i, info in enumerate(step.entry.bindings) if info.get("access") != "read"]
    out = {}
    if step.entry.tensors_from == "bindings":
        for i, t in zip(written, step.outputs):
            if t.nbytes == step.lengths[i]:
                out[i] = element_of(t.dtype)
    return out


def _own_run(module: str, function: str, inputs: list[str], device: str, args: argparse.Namespace) -> list:
    """The results of ``module`` run alone on the debug engine, as ``iree-lens run`` gives them."""
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner
    from engine.runtime.function_io import parse_inputs, split_cconv

    runner = DebugRunner(module, device, parameters=parameter_archives(args), run_init=function != INITIALIZER)
    return runner.invoke(function, parse_inputs(inputs, split_cconv(runner.cconv(function))[0]))


def _binding_tensors(step) -> dict[int, list[tuple[int, str]]]:
    """Where each typed output of the culprit lies in A's written bindings: binding -> [(byte offset, type)],
    so the reproducer compares the tensor the finder compared, not the whole binding around it."""
    import numpy as np

    found: dict[int, list[tuple[int, str]]] = {}
    if step.entry.tensors_from == "bindings":
        return found
    for array, type_text in zip(step.outputs, step.entry.output_types):
        for i, after in step.after.items():
            if array.flags.c_contiguous and np.shares_memory(array, after):
                offset = array.__array_interface__["data"][0] - after.__array_interface__["data"][0]
                found.setdefault(i, []).append((int(offset), type_text))
    return found


def _golden(path: str, results_a: list, results_b: list, tolerance) -> list[dict]:
    """Both runs' tensor results against a framework's outputs (``.npy``/``.npz``)."""
    from engine.dispatch.numerics import compare, load_golden
    from engine.runtime.function_io import Tensor

    expected = load_golden(path)
    lines = []
    for run, results in (("A", results_a), ("B", results_b)):
        tensors = [r for r in results if isinstance(r, Tensor)]
        for i, ((name, want), got) in enumerate(zip(expected, tensors)):
            c = compare(got.array, want, tolerance=tolerance)
            lines.append({"run": run, "output": i, "golden": name, "summary": c.summary(), **c.to_json()})
    return lines


def _diverge_bundles(args, device_a: str, device_b: str, interfaces, interfaces_b) -> int:
    """The capture path: both runs to bundles in ``--keep`` DIR, then compared (each on its own inputs)."""
    from pathlib import Path

    from engine.dispatch.bundle import Bundle
    from engine.dispatch.capture import capture_debug
    from engine.dispatch.divergence import walk, write_reproducer

    module_a, module_b = args.modules
    root = Path(args.keep)
    parameters = parameter_archives(args)
    run_a = capture_debug(module_a, args.function, args.input, root / "a", device=device_a, interfaces=interfaces,
                          parameters=parameters)  # fmt: skip
    run_b = capture_debug(module_b, args.function, args.input, root / "b", device=device_b, interfaces=interfaces_b,
                          parameters=parameters)  # fmt: skip
    result = walk(Bundle(root / "a"), Bundle(root / "b"), args.atol, args.rtol, args.ulps)
    repro_path = None
    if result.first_divergence is not None and args.repro:
        repro_path = write_reproducer(
            args.repro, result.first_divergence, module_a=module_a, module_b=module_b, function=args.function,
            inputs=args.input, device_a=device_a, device_b=device_b, atol=args.atol, rtol=args.rtol,
            ulps=args.ulps, sources=args.sources,
        )  # fmt: skip
    golden = None
    if args.golden:  # each run on its own inputs: their results are their own
        from engine.dispatch.numerics import Tolerance

        golden = _golden(args.golden, run_a.results, run_b.results, Tolerance(args.atol, args.rtol, args.ulps))
    d = result.first_divergence
    if args.json:
        obj = {
            "first_divergence": d.to_json() if d else None,
            "golden": golden,
            "dispatches_compared": result.compared,
            "first_input_difference": result.first_input_difference,
            "notes": result.notes,
            "repro": str(repro_path.parent) if repro_path else None,
            "devices": [device_a, device_b],
            "same_inputs": False,
            "dispatches": [
                {"ordinal": o, "name": n, "verdict": v, "inputs": i} for o, n, v, i in result.verdicts
            ],
        }
        print(json.dumps(obj))
        return SAME if d is None else DIFFERENT
    for note in result.notes:
        print(f"note: {note}")
    if d is None:
        print(f"no divergence in {result.compared} dispatches")
    else:
        print(f"first divergence: dispatch {d.ordinal} {d.name} (executable {d.executable})")
        if d.comparison is not None:
            print(f"  output {d.output_index}: {d.comparison.summary()}")
        if repro_path:
            print(f"  reproducer: {repro_path.parent}")
    for line in golden or []:
        print(f"golden {line['run']} output {line['output']}: {line['summary']}")
    return SAME if d is None else DIFFERENT


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
            print(f"  binding {i}: {c.summary()}")
    return DIFFERENT if result.reproduced else SAME
