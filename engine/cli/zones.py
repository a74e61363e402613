"""``iree-lens zones``: statistics per zone name of a trace, or the comparison of two.

FILE is a Chrome trace (e.g. from ``iree-lens profile``), an ``.ireeprof`` bundle, ireeperf-jsonl, a
compile's timing JSON or a ``.lenstrace``. ``--json`` prints ``{"zones": [{"name", "count", "total_ns",
"self_ns", "mean_ns", "min_ns", "max_ns", "p50_ns", "p90_ns", "p99_ns"}, ...]}`` (largest total first);
with ``--compare`` each row has ``count_a``/``count_b``, ``total_a_ns``/``total_b_ns``,
``mean_a_ns``/``mean_b_ns`` and the differences (B minus A), the names that got slower first.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.errors import LensError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("zones", help="statistics per zone name of a trace (or compare two traces)")
    p.add_argument(
        "file", help="Chrome trace JSON, .ireeprof, ireeperf-jsonl, compile timing JSON or .lenstrace"
    )
    p.add_argument(
        "--top", type=int, default=None, help="only the N names with the largest total (with --compare: the largest change, slower or faster)"
    )
    p.add_argument("--compare", metavar="FILE2", default=None, help="compare with a second trace (B = FILE2)")
    p.add_argument("--category", default=None, help="only zones of this category (e.g. dispatch)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def _fmt_ns(ns: float) -> str:
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3f} us"
    return f"{ns:.0f} ns"


def _stats(path: str, category: str | None):
    from engine.trace.open import load_trace
    from engine.trace.stats import zone_statistics

    trace = load_trace(path)
    selection = None
    if category:
        import numpy as np

        present = sorted({trace.categories[int(c)] for c in np.unique(trace.zones.category)})
        if category not in present:  # an empty table would read as "no time there"
            raise LensError(f"no zones of category {category!r} in {path}; its categories: {', '.join(present) or 'none'}")
        selection = trace.name_ids(category)
    return zone_statistics(trace, selection)


def run(args: argparse.Namespace) -> int:
    if args.top is not None and args.top < 1:
        print("iree-lens zones: --top must be at least 1", file=sys.stderr)
        return 2
    try:
        rows_a = _stats(args.file, args.category)
        if args.compare:
            from engine.trace.stats import compare

            diffs = compare(rows_a, _stats(args.compare, args.category))
            if args.top is not None:  # the largest changes either way (a saving is news too), slower first
                largest = set(sorted(diffs, key=lambda d: (-abs(d.total_diff_ns), d.name))[: args.top])
                diffs = [d for d in diffs if d in largest]
            if args.json:
                print(json.dumps({"zones": [d.as_dict() for d in diffs]}, indent=1))
            else:
                _print_compare(diffs)
            return 0
    except LensError as e:
        print(f"iree-lens zones: {e}", file=sys.stderr)
        return 1
    if args.top is not None:
        rows_a = rows_a[: args.top]
    if args.json:
        print(json.dumps({"zones": [r.as_dict() for r in rows_a]}, indent=1))
    else:
        _print_stats(rows_a)
    return 0


def _print_stats(rows) -> None:
    width = max([len(r.name) for r in rows] + [4])
    width = min(width, 80)
    print(
        f"{'name':<{width}}  {'count':>8}  {'total':>12}  {'self':>12}  {'mean':>12}  {'min':>12}  "
        f"{'p50':>12}  {'p90':>12}  {'p99':>12}  {'max':>12}"
    )
    for r in rows:
        cells = (r.total_ns, r.self_ns, r.mean_ns, r.min_ns, r.p50_ns, r.p90_ns, r.p99_ns, r.max_ns)
        print(f"{r.name[:width]:<{width}}  {r.count:>8}  " + "  ".join(f"{_fmt_ns(c):>12}" for c in cells))


def _print_compare(diffs) -> None:
    width = min(max([len(d.name) for d in diffs] + [4]), 80)
    print(
        f"{'name':<{width}}  {'count A':>8}  {'count B':>8}  {'total A':>12}  {'total B':>12}  "
        f"{'diff':>12}  {'mean A':>12}  {'mean B':>12}"
    )
    for d in diffs:
        print(
            f"{d.name[:width]:<{width}}  {d.count_a:>8}  {d.count_b:>8}  {_fmt_ns(d.total_a_ns):>12}  "
            f"{_fmt_ns(d.total_b_ns):>12}  {_fmt_ns(d.total_diff_ns):>12}  {_fmt_ns(d.mean_a_ns):>12}  "
            f"{_fmt_ns(d.mean_b_ns):>12}"
        )
