"""The device interface of the emulated HAL, its synchronous queue, and dispatch observation.

A ``Device`` (the ``!hal.device`` ref) owns an allocator, loads executables, and runs queue work: transfers
(fill, copy, update) on host memory by default, and dispatches through ``run_dispatch``, which each device
implements (``CpuDevice`` through ctypes or the VMVX interpreter; a Vulkan device on the GPU). Queue work
runs on the calling thread as soon as its wait fence is reached, as IREE's local-sync device does.

Every dispatch is reported to the device's ``observers`` (``DispatchObserver``) before and after it runs,
as a ``DispatchRecord``: executable, export, workgroup count, constants, and each binding, whose bytes are
read on demand (a zero-copy numpy view on the CPU). Observers run on the invoking thread and may block
(a debugger pauses a run there).
"""

from __future__ import annotations

import bisect
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.runtime.hal import commands as cmd
from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import Allocation, HalAllocator, HalBuffer, MirroredAllocation
from engine.runtime.hal.commands import BindingTableEntry, HalCommandBuffer, ResolvedRange, resolve_ref
from engine.runtime.hal.sync import HalFence, fence_failure, fence_reached
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import KeepsNothing

NOT_IN_BATCH = 2**63  # ``Device.progress_cell`` between batches
BUFFER_ALIGNMENT = 64  # IREE's local allocators hand out 64-byte aligned memory and kernels rely on it


def aligned_zeros(size: int) -> np.ndarray:
    """A zeroed 1-D uint8 array whose data starts on a ``BUFFER_ALIGNMENT`` boundary."""
    raw = np.zeros(size + BUFFER_ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % BUFFER_ALIGNMENT
    return raw[start : start + size]


class HalExecutable(KeepsNothing):
    """A ``!hal.executable``: a loaded executable with its exports; ``impl`` is the device's own object."""

    # KeepsNothing: a loaded executable never changes while a program runs (a substitution is not program state).
    vm_type_name = "hal.executable"

    def __init__(self, device: Device, format: str, label: str, export_names: Sequence[str], impl: Any):
        self.device = device
        self.format = format
        self.label = label  # where it came from, e.g. "rodata 4"
        self.export_names = tuple(export_names)
        self.impl = impl
        # IREE's profile names executables by creation order on their device, from 1 (``executable_id``).
        device.executables_created = getattr(device, "executables_created", 0) + 1
        self.creation_id = device.executables_created

    def lookup(self, name: str) -> int:
        """``executable.lookup.function``: the export's ordinal (the function id of CPU/VMVX/Vulkan)."""
        try:
            return self.export_names.index(name)
        except ValueError:
            raise VmStatusError(
                StatusCode.NOT_FOUND, f"executable does not export a function named '{name}'"
            ) from None

    def export_name(self, ordinal: int) -> str:
        if 0 <= ordinal < len(self.export_names):
            return self.export_names[ordinal]
        return f"#{ordinal}"

    def __repr__(self) -> str:
        return f"HalExecutable({self.format}, {self.label}, exports={list(self.export_names)})"


@dataclass(frozen=True)
class DispatchBinding:
    """One binding of a dispatch: ``length`` bytes at ``offset`` of ``buffer``; ``data`` reads them."""

    index: int
    buffer: HalBuffer
    offset: int
    length: int

    @property
    def data(self) -> np.ndarray:
        """The binding's bytes as a uint8 numpy array (a view of the memory itself on host devices)."""
        return self.buffer.read_view(self.offset, self.length)


class DispatchRecord:
    """What one dispatch ran with; ``sequence`` counts the device's dispatches from 0. Read-only.

    Built for every observed dispatch, on the run's hot path: only the sequence number and the
    executable are taken when it is made; names, workgroups, constants and the ``DispatchBinding`` of
    each binding are worked out when first read (a session that only watches reads few of them)."""

    __slots__ = (
        "sequence", "_device", "_executable", "export_ordinal", "_workgroups", "_constants", "_ranges",
        "_bindings", "_export_name",
    )  # fmt: skip

    def __init__(
        self,
        sequence: int,
        device: Device,
        executable: HalExecutable,
        export_ordinal: int,
        workgroup_count: Sequence[int],
        constants: Sequence[int],
        ranges: Sequence[ResolvedRange],
    ):
        self.sequence = sequence
        self._device = device
        self._executable = executable
        self.export_ordinal = export_ordinal
        self._workgroups = workgroup_count
        self._constants = constants
        self._ranges = ranges
        self._bindings: tuple[DispatchBinding, ...] | None = None
        self._export_name: str | None = None

    @property
    def device(self) -> str:
        return self._device.name

    @property
    def executable(self) -> str:
        """The executable's label (where it came from)."""
        return self._executable.label

    @property
    def executable_format(self) -> str:
        return self._executable.format

    @property
    def executable_id(self) -> int:
        """The executable's creation order on the device, from 1 (IREE's executable_id)."""
        return getattr(self._executable, "creation_id", 0)

    @property
    def export_name(self) -> str:
        name = self._export_name
        if name is None:
            name = self._export_name = self._executable.export_name(self.export_ordinal)
        return name

    @property
    def workgroup_count(self) -> tuple[int, int, int]:
        return tuple(self._workgroups)  # type: ignore[return-value]

    @property
    def constants(self) -> tuple[int, ...]:
        return tuple(self._constants)

    @property
    def bindings(self) -> tuple[DispatchBinding, ...]:
        found = self._bindings
        if found is None:
            found = self._bindings = tuple(
                DispatchBinding(i, b.buffer, b.offset, b.length)  # type: ignore[arg-type]
                for i, b in enumerate(self._ranges)
            )
        return found

    def __repr__(self) -> str:
        return (
            f"DispatchRecord(#{self.sequence} {self.export_name} of {self.executable}, "
            f"workgroups {self.workgroup_count}, {len(self._ranges)} bindings)"
        )


class DispatchObserver:
    """Receives every dispatch of a device; subclass and override what you need. Methods may block.

    The one observer API of the HAL: a ``Device`` tells it ``DispatchRecord``s (``Device.observers``); the raw
    Vulkan device (``VulkanDevice.submit(cb, observer=...)``) tells it ``vulkan.commands.DispatchEvent``s.
    """

    def before_dispatch(self, record: DispatchRecord) -> None:
        pass

    def after_dispatch(self, record: DispatchRecord) -> None:
        pass

    def dispatch_failed(self, record: DispatchRecord, error: Exception) -> None:
        pass

    def watches(self, sequence: int, executable: HalExecutable, ordinal: int) -> bool:
        """Whether this observer must see dispatch ``sequence`` (export ``ordinal`` of ``executable``) on its
        own, before and after its kernel. Asked by ``Device.execute`` when it plans a command buffer, once per
        dispatch command, so it must be cheap. False lets the device run the dispatch inside a native batch;
        the observer then learns of it only through ``dispatch_batch``. The default watches every dispatch."""
        return True

    # An observer that only needs timing and records (never reads a binding's bytes while the device is
    # idle) sets this False: the Vulkan device then runs a whole command buffer at once and tells it
    # ``dispatch_batch`` afterwards (the CPU device asks ``watches`` instead, per dispatch).
    reads_bindings = True

    # An observer that reads ``Device.batch_dispatch_ends`` in ``dispatch_batch`` (a profile) sets this True:
    # the CPU device then reads a clock after each dispatch of a batch (not done for nobody).
    wants_dispatch_times = False

    def batch_starting(self, dispatches: Sequence[cmd.DispatchCommand], first_sequence: int) -> None:
        """A batch is about to run these dispatch commands, with sequences from ``first_sequence``; while it
        runs, ``Device.batch_progress`` says which of them is running (a session in a child process reports
        them, so that a crash in native code still names its dispatch)."""

    def first_watched(
        self, dispatches: Sequence[cmd.DispatchCommand], start: int, end: int, first_sequence: int
    ) -> int:
        """The index in ``[start, end)`` of the first of ``dispatches`` this observer ``watches`` (``end``
        when none), ``dispatches[start]`` having sequence ``first_sequence``: how a device plans. The default
        asks ``watches`` of each; an observer that knows its answer for a whole stretch at once overrides it."""
        return _first_watched_by(self.watches, dispatches, start, end, first_sequence)

    def dispatch_batch(self, records: Sequence[DispatchRecord], start_ns: int, end_ns: int) -> None:
        """Dispatches that ran together in one batch between ``start_ns`` and ``end_ns``
        (``time.perf_counter_ns``), none of them watched by this observer, in order. The default tells
        ``before_dispatch``/``after_dispatch`` of each afterwards (the bytes are those after the batch)."""
        for record in records:
            self.before_dispatch(record)
            self.after_dispatch(record)


class BatchRecords(Sequence[DispatchRecord]):
    """The records of a batch's dispatches, in order, each made when first read: a native batch costs no
    Python per dispatch unless an observer reads its records."""

    def __init__(self, device: Device, table: list[BindingTableEntry]):
        self._device = device
        self._table = table
        self._items: list[DispatchRecord | None] = []  # None: not made yet (see ``_unmade``)
        # (index of the first, commands, sequence of the first) of each run of dispatches added unmade: a
        # native plan's thousand dispatches cost one entry, not a thousand.
        self._unmade: list[tuple[int, Sequence[cmd.DispatchCommand], int]] = []

    def append(self, record: DispatchRecord) -> None:
        self._items.append(record)

    def add_unmade(self, commands: Sequence[cmd.DispatchCommand], first_sequence: int) -> None:
        """Dispatches ``commands`` (static workgroup counts) with sequences from ``first_sequence``."""
        self._unmade.append((len(self._items), commands, first_sequence))
        self._items.extend([None] * len(commands))

    def truncate(self, length: int) -> None:
        del self._items[length:]
        while self._unmade and self._unmade[-1][0] >= length:
            self._unmade.pop()

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._items)))]
        item = self._items[index]
        if item is not None:
            return item
        if index < 0:
            index += len(self._items)
        at = bisect.bisect_right(self._unmade, index, key=lambda run: run[0]) - 1
        start, commands, first = self._unmade[at]
        command, sequence = commands[index - start], first + index - start
        workgroup_count, bindings = self._device.resolve_dispatch(command, self._table)
        record = self._device.dispatch_record(
            command.executable, command.ordinal, workgroup_count, command.constants, bindings, sequence
        )
        self._items[index] = record
        return record


def _first_watched_by(
    watches: Callable[[int, HalExecutable, int], bool],
    dispatches: Sequence[cmd.DispatchCommand],
    start: int,
    end: int,
    first_sequence: int,
) -> int:
    sequence = first_sequence
    for i in range(start, end):
        command = dispatches[i]
        if watches(sequence, command.executable, command.ordinal):
            return i
        sequence += 1
    return end


# (executable, record, run the kernel) -> None: see ``Device.kernel_hook``.
KernelHook = Callable[["HalExecutable", DispatchRecord, Callable[[], None]], None]


@dataclass(frozen=True)
class Transfer:
    """A transfer the device did (``Device.transfer_listeners``): a ``fill``, ``update`` or ``copy`` (from
    ``source``) wrote ``target``."""

    kind: str
    target: ResolvedRange
    source: ResolvedRange | None = None


@dataclass(frozen=True)
class QueueOperation:
    """Work a program put on the device's queue (``Device.queue_listeners``): ``execute`` a command buffer
    with a binding table, or a transfer (``fill``, ``copy``, ``update``) queued on its own (the transfers
    inside a command buffer are part of its ``execute``)."""

    kind: str
    command_buffer: HalCommandBuffer | None = None
    table: Sequence[BindingTableEntry] = ()
    target: ResolvedRange | None = None
    source: ResolvedRange | None = None
    pattern: bytes = b""
    data: bytes | np.ndarray | None = None


class QueueListener:
    """Told before and after each ``QueueOperation`` runs, on the thread that runs it (a recorder of the
    run writes each operation and the host writes it needs before it, and what it wrote after it)."""

    def before_queue(self, operation: QueueOperation) -> None:
        pass

    def after_queue(self, operation: QueueOperation) -> None:
        pass


# (executable, the data it was created from, its constants) -> None: see ``Device.executable_listeners``.
ExecutableListener = Callable[["HalExecutable", np.ndarray, tuple[int, ...]], None]


@dataclass
class _PendingWork:
    wait: HalFence | None
    signal: HalFence | None
    action: Callable[[], None]
    what: str


class Device:
    """Base class of the emulated HAL's devices; also the ``!hal.device`` ref the VM holds."""

    vm_type_name = "hal.device"
    identifier = "device"  # what `hal.device.id` patterns match (IREE's driver name, e.g. local-sync)
    # Invocations a GPU runs in lock step (Vulkan's subgroup, a warp); 0 where none or not reported.
    subgroup_size = 0

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.identifier
        self.allocator = HalAllocator(self)
        self.observers: list[DispatchObserver] = []
        # Runs an observed dispatch's kernel: ``hook(executable, record, run)`` calls ``run()`` or writes the
        # dispatch's results itself (time travel's replay writes the bytes a costly dispatch left when it
        # first ran instead of running it again). None: the kernel runs.
        self.kernel_hook: KernelHook | None = None
        # Told of every allocation the device's allocator makes or imports, in order (time travel numbers
        # them: a replay makes them in the same order).
        self.allocation_listeners: list[Callable[[Allocation], None]] = []
        # Told after each transfer the device did (queue.fill/update/copy and command-buffer transfers), in
        # order: what the program wrote besides dispatches (the divergence finder's defined bytes).
        self.transfer_listeners: list[Callable[[Transfer], None]] = []
        # Told before and after each operation of the queue (``queue_execute``, ``queue_fill``...).
        self.queue_listeners: list[QueueListener] = []
        # Told of each executable the program creates, with the data it came from (a recorder of the run
        # keeps the binary; the divergence finder reads the source locations of its exports).
        self.executable_listeners: list[ExecutableListener] = []
        # Which dispatch of the running batch runs: [index within the native segment, index of the segment's
        # first dispatch in the batch] (``set_progress_cell``: a child session's shared memory).
        self._progress = np.zeros(2, np.uint64)
        self._progress_address = int(self._progress.ctypes.data)
        self._dispatches = 0
        self._batch_ends: list[int] = []  # see ``batch_dispatch_ends``
        # Per command buffer: (its version, indices of its dispatch commands, those commands), for planning.
        self._positions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._pending: list[_PendingWork] = []
        self._pumping = False
        self._lock = threading.RLock()

    # Whether ``batch_dispatch_ends`` times each dispatch of a batch (the CPU device's native loop reads a
    # clock after each): an observer that only needs times then need not watch dispatches one by one.
    times_batch_dispatches = False

    @property
    def batch_dispatch_ends(self) -> list[int]:
        """While observers are told ``dispatch_batch``: the ``time.perf_counter_ns`` at which each of its
        dispatches ended, in order (empty where the device does not time them, ``times_batch_dispatches``)."""
        return self._batch_ends

    # -- capabilities (override)

    def supports_format(self, executable_format: str) -> bool:
        return False

    def query_i64(self, category: str, key: str) -> int | None:
        """``iree_hal_device_query_i64``; ``None`` where IREE answers NOT_FOUND."""
        if category == "hal.device.id":
            return 1 if c.match_pattern(self.identifier, key) else 0
        if category == "hal.executable.format":
            return 1 if self.supports_format(key) else 0
        if category in ("hal.device", "hal.dispatch") and key == "concurrency":
            return 1
        return None

    # -- memory (override to place memory elsewhere)

    def buffer_params(self, memory_type: int, usage: int) -> tuple[int, int]:
        """The memory type and usage a buffer really gets (IREE's heap allocator: host-visible, mappable)."""
        memory_type = (memory_type | c.MEMORY_TYPE_HOST_VISIBLE) & ~c.MEMORY_TYPE_OPTIMAL
        usage |= (
            c.BUFFER_USAGE_MAPPING_SCOPED
            | c.BUFFER_USAGE_MAPPING_PERSISTENT
            | c.BUFFER_USAGE_MAPPING_ACCESS_RANDOM
            | c.BUFFER_USAGE_TRANSFER
        )
        return memory_type & 0xFFFFFFFF, usage & 0xFFFFFFFF

    def new_allocation(self, size: int, origin: str) -> Allocation:
        return Allocation(aligned_zeros(size), self, origin)

    def allocation_made(self, allocation: Allocation) -> None:
        """Tell ``allocation_listeners`` of an allocation the allocator made or imported."""
        for listener in self.allocation_listeners:
            listener(allocation)

    def import_allocation(self, data: np.ndarray, origin: str) -> Allocation | None:
        """Alias host memory, or ``None`` when this device cannot use it in place (the program then copies).

        Kernels may write into any binding and rely on 64-byte alignment, so only writable, aligned memory
        is aliased (module constants come from a private writable mapping; see the architecture notes).
        """
        if (
            data.dtype != np.uint8
            or data.ndim != 1
            or not data.flags.writeable
            or not data.flags.c_contiguous
        ):
            return None
        if data.ctypes.data % BUFFER_ALIGNMENT:
            return None
        return Allocation(data, self, origin)

    def allocate(
        self,
        size: int,
        *,
        memory_type: int = c.MEMORY_TYPE_DEVICE_LOCAL,
        usage: int = c.BUFFER_USAGE_DEFAULT,
        origin: str = "allocate",
    ) -> HalBuffer:
        return self.allocator.allocate(memory_type, usage, size, origin)

    # -- executables (override)

    def create_executable(
        self, executable_format: str, data: np.ndarray, constants: tuple[int, ...], label: str
    ) -> HalExecutable:
        # Registered so a substitution (engine.substitute) can find it and swap what it runs.
        from engine.runtime.hal.executable_swap import registry

        executable = self.load_executable_binary(executable_format, data, constants, label)
        executable = registry(self).created(executable, constants)
        for listener in list(self.executable_listeners):
            listener(executable, data, tuple(constants))
        return executable

    def load_executable_binary(
        self, executable_format: str, data: np.ndarray, constants: tuple[int, ...], label: str
    ) -> HalExecutable:
        """Load an executable without telling the registry (what a substitution loads its replacement with);
        a device overrides it for the formats it runs."""
        raise VmStatusError(
            StatusCode.NOT_FOUND,
            f"no executable loader registered for the format '{executable_format}' on device {self.name}",
        )

    def run_dispatch(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
    ) -> None:
        raise VmStatusError(StatusCode.UNIMPLEMENTED, f"device {self.name} cannot dispatch")

    # -- transfers on host memory (override for devices with their own memory)

    def fill(self, target: ResolvedRange, pattern: bytes) -> None:
        buffer = _require(target, "fill target")
        n = len(pattern)
        if n not in (1, 2, 4):
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT, f"fill patterns must be 1, 2, or 4 bytes (got {n})"
            )
        if target.length == 0:
            return
        start, length = buffer.resolve(target.offset, target.length)
        if target.offset % n or length % n:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"attempting to fill a range with {n} byte values that is not aligned "
                f"(offset={target.offset}, length={length})",
            )
        view = buffer.allocation.write_view(start, length)
        view.view(np.dtype(f"<u{n}"))[:] = int.from_bytes(pattern, "little")
        self.transferred(Transfer("fill", target))

    def copy(self, source: ResolvedRange, target: ResolvedRange) -> None:
        src_buffer = _require(source, "copy source")
        dst_buffer = _require(target, "copy target")
        src = src_buffer.read_view(source.offset, source.length)
        dst = dst_buffer.write_view(target.offset, len(src))
        dst[:] = src  # numpy handles overlap like memmove
        self.transferred(Transfer("copy", target, source))

    def update(self, data: bytes | np.ndarray, target: ResolvedRange) -> None:
        buffer = _require(target, "update target")
        src = (
            np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray | memoryview) else data
        )
        dst = buffer.write_view(target.offset, len(src))
        dst[:] = src
        self.transferred(Transfer("update", target))

    def transferred(self, transfer: Transfer) -> None:
        """Tell ``transfer_listeners`` of a transfer done (an override of fill/copy/update calls it too)."""
        for listener in self.transfer_listeners:
            listener(transfer)

    def barrier(self, command: cmd.BarrierCommand) -> None:
        """An execution barrier; in-order host execution needs nothing."""

    # -- dispatch with observation

    @staticmethod
    def check_dispatch(executable: HalExecutable, ordinal: int, bindings: list[ResolvedRange]) -> None:
        """IREE's checks before a dispatch runs: the export exists and no binding is NULL."""
        if not 0 <= ordinal < len(executable.export_names):
            raise VmStatusError(
                StatusCode.OUT_OF_RANGE,
                f"function id {ordinal} out of range (count: {len(executable.export_names)})",
            )
        for i, b in enumerate(bindings):
            if b.buffer is None:
                raise VmStatusError(
                    StatusCode.FAILED_PRECONDITION,
                    f"required binding {i} is NULL; all bindings must have a valid pointer",
                )

    def dispatch_record(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: Sequence[int],
        constants: Sequence[int],
        bindings: list[ResolvedRange],
        sequence: int,
    ) -> DispatchRecord:
        """What observers are told about one dispatch (its details are worked out when read)."""
        return DispatchRecord(sequence, self, executable, ordinal, workgroup_count, constants, bindings)

    def dispatch(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
        kernel: Callable[[], None] | None = None,
    ) -> None:
        """Run one dispatch, telling the observers before and after. ``kernel``: what runs it, when the device
        has a quicker way than ``run_dispatch`` with these arguments (a prepared plan); it is called after the
        observers' ``before_dispatch``, so it must see what they changed (e.g. a substituted executable)."""
        self.check_dispatch(executable, ordinal, bindings)
        if kernel is None:
            kernel = lambda: self.run_dispatch(executable, ordinal, workgroup_count, constants, bindings)  # noqa: E731
        if not self.observers:
            self._dispatches += 1
            kernel()
            return
        record = self.dispatch_record(executable, ordinal, workgroup_count, constants, bindings, self._dispatches)
        self._dispatches += 1
        for observer in list(self.observers):
            observer.before_dispatch(record)
        try:
            hook = self.kernel_hook
            if hook is None:
                kernel()
            else:
                hook(executable, record, kernel)
        except Exception as e:
            for observer in list(self.observers):
                observer.dispatch_failed(record, e)
            raise
        for observer in list(self.observers):
            observer.after_dispatch(record)

    def count_dispatches(self, count: int) -> None:
        """Count ``count`` dispatches a device ran without ``dispatch`` (a native batch)."""
        self._dispatches += count


    def add_observer(self, observer: DispatchObserver, *, first: bool = False) -> None:
        """Tell ``observer`` about every dispatch (``first``: before the observers already there, e.g. a
        recorder that must see a dispatch before a gate parks the run inside it)."""
        if observer not in self.observers:
            self.observers.insert(0, observer) if first else self.observers.append(observer)

    def observers_aside(self, keep: Sequence[DispatchObserver]) -> list[DispatchObserver]:
        """Only ``keep`` observe dispatches until ``restore_observers(returned)``: a replay of recorded
        history runs dispatches that are not new events (no breakpoint, no second capture)."""
        saved, self.observers = self.observers, list(keep)
        return saved

    def restore_observers(self, saved: list[DispatchObserver]) -> None:
        self.observers = saved

    def queue_state(self) -> tuple[int, tuple]:
        """What a checkpoint of a run saves of this device besides its buffers' bytes: the dispatch count and
        the queue's pending work (``restore_queue_state`` puts them back)."""
        return self._dispatches, tuple(self._pending)

    def restore_queue_state(self, state: tuple[int, tuple]) -> None:
        self._dispatches, pending = state
        self._pending[:] = pending

    # -- checkpoints (``engine.runtime.vm.values.Checkpointable``): the queue; the buffers are saved by the
    # refs that hold them, native handles and observers are not program state.

    def checkpoint(self, keep: Any) -> tuple[int, tuple]:
        return self.queue_state()

    def restore_checkpoint(self, state: tuple[int, tuple]) -> None:
        self.restore_queue_state(state)

    def checkpoint_refs(self) -> tuple:
        return ()
    @property
    def dispatch_count(self) -> int:
        """How many dispatches this device has run (the next record's ``sequence``)."""
        return self._dispatches

    # -- command buffers

    def execute(self, command_buffer: HalCommandBuffer, table: list[BindingTableEntry]) -> None:
        """Replay a recorded command buffer with a binding table (empty for direct command buffers).

        Planned from the current command: the stretch of commands before the next dispatch an observer
        ``watches`` runs as one batch (``run_batch``: natively on the CPU device, observers told
        ``dispatch_batch`` after it); a watched dispatch runs alone through ``dispatch``, its observers told
        before and after (a debugger may park the run inside it). After each watched dispatch the plan is
        made again, so a condition armed while parked there takes effect at the very next dispatch."""
        self.check_submittable(command_buffer, table)
        command_buffer.submissions += 1
        commands = command_buffer.commands
        start, end = 0, len(commands)
        while start < end:
            watched = self.next_watched(command_buffer, start)
            if watched > start:
                self.run_batch(command_buffer, start, watched, table)
            if watched < end:
                self.execute_watched(command_buffer, watched, table)
            start = watched + 1

    def execute_watched(self, command_buffer: HalCommandBuffer, index: int, table: list[BindingTableEntry]) -> None:
        """Run the watched dispatch ``command_buffer.commands[index]`` through ``dispatch`` (its observers told
        before and after). A device may run its kernel from a plan kept for that command (the CPU device)."""
        self.execute_command(command_buffer.commands[index], table)

    def next_watched(self, command_buffer: HalCommandBuffer, start: int) -> int:
        """The index of the first dispatch command at or after ``start`` that is watched (``len(commands)``
        when none is): the commands before it can run as one batch."""
        commands = command_buffer.commands
        end = len(commands)
        hook = self.kernel_hook
        if not self.observers and hook is None:
            return end
        positions, dispatches = self._dispatch_positions(command_buffer)
        first = bisect.bisect_left(positions, start)
        last = len(dispatches)
        sequence = self._dispatches
        if hook is not None:
            last = _first_watched_by(getattr(hook, "watches", _watches_all), dispatches, first, last, sequence)
        for observer in self.observers:
            if last == first:
                break
            last = observer.first_watched(dispatches, first, last, sequence)
        return positions[last] if last < len(dispatches) else end

    def _dispatch_positions(
        self, command_buffer: HalCommandBuffer
    ) -> tuple[list[int], tuple[cmd.DispatchCommand, ...]]:
        """The indices of a command buffer's dispatch commands and the commands (kept per version of it)."""
        found = self._positions.get(command_buffer)
        if found is None or found[0] != command_buffer.version:
            commands = command_buffer.commands
            positions = [i for i, c in enumerate(commands) if type(c) is cmd.DispatchCommand]
            found = (command_buffer.version, positions, tuple(commands[i] for i in positions))
            self._positions[command_buffer] = found
        return found[1], found[2]

    def run_batch(
        self, command_buffer: HalCommandBuffer, start: int, end: int, table: list[BindingTableEntry]
    ) -> None:
        """Run commands ``[start, end)`` of ``command_buffer``, none a watched dispatch, in order; then tell
        every observer ``dispatch_batch`` with the records of its dispatches. A device overrides it to run
        them natively; this one runs them one by one (``run_dispatch`` without observers)."""
        commands = command_buffer.commands[start:end]
        records = self.batch_records(tuple(c for c in commands if type(c) is cmd.DispatchCommand), table)
        started = time.perf_counter_ns()
        try:
            for command in commands:
                self.run_unwatched(command, table, records)
            self.batch_queued()
        except Exception as e:
            self.batch_failed(records, e)
            raise
        finally:
            self.batch_progress_ended()
        self.batch_ran(records, started, time.perf_counter_ns())

    def batch_queued(self) -> None:
        """Every command of the batch ``run_batch`` runs is queued: a device that runs them asynchronously (CUDA,
        HIP) waits for them here, so that observers hear of the batch, its end time and its faults, once it ran."""

    def batch_records(
        self, dispatches: Sequence[cmd.DispatchCommand], table: list[BindingTableEntry]
    ) -> BatchRecords | None:
        """Tell the observers a batch of ``dispatches`` starts (``batch_starting``) and make its records
        (None without observers)."""
        self._progress[:] = (0, 0)
        self._batch_ends = []
        if not self.observers:
            return None
        for observer in list(self.observers):
            observer.batch_starting(dispatches, self._dispatches)
        return BatchRecords(self, table)

    @property
    def progress_cell(self) -> np.ndarray:
        """Two u64: the running dispatch's index within its native segment and the segment's first index in
        the batch (their sum: which dispatch of the batch runs; ``NOT_IN_BATCH`` in the second when none)."""
        return self._progress

    def set_progress_cell(self, cell: np.ndarray | None) -> None:
        """Keep the progress of batches in ``cell`` (two writable u64, e.g. shared memory a parent process
        reads after a crash); None: the device's own."""
        if cell is None:
            cell = np.zeros(2, np.uint64)
        if cell.dtype != np.uint64 or cell.shape != (2,) or not cell.flags.writeable:
            raise ValueError("a progress cell is two writable uint64")
        self._progress = cell
        self._progress_address = int(cell.ctypes.data)

    @property
    def progress_address(self) -> int:
        """The address of ``progress_cell`` (the native batch loop writes the running dispatch's index there)."""
        return self._progress_address

    def batch_progress_ended(self) -> None:
        self._progress[1] = NOT_IN_BATCH

    def run_unwatched(
        self, command: cmd.Command, table: list[BindingTableEntry], records: BatchRecords | None
    ) -> None:
        """Run one command of a batch; a dispatch runs without observers, its record added to ``records``."""
        if type(command) is not cmd.DispatchCommand:
            self.execute_command(command, table)
            return
        if records is not None:
            self._progress[:] = (0, len(records))
        workgroup_count, bindings = self.resolve_dispatch(command, table)  # type: ignore[arg-type]
        self.check_dispatch(command.executable, command.ordinal, bindings)
        if records is not None:
            records.append(
                self.dispatch_record(
                    command.executable, command.ordinal, workgroup_count, command.constants, bindings,
                    self._dispatches,
                )
            )  # fmt: skip
        self._dispatches += 1
        self.run_dispatch(command.executable, command.ordinal, workgroup_count, command.constants, bindings)

    def batch_ran(self, records: Sequence[DispatchRecord] | None, start_ns: int, end_ns: int) -> None:
        """Tell the observers of dispatches that ran in a batch (none: nothing to tell)."""
        if records:
            for observer in list(self.observers):
                observer.dispatch_batch(records, start_ns, end_ns)

    def batch_failed(self, records: Sequence[DispatchRecord] | None, error: Exception) -> None:
        """A batch stopped at a failing dispatch (the last of ``records``): the observers are told of the
        ones that ran, then ``dispatch_failed`` of it."""
        if not records:
            return
        ran, failed = records[:-1], records[-1]
        now = time.perf_counter_ns()
        self.batch_ran(ran, now, now)
        for observer in list(self.observers):
            observer.dispatch_failed(failed, error)

    def resolve_dispatch(
        self, command: cmd.DispatchCommand, table: list[BindingTableEntry]
    ) -> tuple[tuple[int, int, int], list[ResolvedRange]]:
        """A dispatch command's workgroup count (read from its buffer when indirect) and resolved bindings."""
        if command.workgroups_ref is not None:
            ref = resolve_ref(command.workgroups_ref, table)
            buffer = _require(ref, "indirect workgroup count")
            counts = buffer.read_view(ref.offset, 12).view("<u4")
            workgroup_count = (int(counts[0]), int(counts[1]), int(counts[2]) & 0xFFFF)
        else:
            workgroup_count = command.workgroup_count  # type: ignore[assignment]
        return workgroup_count, [resolve_ref(b, table) for b in command.bindings]

    @staticmethod
    def check_submittable(command_buffer: HalCommandBuffer, table: list[BindingTableEntry]) -> None:
        """IREE's checks before a command buffer runs: finalized, and a binding table large enough."""
        if not command_buffer.finalized:
            raise VmStatusError(
                StatusCode.FAILED_PRECONDITION, "command buffer must be finalized before it is submitted"
            )
        if len(table) < command_buffer.binding_capacity:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"indirect command buffer requires at least {command_buffer.binding_capacity} bindings but "
                f"only {len(table)} were provided",
            )

    def execute_command(self, command: cmd.Command, table: list[BindingTableEntry]) -> None:
        if isinstance(command, cmd.DispatchCommand):
            workgroup_count, bindings = self.resolve_dispatch(command, table)
            self.dispatch(command.executable, command.ordinal, workgroup_count, command.constants, bindings)
        elif isinstance(command, cmd.FillCommand):
            self.fill(resolve_ref(command.target, table), command.pattern)
        elif isinstance(command, cmd.CopyCommand):
            self.copy(resolve_ref(command.source, table), resolve_ref(command.target, table))
        elif isinstance(command, cmd.UpdateCommand):
            self.update(command.data, resolve_ref(command.target, table))
        elif isinstance(command, cmd.BarrierCommand):
            self.barrier(command)
        # Debug groups, advice, flush and invalidate change nothing on coherent host memory.

    # -- the queue

    def queue_execute(self, command_buffer: HalCommandBuffer, table: list[BindingTableEntry]) -> None:
        """``queue.execute``: run a command buffer (its queue listeners told before and after)."""
        if not self.queue_listeners:
            self.execute(command_buffer, table)
            return
        operation = QueueOperation("execute", command_buffer=command_buffer, table=table)
        self._queued(operation, lambda: self.execute(command_buffer, table))

    def queue_fill(self, target: ResolvedRange, pattern: bytes) -> None:
        """``queue.fill`` (not one inside a command buffer)."""
        if not self.queue_listeners:
            self.fill(target, pattern)
            return
        self._queued(QueueOperation("fill", target=target, pattern=pattern), lambda: self.fill(target, pattern))

    def queue_copy(self, source: ResolvedRange, target: ResolvedRange) -> None:
        """``queue.copy`` (not one inside a command buffer)."""
        if not self.queue_listeners:
            self.copy(source, target)
            return
        self._queued(QueueOperation("copy", target=target, source=source), lambda: self.copy(source, target))

    def queue_update(self, data: bytes | np.ndarray, target: ResolvedRange) -> None:
        """``queue.update`` and ``queue.read`` (host bytes written into a buffer)."""
        if not self.queue_listeners:
            self.update(data, target)
            return
        self._queued(QueueOperation("update", target=target, data=data), lambda: self.update(data, target))

    def _queued(self, operation: QueueOperation, run: Callable[[], None]) -> None:
        for listener in list(self.queue_listeners):
            listener.before_queue(operation)
        run()
        for listener in list(self.queue_listeners):
            listener.after_queue(operation)

    def submit(
        self, wait: HalFence | None, signal: HalFence | None, action: Callable[[], None], what: str
    ) -> None:
        """Run ``action`` once ``wait`` is reached, then signal ``signal``; a failed wait fails ``signal``."""
        with self._lock:
            failure = fence_failure(wait)
            if failure is not None:
                if signal is not None:
                    signal.fail(failure)
                return
            if fence_reached(wait):
                self._run(action, signal, raise_errors=True)
                return
            self._pending.append(_PendingWork(wait, signal, action, what))
            for semaphore, _ in wait.timepoints:  # type: ignore[union-attr]
                if self._pump not in semaphore.listeners:
                    semaphore.listeners.append(self._pump)

    @property
    def pending_work(self) -> list[str]:
        """What is queued behind a fence nobody signaled yet."""
        return [p.what for p in self._pending]

    def _run(self, action: Callable[[], None], signal: HalFence | None, raise_errors: bool) -> None:
        try:
            action()
        except VmStatusError as e:
            if signal is not None:
                signal.fail(e)
            if raise_errors:
                raise
            return
        if signal is not None:
            signal.signal()

    def _pump(self) -> None:
        with self._lock:
            if self._pumping:
                return
            self._pumping = True
            try:
                progressed = True
                while progressed:
                    progressed = False
                    for work in list(self._pending):
                        failure = fence_failure(work.wait)
                        if failure is None and not fence_reached(work.wait):
                            continue
                        self._pending.remove(work)
                        progressed = True
                        if failure is not None:
                            if work.signal is not None:
                                work.signal.fail(failure)
                        else:
                            # Errors of deferred work reach the program through the signal fence.
                            self._run(work.action, work.signal, raise_errors=False)
            finally:
                self._pumping = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class MirroredMemoryDevice(Device):
    """A device with memory of its own (Vulkan, CUDA): each allocation is host memory with a device copy
    (``allocation_type``), and host memory cannot be aliased in place."""

    allocation_type: type[MirroredAllocation]

    def new_allocation(self, size: int, origin: str) -> Allocation:
        return self.allocation_type(aligned_zeros(size), self, origin)

    def import_allocation(self, data: np.ndarray, origin: str) -> Allocation | None:
        return None  # device memory cannot alias host memory: programs fall back to allocate + copy


def _watches_all(sequence: int, executable: HalExecutable, ordinal: int) -> bool:
    return True


def _require(r: ResolvedRange, what: str) -> HalBuffer:
    if r.buffer is None:
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"{what} buffer is NULL")
    return r.buffer

