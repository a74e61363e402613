"""Substitution as typed queries of a debug session (``engine.session.protocol``).

A session handler that owns a ``DebugRunner`` keeps one ``LiveSubstitutions`` (``for_runner``) and passes
these queries to ``answer``, which returns the query's typed answer (binding bytes as uint8 ``TensorRef``s,
which cross processes through shared memory); a failed edit answers ``SubstitutionRefused`` with its
diagnostics (file, line, message), so they reach the editor across the process boundary:

* ``Substitute(executable, path)``: build, check and swap; ``Substituted(exports, whole, seconds)``;
* ``RerunDispatch()``: the paused (or last observed) dispatch again from its inputs;
  ``DispatchRerun(sequence, before, after)`` (each binding's bytes, before = the original run's outputs
  when known);
* ``RevertSubstitution(executable)``: the module's code back;
* ``ExportSubstitutions(folder)``: the edited files and flags; the path of ``substitutions.txt``;
* ``BenchmarkDispatch(repeats)``: ``DispatchBenchmark(original_s, edited_s)``.
"""

from __future__ import annotations

import numpy as np

from engine.errors import LensError
from engine.runtime.hal.device import DispatchRecord
from engine.session.protocol import (
    Answer,
    BenchmarkDispatch,
    DispatchBenchmark,
    DispatchRerun,
    EditDiagnostic,
    ExportSubstitutions,
    Query,
    RerunDispatch,
    RevertSubstitution,
    Substitute,
    Substituted,
    SubstitutionRefused,
    SubstitutionReverted,
    SubstitutionsExported,
    TensorRef,
)
from engine.substitute.errors import plain_error
from engine.substitute.live import LiveSubstitutions


def _bytes(arrays) -> tuple[TensorRef, ...]:
    out = []
    for a in arrays:
        a = np.asarray(a)
        out.append(TensorRef(a.shape, a.dtype.str, "u8", array=a))
    return tuple(out)


def refused(query: Query, error: Exception) -> SubstitutionRefused:
    plain = plain_error(error)
    diagnostics = tuple(
        EditDiagnostic(d["path"] or "", d["line"] or 0, d["column"] or 0, d["severity"], d["message"])
        for d in plain["diagnostics"]
    )
    return SubstitutionRefused(query, plain["kind"], plain["message"], diagnostics)


def answer(live: LiveSubstitutions, query: Query, paused: DispatchRecord | None = None) -> Answer:
    """The answer to one substitution query; ``paused`` is the dispatch the run is stopped at, if any."""
    try:
        if isinstance(query, Substitute):
            live.observe()
            r = live.apply(query.executable, query.path)
            return Substituted(query, tuple(r.exports), r.whole, live.history[-1].seconds)
        if isinstance(query, RerunDispatch):
            snapshot = live.snapshots.pending() or (live.snapshot_now(paused) if paused is not None else None)
            snapshot = snapshot or live.snapshots.last()
            after = live.rerun(snapshot)
            before = _bytes(snapshot.after) if snapshot is not None and snapshot.after is not None else None
            return DispatchRerun(query, snapshot.record.sequence if snapshot else None, before, _bytes(after))
        if isinstance(query, RevertSubstitution):
            live.revert(query.executable)
            return SubstitutionReverted(query, query.executable)
        if isinstance(query, ExportSubstitutions):
            return SubstitutionsExported(query, str(live.export(query.folder)))
        if isinstance(query, BenchmarkDispatch):
            original, edited = live.benchmark(repeats=int(query.repeats))
            return DispatchBenchmark(query, original, edited)
    except LensError as e:
        return refused(query, e)
    raise TypeError(f"not a substitution query: {type(query).__name__}")
