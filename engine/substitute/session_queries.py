"""Substitution as named queries of a debug session (``Evaluate(query, args)`` → ``Answer(value)``).

A session handler that owns a ``DebugRunner`` keeps one ``LiveSubstitutions`` (``for_runner``) and passes
these queries to ``answer``; values are plain data (uint8 arrays for binding bytes, which the session
turns into shared tensors), and a failed edit answers ``{"error": plain_error(...)}`` so its diagnostics
(file, line, message) reach the editor across the process boundary:

* ``substitute`` (name, path): build, check and swap; ``{"exports", "whole", "seconds"}``;
* ``rerun_dispatch`` (): the paused (or last observed) dispatch again from its inputs; ``{"sequence",
  "before", "after"}`` (each binding's bytes, before = the original run's outputs when known);
* ``revert_substitution`` (name): the module's code back;
* ``export_substitutions`` (folder): the edited files and flags; the path of ``substitutions.txt``;
* ``benchmark_dispatch`` (repeats=20): ``{"original_s", "edited_s"}``.
"""

from __future__ import annotations

from typing import Any

from engine.errors import LensError
from engine.runtime.hal.device import DispatchRecord
from engine.substitute.errors import plain_error
from engine.substitute.live import LiveSubstitutions

QUERIES = ("substitute", "rerun_dispatch", "revert_substitution", "export_substitutions", "benchmark_dispatch")


def answer(live: LiveSubstitutions, query: str, args: tuple[Any, ...], paused: DispatchRecord | None = None) -> Any:
    """The value of one substitution query; ``paused`` is the dispatch the run is stopped at, if any."""
    try:
        if query == "substitute":
            name, path = args
            live.observe()
            r = live.apply(str(name), str(path))
            return {"exports": list(r.exports), "whole": r.whole, "seconds": live.history[-1].seconds}
        if query == "rerun_dispatch":
            snapshot = live.snapshots.pending() or (live.snapshot_now(paused) if paused is not None else None)
            snapshot = snapshot or live.snapshots.last()
            after = live.rerun(snapshot)
            before = list(snapshot.after) if snapshot is not None and snapshot.after is not None else None
            return {"sequence": snapshot.record.sequence if snapshot else None, "before": before, "after": list(after)}
        if query == "revert_substitution":
            (name,) = args
            live.revert(str(name))
            return {"reverted": str(name)}
        if query == "export_substitutions":
            (folder,) = args
            return {"path": str(live.export(folder))}
        if query == "benchmark_dispatch":
            repeats = int(args[0]) if args else 20
            original, edited = live.benchmark(repeats=repeats)
            return {"original_s": original, "edited_s": edited}
    except LensError as e:
        return {"error": plain_error(e)}
    raise KeyError(f"unknown substitution query {query!r}; known: {', '.join(QUERIES)}")
