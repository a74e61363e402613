"""Timeline semaphores and fences, synchronous like local-sync's.

A semaphore is a 64-bit timeline value, or a failure status. A fence is a set of (semaphore, value)
timepoints. Queue work whose wait fence is already reached runs at once on the calling thread, as local-sync
does; work waiting on a timepoint that only the host will signal later (``fence.signal``) is parked in the
device's queue and runs the moment that signal arrives. A failed wait fails the work's signal fence instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.runtime.vm.native import StatusCode, VmStatusError


class HalSemaphore:
    """A timeline semaphore (``!hal.semaphore``); ``listeners`` are called after every change."""

    vm_type_name = "hal.semaphore"

    def __init__(self, initial_value: int = 0):
        self.value = initial_value
        self.failure: VmStatusError | None = None
        self.listeners: list[Callable[[], None]] = []

    def signal(self, value: int) -> None:
        if self.failure is not None:
            raise VmStatusError(StatusCode.DATA_LOSS, f"semaphore already failed: {self.failure.message}")
        if value > self.value:
            self.value = value
            self._notify()

    def fail(self, status: VmStatusError) -> None:
        if self.failure is None:
            self.failure = status
            self._notify()

    def _notify(self) -> None:
        for listener in list(self.listeners):
            listener()

    # -- checkpoints (``engine.runtime.vm.values.Checkpointable``)

    def checkpoint(self, keep: Any) -> tuple:
        return self.value, self.failure, tuple(self.listeners)

    def restore_checkpoint(self, state: tuple) -> None:
        self.value, self.failure, listeners = state
        self.listeners[:] = listeners

    def checkpoint_refs(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        state = f"failed {self.failure.code.name}" if self.failure else f"value {self.value}"
        return f"HalSemaphore({state})"


class HalFence:
    """A ``!hal.fence``: timepoints that are reached when every semaphore reaches its value."""

    vm_type_name = "hal.fence"

    def __init__(self, timepoints: list[tuple[HalSemaphore, int]] | None = None):
        self.timepoints: list[tuple[HalSemaphore, int]] = []
        for semaphore, value in timepoints or []:
            self.insert(semaphore, value)

    @classmethod
    def new(cls) -> HalFence:
        """``fence.create``: one new semaphore at 0, waiting for 1."""
        return cls([(HalSemaphore(0), 1)])

    def insert(self, semaphore: HalSemaphore, value: int) -> None:
        for i, (existing, existing_value) in enumerate(self.timepoints):
            if existing is semaphore:
                self.timepoints[i] = (existing, max(existing_value, value))
                return
        self.timepoints.append((semaphore, value))

    def checkpoint(self, keep: Any) -> tuple:
        return tuple(self.timepoints)

    def restore_checkpoint(self, state: tuple) -> None:
        self.timepoints[:] = state

    def checkpoint_refs(self) -> list[HalSemaphore]:
        return [s for s, _ in self.timepoints]

    @property
    def failure(self) -> VmStatusError | None:
        for semaphore, _ in self.timepoints:
            if semaphore.failure is not None:
                return semaphore.failure
        return None

    @property
    def reached(self) -> bool:
        return self.failure is None and all(s.value >= v for s, v in self.timepoints)

    def query(self) -> int:
        """``fence.query``: 0 when reached, DEFERRED while pending, the failure's code when failed."""
        failure = self.failure
        if failure is not None:
            return int(failure.code)
        return 0 if self.reached else int(StatusCode.DEFERRED)

    def signal(self) -> None:
        for semaphore, value in self.timepoints:
            semaphore.signal(value)

    def fail(self, status: VmStatusError) -> None:
        for semaphore, _ in self.timepoints:
            semaphore.fail(status)

    def __repr__(self) -> str:
        return f"HalFence({len(self.timepoints)} timepoints, {'reached' if self.reached else 'pending'})"


def fence_reached(fence: HalFence | None) -> bool:
    """Null fences are always reached (IREE's convention for 'no wait')."""
    return fence is None or fence.reached


def fence_failure(fence: HalFence | None) -> VmStatusError | None:
    return None if fence is None else fence.failure
