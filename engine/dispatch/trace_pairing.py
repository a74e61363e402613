"""IREE's dispatch trace points (``--iree-flow-trace-dispatch-tensors``) paired into numbered dispatches: what
the reference engine's debugger and its capture share. IREE's stream scheduling orders trace points on the
host, so a dispatch's ``inputs`` can come after its ``outputs``."""

from __future__ import annotations

from collections import deque

import numpy as np


def heads_without_inputs(module_path: str) -> frozenset[str]:
    """The dispatches (``executable::export``, as trace keys spell them) that have an ``outputs`` trace point and
    no ``inputs`` one: a dispatch with no tensor operand (an empty trace is not valid IR). Read from the trace
    keys among the module's rodata."""
    from engine.runtime.vmfb.module import open_vmfb

    kinds: dict[str, set[str]] = {}
    for segment in open_vmfb(module_path).rodata_segments:
        if segment.length > 4096:
            continue
        try:
            text = bytes(segment.data).decode("ascii")
        except UnicodeDecodeError:
            continue
        head, _, kind = text.rpartition(" ")
        if kind in ("inputs", "outputs") and "::" in head:
            kinds.setdefault(head, set()).add(kind)
    return frozenset(h for h, k in kinds.items() if k == {"outputs"})


class TracePairing:
    """IREE's trace points paired into dispatches, each numbered once. IREE's stream scheduling orders the trace
    points on the host, not around each dispatch: a dispatch's ``inputs`` can come after its ``outputs``
    (EfficientViT: the outputs of two dispatches, two other dispatches whole, then those two's inputs), so each
    dispatch (``executable::export``) pairs its own trace points, first come first paired, and takes its ordinal
    when its first trace point comes (as ``iree-lens split`` pairs them). A dispatch with no ``inputs`` trace
    point (``heads_without_inputs``) begins at its outputs.

    Pairing an ``inputs`` trace point that comes after its outputs is sound while one run of the export waits
    for its inputs; when two or more do (their outputs came, then their inputs), which inputs are whose rests
    on IREE keeping the runs' order, and those dispatches are in ``ambiguous``."""

    def __init__(self, without_inputs: frozenset[str] = frozenset()):
        self.without_inputs = without_inputs
        self.count = 0
        self._awaiting: dict[str, deque] = {}  # head -> (ordinal, inputs) whose outputs have not come
        self._early: dict[str, deque] = {}  # head -> ordinals whose outputs came before their inputs
        self.ambiguous: set[int] = set()  # ordinals waiting for their inputs with another run of their export

    def take(self, head: str, kind: str, arrays: list[np.ndarray]) -> tuple[int, list[np.ndarray] | None]:
        """The ordinal of the dispatch a trace point belongs to; for an ``outputs`` one, the tensors of the same
        dispatch's ``inputs`` trace point (None when they have not come, or never do)."""
        if kind == "inputs":
            early = self._early.get(head)
            if early:
                return early.popleft(), None
            ordinal = self._next()
            self._awaiting.setdefault(head, deque()).append((ordinal, arrays))
            return ordinal, None
        awaiting = self._awaiting.get(head)
        if head not in self.without_inputs and awaiting:
            return awaiting.popleft()
        ordinal = self._next()
        if head not in self.without_inputs:
            early = self._early.setdefault(head, deque())
            early.append(ordinal)
            if len(early) > 1:
                self.ambiguous.update(early)
        return ordinal, None

    def _next(self) -> int:
        self.count += 1
        return self.count - 1
