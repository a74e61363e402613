"""Substitutions in a live debug run: swap an executable while the program is paused, rerun a dispatch, revert.

``LiveSubstitutions`` belongs to one emulated-HAL device (CPU or Vulkan) and the module it runs:

* ``apply(name, file)`` builds the edit (``build``), checks its interface, and swaps it into the executables
  the device already created from that module's segment; executables created later get it too (the device
  registry's hook). The next dispatch runs the edited code.
* ``DispatchSnapshots`` (a ``DispatchObserver``) keeps a copy of each dispatch's bindings before and after it
  ran; ``rerun(snapshot)`` runs that dispatch again on fresh buffers filled with the saved inputs, with the
  executable as it is now, and returns the bindings after (the dispatch's outputs, before vs after the edit).
* ``revert(name)`` puts the original back; ``history`` records every apply and revert; ``export(dir)``
  writes the edited files and the ``iree-compile`` flags that reproduce the change outside IREE Lens.
"""

from __future__ import annotations

import shlex
import shutil
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.dispatch.snapshot import DispatchSnapshot as SharedSnapshot
from engine.dispatch.snapshot import SnapshotSubscriber
from engine.runtime.hal.commands import ResolvedRange
from engine.runtime.hal.device import (
    BUFFER_ALIGNMENT,
    Device,
    DispatchObserver,
    DispatchRecord,
    HalExecutable,
)
from engine.runtime.hal.executable_swap import registry, revert
from engine.runtime.hal.formats import is_native_cpu
from engine.runtime.vmfb.module import VmfbModule
from engine.substitute.apply import build_all, refuse_workgroup_count_changes, rodata_label, swap_into
from engine.substitute.build import (
    Replacement,
    SubstitutionSpec,
    executable_interfaces,
    executable_name_in_source,
)
from engine.substitute.errors import SubstitutionError


@dataclass(frozen=True)
class SubstitutionEvent:
    """One entry of the history: ``action`` is ``apply`` or ``revert``."""

    action: str
    name: str
    path: Path | None
    exports: tuple[str, ...]
    executable: str
    seconds: float  # building and swapping (apply), 0 for revert
    at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class DispatchSnapshot:
    """A dispatch's parameters and each binding's bytes before and after it ran (copies)."""

    record: DispatchRecord
    executable: HalExecutable
    before: tuple[np.ndarray, ...]
    after: tuple[np.ndarray, ...] | None


class DispatchSnapshots(DispatchObserver, SnapshotSubscriber):
    """Keeps the last ``keep`` dispatches' bindings (before and after), for reruns and before/after views.

    ``LiveSubstitutions.observe`` subscribes it to the device's one snapshot observer
    (``engine.dispatch.snapshot``), so the bytes before a dispatch are copied once for it and the session's
    gate together; added to a device's observers as it is, it copies them itself."""

    def __init__(self, device: Device, keep: int = 4):
        self.device = device
        self.snapshots: deque[DispatchSnapshot] = deque(maxlen=keep)
        self._pending: dict[int, DispatchSnapshot] = {}

    def before_dispatch(self, record: DispatchRecord) -> None:
        executable = executable_of(self.device, record)
        before = tuple(np.array(b.data, copy=True) for b in record.bindings)
        self._pending[record.sequence] = DispatchSnapshot(record, executable, before, None)

    def after_dispatch(self, record: DispatchRecord) -> None:
        snap = self._pending.pop(record.sequence, None)
        if snap is None:
            return
        after = tuple(np.array(b.data, copy=True) for b in record.bindings)
        self.snapshots.append(DispatchSnapshot(snap.record, snap.executable, snap.before, after))

    def dispatch_failed(self, record: DispatchRecord, error: Exception) -> None:
        self._pending.pop(record.sequence, None)

    # -- as a subscriber of the device's snapshot observer (the copies are shared)

    def wants_before(self, record: DispatchRecord) -> bool:
        return True

    def before(self, snapshot: SharedSnapshot) -> None:
        record = snapshot.record
        self._pending[record.sequence] = DispatchSnapshot(record, executable_of(self.device, record), snapshot.before, None)

    def after(self, snapshot: SharedSnapshot) -> None:
        snap = self._pending.pop(snapshot.record.sequence, None)
        if snap is None:
            return
        after = tuple(snapshot.after_copy(k) for k in range(len(snapshot.record.bindings)))
        self.snapshots.append(DispatchSnapshot(snap.record, snap.executable, snap.before, after))

    def failed(self, snapshot: SharedSnapshot, error: Exception) -> None:
        self._pending.pop(snapshot.record.sequence, None)

    def pending(self) -> DispatchSnapshot | None:
        """The dispatch being run now (a run paused before it): its inputs, no outputs yet."""
        return max(self._pending.values(), key=lambda s: s.record.sequence, default=None)

    def last(self) -> DispatchSnapshot | None:
        return self.snapshots[-1] if self.snapshots else None


def executable_of(device: Device, record: DispatchRecord) -> HalExecutable:
    candidates = [
        e
        for e in registry(device).by_label(record.executable)
        if e.format == record.executable_format and record.export_name in e.export_names
    ]
    if not candidates:
        raise SubstitutionError(f"executable {record.executable} of dispatch {record.sequence} is not known")
    return candidates[-1]


def rerun_dispatch(device: Device, snapshot: DispatchSnapshot) -> tuple[np.ndarray, ...]:
    """Run ``snapshot``'s dispatch again from its saved inputs on fresh buffers; each binding's bytes after.

    Bindings of one buffer keep their relative placement (a dispatch may read and write the same buffer),
    and offsets keep their alignment, so the kernel sees the same layout.
    """
    ranges = _fresh_ranges(device, snapshot)
    record = snapshot.record
    executable = snapshot.executable
    ordinal = executable.lookup(record.export_name)
    device.run_dispatch(executable, ordinal, record.workgroup_count, record.constants, ranges)  # type: ignore[arg-type]
    return tuple(
        np.array(r.buffer.read_view(r.offset, r.length), copy=True)  # type: ignore[union-attr]
        for r in ranges
    )


def _fresh_ranges(device: Device, snapshot: DispatchSnapshot) -> list[ResolvedRange]:
    # New buffers holding the dispatch's saved inputs, laid out as the original bindings were.
    record = snapshot.record
    groups: dict[int, list[int]] = {}
    for i, b in enumerate(record.bindings):
        groups.setdefault(id(b.buffer), []).append(i)
    ranges: list[ResolvedRange | None] = [None] * len(record.bindings)
    for indices in groups.values():
        start = min(record.bindings[i].offset for i in indices)
        start -= start % BUFFER_ALIGNMENT
        end = max(record.bindings[i].offset + record.bindings[i].length for i in indices)
        buffer = device.allocate(max(end - start, 4), origin=f"rerun of dispatch {record.sequence}")
        for i in indices:
            b = record.bindings[i]
            offset = b.offset - start
            if b.length:
                buffer.write_view(offset, b.length)[:] = snapshot.before[i]
            ranges[i] = ResolvedRange(buffer, offset, b.length)
    return ranges  # type: ignore[return-value]


@dataclass(frozen=True)
class Timing:
    """Seconds per dispatch over several samples: the median and the spread (10th and 90th percentiles)."""

    samples_s: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return float(np.median(self.samples_s))

    @property
    def spread_s(self) -> tuple[float, float]:
        return float(np.percentile(self.samples_s, 10)), float(np.percentile(self.samples_s, 90))


@dataclass(frozen=True)
class DispatchTiming:
    record: DispatchRecord
    original: Timing
    edited: Timing


def time_dispatch(device: Device, snapshot: DispatchSnapshot, samples: int = 20, min_batch_s: float = 0.02) -> Timing:
    """Time ``snapshot``'s dispatch with the executable's current code: one set of buffers filled from its
    inputs, batches of dispatches long enough to time (``min_batch_s``), ``samples`` batches."""
    record = snapshot.record
    ranges = _fresh_ranges(device, snapshot)
    executable = snapshot.executable
    ordinal = executable.lookup(record.export_name)

    def once() -> None:
        device.run_dispatch(executable, ordinal, record.workgroup_count, record.constants, ranges)  # type: ignore[arg-type]

    once()  # warm: first-use costs (pipeline creation, page faults) are not the kernel's
    t0 = time.perf_counter()
    once()
    one = max(time.perf_counter() - t0, 1e-7)
    batch = max(1, min(1000, int(min_batch_s / one)))
    out = []
    for _ in range(max(1, samples)):
        t0 = time.perf_counter()
        for _ in range(batch):
            once()
        out.append((time.perf_counter() - t0) / batch)
    return Timing(tuple(out))


class LiveSubstitutions:
    """The substitutions of one debug run (one device, one module). Not thread-safe: use it while paused."""

    def __init__(self, device: Device, module: VmfbModule, work_dir: Path | str | None = None):
        self.device = device
        self.module = module
        self.interfaces = executable_interfaces(module)
        self.history: list[SubstitutionEvent] = []
        self.active: dict[str, Replacement] = {}  # by executable name
        self.snapshots = DispatchSnapshots(device)
        self._hook_installed = False
        self.work_dir = Path(work_dir) if work_dir is not None else None

    @classmethod
    def for_runner(cls, runner, work_dir: Path | str | None = None) -> LiveSubstitutions:
        """The substitutions of a ``DebugRunner`` (what a session handler creates at ``Open``)."""
        return cls(runner.device, runner.module, work_dir)

    def observe(self) -> DispatchSnapshots:
        """Start keeping dispatch snapshots (needed for ``rerun``); returns the observer."""
        from engine.dispatch.snapshot import DispatchSnapshots as SharedSnapshots

        SharedSnapshots.for_device(self.device).subscribe(self.snapshots)
        return self.snapshots

    def _install_hook(self) -> None:
        if self._hook_installed:
            return

        def hook(executable: HalExecutable) -> None:
            for r in self.active.values():
                if executable.label == rodata_label(r):
                    swap_into(executable, r)

        registry(self.device).hooks.append(hook)
        self._hook_installed = True

    def _loaded(self, replacement: Replacement) -> list[HalExecutable]:
        return registry(self.device).by_label(rodata_label(replacement))

    def apply(self, name: str, path: Path | str) -> Replacement:
        """Build ``path`` for ``name`` and swap it in; raises (changing nothing) if it does not build or fit."""
        t0 = time.perf_counter()
        spec = SubstitutionSpec.parse(f"{name}={path}")
        # The same build as ``iree-lens run --substitute`` (MLIR through IREE's executable pipeline, with the
        # edit's own workgroup count); the CPU device dispatches with that count, other devices refuse a change.
        (replacement,) = build_all(self.module, [spec], self.interfaces)
        if not is_native_cpu(replacement.target.executable.format):
            refuse_workgroup_count_changes(self.module, [replacement], f"the {self.device.name} device")
        for executable in self._loaded(replacement):
            swap_into(executable, replacement)
        executable_name = replacement.target.executable.name
        previous = self.active.get(executable_name)
        if previous is not None and not replacement.whole and not previous.whole:
            # Two partial edits of one linked library: both stay (the overlay routes each export).
            self.active[f"{executable_name}:{','.join(replacement.exports)}"] = replacement
        else:
            self.active[executable_name] = replacement
        self._install_hook()
        self.history.append(
            SubstitutionEvent("apply", name, Path(path), replacement.exports, executable_name, time.perf_counter() - t0)
        )
        return replacement

    def revert(self, name: str) -> None:
        """Restore the original code of the executable ``name`` selects (the module's own)."""
        keys = [k for k, r in self.active.items() if k.split(":")[0] == name or r.spec.name == name]
        if not keys:
            raise SubstitutionError(f"nothing substituted under {name!r}; active: {', '.join(self.active) or 'none'}")
        for key in keys:
            r = self.active.pop(key)
            for executable in self._loaded(r):
                revert(executable)
            self.history.append(SubstitutionEvent("revert", name, None, r.exports, r.target.executable.name, 0.0))
        # Other edits of the same executable (partial overlays) are applied again.
        for r in list(self.active.values()):
            for executable in self._loaded(r):
                swap_into(executable, r)

    def substituted(self, name: str) -> bool:
        """Whether an edit is active under ``name`` (an executable or the NAME it was applied with)."""
        return any(k.split(":")[0] == name or r.spec.name == name for k, r in self.active.items())

    def revert_all(self) -> None:
        for key in list(self.active):
            if key in self.active:
                self.revert(key.split(":")[0])

    def snapshot_now(self, record: DispatchRecord) -> DispatchSnapshot:
        """A snapshot of a dispatch from its bindings' current bytes (a run paused at it, not yet observed).

        Paused before the dispatch, they are its inputs; paused after it, its outputs are ``after`` and
        the inputs are right unless the dispatch wrote over one of them.
        """
        current = tuple(np.array(b.data, copy=True) for b in record.bindings)
        ran = record.sequence < self.device.dispatch_count and self.snapshots.pending() is None
        return DispatchSnapshot(record, executable_of(self.device, record), current, current if ran else None)

    def snapshot_for(self, paused: DispatchRecord | None = None) -> DispatchSnapshot:
        """The dispatch to rerun or time: the one being run (observed), the one the run is paused at, else
        the last observed; ``SubstitutionError`` when there is none."""
        snapshot = self.snapshots.pending()
        if snapshot is None and paused is not None:
            snapshot = self.snapshot_now(paused)
        snapshot = snapshot or self.snapshots.last()
        if snapshot is None:
            raise SubstitutionError("no dispatch to rerun or time: pause the run at a dispatch first")
        return snapshot

    def rerun(self, snapshot: DispatchSnapshot | None = None) -> tuple[np.ndarray, ...]:
        """Recompute a dispatch (default: the one paused at, else the last) with the current code."""
        return rerun_dispatch(self.device, snapshot or self.snapshot_for())

    @contextmanager
    def originals(self):
        """Within the block the device runs the module's own code; the edits are swapped back after it."""
        swapped = [e for r in self.active.values() for e in self._loaded(r)]
        for executable in swapped:
            revert(executable)
        try:
            yield
        finally:
            for r in self.active.values():
                for executable in self._loaded(r):
                    swap_into(executable, r)

    def rerun_original(self, snapshot: DispatchSnapshot | None = None) -> tuple[np.ndarray, ...]:
        """The dispatch recomputed from the same inputs with the module's own code (the "before" of an edit)."""
        snapshot = snapshot or self.snapshot_for()
        if not self.active:
            return rerun_dispatch(self.device, snapshot)
        with self.originals():
            return rerun_dispatch(self.device, snapshot)

    def benchmark(self, snapshot: DispatchSnapshot | None = None, repeats: int = 20) -> tuple[float, float]:
        """Median seconds of one dispatch with the module's original code and with the current edits."""
        timing = self.time_dispatch(snapshot, repeats)
        return timing.original.median_s, timing.edited.median_s

    def time_dispatch(self, snapshot: DispatchSnapshot | None = None, samples: int = 20) -> DispatchTiming:
        """Seconds per dispatch, original code against the current edits, each ``samples`` times (batches of
        runs on one set of buffers filled from the dispatch's inputs, as ``iree-benchmark-executable`` does)."""
        snapshot = snapshot or self.snapshot_for()
        edited = time_dispatch(self.device, snapshot, samples)
        with self.originals():
            original = time_dispatch(self.device, snapshot, samples)
        return DispatchTiming(snapshot.record, original, edited)

    def benchmark_with_iree(self, snapshot: DispatchSnapshot | None = None) -> tuple[float, float | None]:
        """Seconds per dispatch of the module's binary and of the edit (None without one), by
        ``iree-benchmark-executable`` (see ``iree_timings``)."""
        original, edited = self.iree_timings(snapshot, repetitions=1)
        return original.median_s, edited.median_s if edited is not None else None

    def iree_timings(self, snapshot: DispatchSnapshot | None = None, repetitions: int = 5) -> tuple[Timing, Timing | None]:
        """``iree-benchmark-executable`` on the dispatch's saved inputs and workgroup count (the edit's own
        count when its build resolved one), ``repetitions`` runs each: the module's binary, then the edit's
        (None without one); local-sync for CPU libraries, vulkan for SPIR-V."""
        from engine.substitute.benchmark import ExecutableBenchmark, benchmark_runs

        snapshot = snapshot or self.snapshot_for()
        record = snapshot.record
        module_executable = next(
            (e for e in self.module.executables if f"rodata {e.rodata_ordinal}" == record.executable), None
        )
        if module_executable is None or module_executable.ordinal not in self.interfaces:
            raise SubstitutionError(f"dispatch {record.sequence}: its executable is not one of the module's")
        interface = self.interfaces[module_executable.ordinal]
        fmt = module_executable.format
        device = "vulkan" if interface.kind == "vke1" else "local-sync"
        before = benchmark_runs(
            ExecutableBenchmark(
                bytes(module_executable.data), fmt, interface.export_names.index(record.export_name),
                snapshot.before, record.workgroup_count, record.constants, device=device,
            ),
            repetitions,
        )  # fmt: skip
        replacement = next(
            (r for r in self.active.values() if rodata_label(r) == record.executable and record.export_name in r.exports),
            None,
        )
        if replacement is None:
            return Timing(tuple(before)), None
        after = benchmark_runs(
            ExecutableBenchmark(
                replacement.data, fmt, replacement.interface.export_names.index(record.export_name),
                snapshot.before, replacement.workgroup_count(record.export_name) or record.workgroup_count,
                record.constants, device=device,
            ),
            repetitions,
        )  # fmt: skip
        return Timing(tuple(before)), Timing(tuple(after))

    # -- export

    def export(self, out_dir: Path | str) -> Path:
        """Write the edited files and ``substitutions.txt``: the flags and commands that reproduce them."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        compile_flags: list[str] = []
        run_flags: list[str] = []
        notes: list[str] = []
        for r in self.active.values():
            dest = out / r.spec.path.name
            if r.spec.path.resolve() != dest.resolve():
                shutil.copyfile(r.spec.path, dest)
            run_flags.append(f"--substitute={r.spec.name}={dest.name}")
            suffix = r.spec.path.suffix
            if suffix == ".mlir":
                executable = executable_name_in_source(dest.read_text()) or r.spec.name
                compile_flags.append(f"--iree-hal-substitute-executable-source={executable}={dest.name}")
            else:
                binary = out / f"{r.target.executable.name}.{'so' if r.interface.kind == 'elf' else 'vkbin'}"
                binary.write_bytes(r.data)
                if r.interface.kind == "elf":
                    notes.append(
                        f"# {dest.name}: built into {binary.name}. IREE 3.13's llvm-cpu target crashes on "
                        "--iree-hal-substitute-executable-object; compile with --compile-to=hal, replace the "
                        f"hal.executable.binary of {r.target.executable.name} with {binary.name}, then "
                        "--compile-from=hal."
                    )
                else:
                    compile_flags.append(f"--iree-hal-substitute-executable-object={r.target.executable.name}={binary.name}")
        lines = ["# Reproduce these substitutions outside IREE Lens (run from this folder)."]
        if compile_flags:
            lines += ["# iree-compile flags (add to the program's own compile command):", " ".join(compile_flags)]
        lines += notes
        module = Path(self.module.source or "module.vmfb").name
        lines += ["# or run the unchanged module with the edits:",
                  shlex.join(["iree-lens", "run", module, *run_flags]) + " --function=... --input=..."]  # fmt: skip
        text = "\n".join(lines) + "\n"
        (out / "substitutions.txt").write_text(text)
        return out / "substitutions.txt"
