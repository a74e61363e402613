"""``iree-lens benchmark``: time one dispatch of a run, the module's kernel against an edit of it.

    iree-lens benchmark MODULE.vmfb --dispatch=NAME --function=F [--input=...] [--substitute=NAME=FILE ...]
                        [--device=local-sync|vulkan (default: the module's)] [--samples=20] [--repetitions=5] [--json]

The function runs on the debug engine until the first dispatch NAME selects (an export, the dispatch
executable it came from such as ``main$async_dispatch_3``, or ``#K`` or ``K``, the K-th dispatch of the call); its
bindings are kept. On the CPU that dispatch is then timed the way ``iree-benchmark-executable`` times it
(``engine.dispatch.kernel_timing``: the same binary loaded once, the same workgroup count, one set of
buffers holding its input bytes, a warm-up, batches of ``--batch-size`` dispatches until ``--min-time``
has passed per repetition), alternating with IREE's tool, one repetition each, for ``--repetitions``
rounds: both medians in the same minute, their ratio, and each one's noise (half the interquartile range
over the median; a warning where it is above 5 %, too noisy to tell a 5 % change). The module's kernel
and the ``--substitute`` edit are timed so. The dispatch is placed on the machine's roofline
(``engine.dispatch.roofline``). A Vulkan dispatch is timed through the emulated device.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from dataclasses import dataclass

import numpy as np

from engine.cli.program_arguments import add_parameters_argument
from engine.errors import LensError
from engine.runtime.hal.device import DispatchObserver, DispatchRecord


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "benchmark",
        help="time one dispatch of a run: the module's kernel against an edit (and iree-benchmark-executable)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("module", nargs="?", default=None, help="the .vmfb (default: the --bundle's module)")
    p.add_argument("--dispatch", required=True, help="#K or K (the K-th dispatch of the run, from 0), an export name or a prefix of it (main_dispatch_3), or a glob ('*conv*')")
    p.add_argument("--function", default=None, help="the function whose run reaches the dispatch")
    p.add_argument(
        "--bundle",
        default=None,
        metavar="DIR",
        help="a capture bundle: its module, function and program inputs reach the dispatch (dynamic shapes too)",
    )
    p.add_argument(
        "--against",
        default=None,
        metavar="B.vmfb",
        help="another build: the same dispatch of its run (its own binary, workgroups and bytes) timed beside",
    )
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    add_parameters_argument(p)
    p.add_argument(
        "--substitute", action="append", default=[], metavar="NAME=FILE", help="an edit; repeatable"
    )
    p.add_argument("--device", default=None,
                   help="local-sync or vulkan (default: the device the module was compiled for)")  # fmt: skip
    p.add_argument("--samples", type=int, default=20, help="Vulkan: timed batches per kernel (default 20)")
    p.add_argument(
        "--repetitions",
        type=int,
        default=5,
        help="rounds: one repetition of IREE Lens and of IREE's tool each",
    )
    p.add_argument(
        "--min-time", type=float, default=0.2, help="seconds per repetition (default 0.2, as IREE's)"
    )
    p.add_argument("--batch-size", type=int, default=16, help="dispatches per batch (default 16, as IREE's)")
    p.add_argument(
        "--source", default=None, help="the input program (FLOPs of the dispatch's ops for the roofline)"
    )
    p.add_argument(
        "--no-roofline", action="store_true", help="skip the roofline (measuring the machine's limits)"
    )
    p.add_argument("--no-iree", action="store_true", help="skip iree-benchmark-executable")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


_LISTED = 40  # exports listed when --dispatch names none


def dispatch_ordinal(selector: str) -> int | None:
    """The ordinal ``--dispatch`` names (``#K``, or ``K`` alone as ``kernel --dispatch`` takes it), None for a name
    or a glob; ``LensError`` for a ``#`` with no ordinal after it (an export name never starts with a digit)."""
    text = selector.strip()
    number = text[1:] if text.startswith("#") else text
    if number.isdigit():
        return int(number)
    if text.startswith("#"):
        raise LensError(f"bad --dispatch {selector!r}: #K takes the dispatch's ordinal in the run, from 0 (#3)")
    return None


class _FirstMatch(DispatchObserver):
    """Keeps the bindings of the first dispatch ``selector`` names (before it runs), as a snapshot."""

    def __init__(self, device, selector: str):
        self.device = device
        self.selector = selector
        self.ordinal = dispatch_ordinal(selector)
        self.count = 0
        self.found = None
        self.names: dict[str, int] = {}  # each export run, with its first ordinal (to list when none matched)

    def _matches(self, record: DispatchRecord) -> bool:
        if self.ordinal is not None:
            return self.count == self.ordinal
        name = record.export_name or ""
        if any(c in self.selector for c in "*?["):  # a glob, as debug's and the window's breakpoints take
            return fnmatch.fnmatchcase(name, self.selector)
        return name == self.selector or name.startswith(self.selector + "_")

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.names.setdefault(record.export_name or "", self.count)
        if self.found is None and self._matches(record):
            from engine.substitute.live import DispatchSnapshot, executable_of

            before = tuple(np.array(b.data, copy=True) for b in record.bindings)
            self.found = DispatchSnapshot(record, executable_of(self.device, record), before, None)
        self.count += 1


def _timing(t) -> dict:
    low, high = t.spread_s
    return {"median_s": t.median_s, "p10_s": low, "p90_s": high, "samples": len(t.samples_s)}


def _line(label: str, t) -> str:
    low, high = t.spread_s
    return f"{label}: {t.median_s * 1e6:.2f} us per dispatch (p10 {low * 1e6:.2f}, p90 {high * 1e6:.2f}; {len(t.samples_s)} samples)"


@dataclass
class _Measured:
    """What one benchmark measured on a CPU device: the dispatch, its kernel timings (the module's, then the
    edit's, each as (IREE Lens, iree-benchmark-executable or None)), B's and the roofline."""

    record: DispatchRecord
    timed: list
    against: tuple | None
    roofline: object | None


def run(args: argparse.Namespace) -> int:
    refusal = _refusal(args)
    if refusal is not None:
        print(f"iree-lens benchmark: {refusal}", file=sys.stderr)
        return 2
    temp = None
    try:
        temp = _from_bundle(args)
        module, live, snapshot = _catch_module_dispatch(args)
        if args.device.startswith("vulkan"):
            return _run_emulated(args, live, snapshot)
        measured = _measure(args, module, live, snapshot)
    except (LensError, OSError, ValueError) as e:
        print(f"iree-lens benchmark: {e}", file=sys.stderr)
        return 1
    finally:
        if temp is not None:
            temp.cleanup()
    if args.json:
        print(json.dumps(_report_json(args, measured)))
    else:
        _print_report(args, measured)
    return 0


def _refusal(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot be benchmarked, said before anything runs; None when they can."""
    for name, value in (("--repetitions", args.repetitions), ("--batch-size", args.batch_size), ("--samples", args.samples)):
        if value < 1:  # 0 repetitions printed '0 rounds' beside the one it ran
            return f"{name} must be at least 1"
    if not args.min_time > 0:
        return "--min-time must be above 0 seconds"
    return None


def _catch_module_dispatch(args: argparse.Namespace):
    """Settle the function and device (filling ``args``), check B can run there, and catch A's dispatch."""
    from engine.cli.program_arguments import module_device, only_function

    if args.module is not None and args.function is None:
        args.function = only_function(args.module)
    if args.module is None or args.function is None:
        raise LensError("benchmark needs a module and --function (or a --bundle that names them)")
    args.device = module_device(args.module, args.device)  # a Vulkan build on vulkan, unless --device says
    if args.against:
        try:
            module_device(args.against, args.device)
        except LensError:
            raise LensError(f"--against {args.against} does not run on {args.device}, where A runs: both "
                            "builds are timed on one device") from None  # fmt: skip
    return _catch(args.module, args.device, args.function, args.input, args.dispatch, args.substitute, args.parameters)


def _measure(args: argparse.Namespace, module, live, snapshot) -> _Measured:
    original, edited_run = kernel_runs(module, live, snapshot)
    timed = [_time(original, args)]
    if edited_run is not None:
        timed.append(_time(edited_run, args))
    against = None
    if args.against:
        try:
            module_b, live_b, snapshot_b = _catch(args.against, args.device, args.function, args.input, args.dispatch,
                                                  parameters=args.parameters)  # fmt: skip
        except LensError as e:  # said of B, which the message of its run does not name
            raise LensError(f"--against {args.against}: {e}") from None
        run_b, _ = kernel_runs(module_b, live_b, snapshot_b)
        against = (snapshot_b.record, _time(run_b, args))
    roofline = None
    if not args.no_roofline:
        from engine.dispatch.roofline import Roofline, bytes_moved, dispatch_flops, machine_limits

        lens_s = timed[0][0].median_s
        moved, counted = bytes_moved(args.module, original.export_name, original.constants, original.bindings)
        roofline = Roofline(moved, dispatch_flops(args.module, original.export_name, args.source), lens_s,
                            machine_limits(), counted)  # fmt: skip
    return _Measured(snapshot.record, timed, against, roofline)


def _report_json(args: argparse.Namespace, measured: _Measured) -> dict:
    record, timed, against, roofline = measured.record, measured.timed, measured.against, measured.roofline
    out = {
        "dispatch": record.export_name,
        "workgroup_count": list(record.workgroup_count),
        "device": args.device,
        "original": _timing_dict(timed[0][0]),
        "edited": _timing_dict(timed[1][0]) if len(timed) > 1 else None,
        "roofline": roofline.as_dict() if roofline is not None else None,
    }
    if timed[0][1] is not None:
        out["iree_original"] = _timing_dict(timed[0][1])
        out["iree_edited"] = _timing_dict(timed[1][1]) if len(timed) > 1 else None
        out["agreement"] = timed[0][0].median_s / timed[0][1].median_s
        out["paired_agreement"] = float(
            np.median([a / b for a, b in zip(timed[0][0].samples_s, timed[0][1].samples_s)])
        )
    if against is not None:
        out["against"] = {"module": args.against, "dispatch": against[0].export_name,
                          "workgroup_count": list(against[0].workgroup_count),
                          "timing": _timing_dict(against[1][0]),
                          "ratio": against[1][0].median_s / timed[0][0].median_s}  # fmt: skip
    return out


def _print_report(args: argparse.Namespace, measured: _Measured) -> None:
    record, timed, against = measured.record, measured.timed, measured.against
    print(
        f"dispatch {record.export_name} on {args.device}, workgroups {'x'.join(map(str, record.workgroup_count))}"
    )
    who = "IREE Lens alone (--no-iree)" if timed[0][1] is None else "IREE Lens and iree-benchmark-executable alternating"
    print(f"  {args.repetitions} rounds, {who}; batches of {args.batch_size}, {args.min_time:g} s per repetition")
    for label, (ours, iree) in zip(("module's kernel", "edited kernel  "), timed):
        print(_kernel_line(f"  IREE Lens, {label}", ours))
        if iree is not None:
            print(_kernel_line(f"  iree-benchmark-executable, {label}", iree))
            pairs = np.median([a / b for a, b in zip(ours.samples_s, iree.samples_s)])
            print(
                f"    IREE Lens / IREE: {ours.median_s / iree.median_s:.3f} of the medians, {pairs:.3f} round by round"
            )
    if len(timed) > 1:
        change = timed[1][0].median_s / timed[0][0].median_s
        print(f"  edited / module's kernel (IREE Lens): {change:.3f}")
    for ours, iree in timed:
        for name, t in (("IREE Lens", ours), ("iree-benchmark-executable", iree)):
            if t is not None and t.too_noisy:
                print(f"  warning: {name}'s samples spread +-{t.relative_spread * 100:.1f} %: "
                      "the machine is too noisy to tell a 5 % change")  # fmt: skip
    if against is not None:
        record_b, (ours_b, iree_b) = against
        print(
            f"  B = {args.against}: {record_b.export_name}, workgroups {'x'.join(map(str, record_b.workgroup_count))}"
        )
        print(_kernel_line("  IREE Lens, B's kernel", ours_b))
        if iree_b is not None:
            print(_kernel_line("  iree-benchmark-executable, B's kernel", iree_b))
        print(f"  B / A (IREE Lens): {ours_b.median_s / timed[0][0].median_s:.3f}")
    if measured.roofline is not None:
        print(f"  roofline: {measured.roofline.describe()}")


def _from_bundle(args):
    """Fill the module, function and inputs from ``--bundle`` (its program inputs written as .npy files to a
    temporary folder, returned to be cleaned up); None without a bundle."""
    if not args.bundle:
        return None
    import tempfile

    from engine.dispatch.bundle import Bundle

    bundle = Bundle(args.bundle)
    args.module = args.module or bundle.module
    args.function = args.function or bundle.function
    if args.input:
        return None
    temp = tempfile.TemporaryDirectory(prefix="lens-bench-bundle-")
    for i, array in enumerate(bundle.program_tensors("inputs")):
        path = f"{temp.name}/input{i}.npy"
        np.save(path, np.asarray(array))
        args.input.append(f"@{path}")
    return temp


def _catch(
    module_path: str, device_name: str, function: str, inputs: list[str], selector: str, substitutes=(),
    parameters=(),
):
    """Run ``function`` on the debug engine until the first dispatch ``selector`` names: (module, live
    substitutions, its snapshot)."""
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner, create_device
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.module import HalModule
    from engine.runtime.vmfb.module import open_vmfb
    from engine.substitute.live import LiveSubstitutions

    module = open_vmfb(module_path)
    device = create_device(device_name)
    from engine.runtime.parameters import ParameterArchives

    runner = DebugRunner(module_path, device_name, hal_module=HalModule(device),
                         parameters=ParameterArchives.open_given(parameters),
                         run_init=function != INITIALIZER)  # fmt: skip
    live = LiveSubstitutions(device, module)
    for text in substitutes:
        name, sep, path = text.partition("=")
        if not sep:
            raise LensError(f"--substitute takes NAME=FILE, got {text!r}")
        live.apply(name, path)
    catch = _FirstMatch(device, selector)
    device.observers.append(catch)
    arg_kinds, _ = split_cconv(runner.cconv(function))
    runner.invoke(function, parse_inputs(list(inputs), arg_kinds))
    device.observers.remove(catch)
    if catch.found is None:
        shown = [f"#{k} {name}" for name, k in list(catch.names.items())[:_LISTED]]
        more = f"\n  ... and {len(catch.names) - _LISTED} more" if len(catch.names) > _LISTED else ""
        raise LensError(
            f"no dispatch {selector!r} in a run of @{function} in {module_path} ({catch.count} dispatches); "
            "name one by #K, its export name or a prefix of it, or a glob (*conv*):\n  " + "\n  ".join(shown) + more
        )
    return module, live, catch.found


def kernel_runs(module, live, snapshot):
    """The dispatch alone with the module's binary, and with the edit's (None without one)."""
    from engine.dispatch.kernel_timing import KernelRun
    from engine.substitute.live import rodata_label

    record = snapshot.record
    executable = next(
        (e for e in module.executables if f"rodata {e.rodata_ordinal}" == record.executable), None
    )
    if executable is None:
        raise LensError(f"dispatch {record.sequence}: its executable is not one of the module's")
    bytes_before = tuple(np.ascontiguousarray(b).view(np.uint8).reshape(-1) for b in snapshot.before)
    constants = tuple(int(c) & 0xFFFFFFFF for c in record.constants)
    original = KernelRun(bytes(executable.data), executable.format, record.export_name,
                         tuple(record.workgroup_count), constants, bytes_before)  # fmt: skip
    replacement = next(
        (
            r
            for r in live.active.values()
            if rodata_label(r) == record.executable and record.export_name in r.exports
        ),
        None,
    )
    if replacement is None:
        return original, None
    count = replacement.workgroup_count(record.export_name) or record.workgroup_count
    return original, KernelRun(bytes(replacement.data), executable.format, record.export_name, tuple(count),
                               constants, bytes_before)  # fmt: skip


def _time(run, args):
    from engine.dispatch.kernel_timing import compare_with_iree, time_kernel

    if args.no_iree:
        return time_kernel(run, args.repetitions, args.min_time, args.batch_size), None
    try:
        agreement = compare_with_iree(run, args.repetitions, args.min_time, args.batch_size)
    except LensError as e:
        print(f"iree-lens benchmark: iree-benchmark-executable: {e}", file=sys.stderr)
        return time_kernel(run, args.repetitions, args.min_time, args.batch_size), None
    return agreement.lens, agreement.iree


def _timing_dict(t) -> dict:
    low, high = np.percentile(t.samples_s, [10, 90])
    return {"median_s": t.median_s, "p10_s": float(low), "p90_s": float(high), "samples": len(t.samples_s),
            "relative_spread": t.relative_spread, "too_noisy": t.too_noisy, "clock": "cpu",
            "wall_median_s": t.wall_median_s}  # fmt: skip


def _kernel_line(label: str, t) -> str:
    return (f"{label}: {t.median_s * 1e6:.2f} us CPU per dispatch (+-{t.relative_spread * 100:.1f} %; "
            f"{len(t.samples_s)} repetitions), {t.wall_median_s * 1e6:.2f} us wall")  # fmt: skip


def _run_emulated(args, live, snapshot) -> int:
    """A Vulkan dispatch: timed through the emulated device, beside IREE's tool."""
    try:
        timing = live.time_dispatch(snapshot, args.samples)
        iree = None
        if not args.no_iree:
            try:
                iree = live.iree_timings(snapshot, args.repetitions)
            except LensError as e:
                print(f"iree-lens benchmark: iree-benchmark-executable: {e}", file=sys.stderr)
    except (LensError, OSError, ValueError) as e:
        print(f"iree-lens benchmark: {e}", file=sys.stderr)
        return 1
    record = snapshot.record
    edited = bool(live.active)
    if args.json:
        out = {
            "dispatch": record.export_name,
            "workgroup_count": list(record.workgroup_count),
            "device": args.device,
            "original": _timing(timing.original),
            "edited": _timing(timing.edited) if edited else None,
        }
        if iree is not None:
            out["iree_original"] = _timing(iree[0])
            out["iree_edited"] = _timing(iree[1]) if iree[1] is not None else None
            out["agreement"] = timing.original.median_s / iree[0].median_s
        print(json.dumps(out))
        return 0
    print(
        f"dispatch {record.export_name} on {args.device}, workgroups {'x'.join(map(str, record.workgroup_count))}"
    )
    print(_line("  IREE Lens, module's kernel", timing.original))
    if edited:
        print(_line("  IREE Lens, edited kernel  ", timing.edited))
    if iree is not None:
        print(_line("  iree-benchmark-executable, module's kernel", iree[0]))
        if iree[1] is not None:
            print(_line("  iree-benchmark-executable, edited kernel  ", iree[1]))
        print(f"    IREE Lens / IREE: {timing.original.median_s / iree[0].median_s:.3f} of the medians "
              "(the module's kernel)")  # fmt: skip
    return 0
