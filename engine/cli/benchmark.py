"""``iree-lens benchmark``: time one dispatch of a run, the module's kernel against an edit of it.

    iree-lens benchmark MODULE.vmfb --dispatch=NAME --function=F [--input=...] [--substitute=NAME=FILE ...]
                        [--device=local-sync|vulkan] [--samples=20] [--repetitions=5] [--json]

The function runs on the debug engine until the first dispatch NAME selects (an export, the dispatch
executable it came from such as ``main$async_dispatch_3``, or ``#K``, the K-th dispatch of the call); its
bindings are kept. That dispatch is then timed on one set of buffers filled from its inputs, in batches, with
the module's code and with the ``--substitute`` edits: the median seconds per dispatch and the spread (10th
to 90th percentile of the samples). ``iree-benchmark-executable`` runs the same binaries on the same inputs
and workgroup count (``--repetitions`` times each: its own run-to-run noise), for comparison.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from engine.errors import LensError
from engine.runtime.hal.device import DispatchObserver, DispatchRecord


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "benchmark",
        help="time one dispatch of a run: the module's kernel against an edit (and iree-benchmark-executable)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("module", help="the .vmfb")
    p.add_argument("--dispatch", required=True, help="an export name, a dispatch executable's name, or #K")
    p.add_argument("--function", required=True, help="the function whose run reaches the dispatch")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    p.add_argument("--substitute", action="append", default=[], metavar="NAME=FILE", help="an edit; repeatable")
    p.add_argument("--device", default="local-sync", help="local-sync (default) or vulkan")
    p.add_argument("--samples", type=int, default=20, help="timed batches per kernel (default 20)")
    p.add_argument("--repetitions", type=int, default=5, help="iree-benchmark-executable runs per kernel")
    p.add_argument("--no-iree", action="store_true", help="skip iree-benchmark-executable")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


class _FirstMatch(DispatchObserver):
    """Keeps the bindings of the first dispatch ``selector`` names (before it runs), as a snapshot."""

    def __init__(self, device, selector: str):
        self.device = device
        self.selector = selector
        self.count = 0
        self.found = None

    def _matches(self, record: DispatchRecord) -> bool:
        if self.selector.startswith("#"):
            return self.count == int(self.selector[1:])
        name = record.export_name or ""
        return name == self.selector or name.startswith(self.selector + "_")

    def before_dispatch(self, record: DispatchRecord) -> None:
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


def run(args: argparse.Namespace) -> int:
    from engine.runtime.debug_runner import DebugRunner, create_device
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.module import HalModule
    from engine.runtime.vmfb.module import open_vmfb
    from engine.substitute.live import LiveSubstitutions

    try:
        module = open_vmfb(args.module)
        device = create_device(args.device)
        runner = DebugRunner(args.module, args.device, hal_module=HalModule(device))
        live = LiveSubstitutions(device, module)
        for text in args.substitute:
            name, sep, path = text.partition("=")
            if not sep:
                raise LensError(f"--substitute takes NAME=FILE, got {text!r}")
            live.apply(name, path)
        catch = _FirstMatch(device, args.dispatch)
        device.observers.append(catch)
        arg_kinds, _ = split_cconv(runner.cconv(args.function))
        runner.invoke(args.function, parse_inputs(args.input, arg_kinds))
        device.observers.remove(catch)
        if catch.found is None:
            raise LensError(f"no dispatch {args.dispatch!r} in a run of @{args.function} ({catch.count} dispatches)")
        snapshot = catch.found
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
        print(json.dumps(out))
        return 0
    print(f"dispatch {record.export_name} on {args.device}, workgroups {'x'.join(map(str, record.workgroup_count))}")
    print(_line("  IREE Lens, module's kernel", timing.original))
    if edited:
        print(_line("  IREE Lens, edited kernel  ", timing.edited))
    if iree is not None:
        print(_line("  iree-benchmark-executable, module's kernel", iree[0]))
        if iree[1] is not None:
            print(_line("  iree-benchmark-executable, edited kernel  ", iree[1]))
    return 0
