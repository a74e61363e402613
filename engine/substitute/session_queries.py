"""Substitution as typed queries of a debug session (``engine.session.protocol``).

A session handler that owns a ``DebugRunner`` keeps one ``LiveSubstitutions`` (``for_runner``) and passes
these queries to ``answer``, which returns the query's typed answer (binding bytes as uint8 ``TensorRef``s,
which cross processes through shared memory); a failed edit answers ``SubstitutionRefused`` with its
diagnostics (file, line, message), so they reach the editor across the process boundary:

* ``Substitute(executable, path)``: build, check and swap; ``Substituted(exports, whole, seconds)``;
* ``RerunDispatch()``: the paused (or last observed) dispatch again from its inputs;
  ``DispatchRerun(sequence, before, after)`` (each binding's bytes: before with the module's own code,
  after with the current edits);
* ``RevertSubstitution(executable)``: the module's code back, for this and every later run;
* ``ExportSubstitutions(folder)``: the edited files and flags; the path of ``substitutions.txt``;
* ``BenchmarkDispatch(repeats)``: ``DispatchBenchmark(original_s, edited_s, spreads)``: seconds per dispatch
  (median of ``repeats`` samples, 10th-90th percentile spread), the module's code against the edits.
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
            # Before: the same inputs through the module's own code; after: through the current edits.
            snapshot = live.snapshot_for(paused)
            after = live.rerun(snapshot)
            before = live.rerun_original(snapshot) if live.active else after
            return DispatchRerun(query, snapshot.record.sequence, _bytes(before), _bytes(after))
        if isinstance(query, RevertSubstitution):
            # The session's state: later runs use the module's code until the next Substitute. Reverting
            # what is not substituted changes nothing and is no error (the editor reverts its text too).
            if live.substituted(query.executable):
                live.revert(query.executable)
            return SubstitutionReverted(query, query.executable)
        if isinstance(query, ExportSubstitutions):
            return SubstitutionsExported(query, str(live.export(query.folder)))
        if isinstance(query, BenchmarkDispatch):
            snapshot = live.snapshot_for(paused)
            timing = live.time_dispatch(snapshot, samples=int(query.repeats))
            try:
                iree_original, iree_edited = live.iree_timings(snapshot, repetitions=1)
            except LensError:
                iree_original = iree_edited = None  # no tool, or it could not run this binary
            return DispatchBenchmark(
                query,
                timing.original.median_s,
                timing.edited.median_s,
                timing.original.spread_s,
                timing.edited.spread_s,
                edited=bool(live.active),
                iree_original_s=iree_original.median_s if iree_original is not None else None,
                iree_edited_s=iree_edited.median_s if iree_edited is not None else None,
            )
    except LensError as e:
        return refused(query, e)
    raise TypeError(f"not a substitution query: {type(query).__name__}")
