"""The CUDA device plugged into the emulated HAL: ``CudaHalDevice`` runs ``cuda-nvptx-fb`` dispatches on an
NVIDIA GPU through the driver API (``engine.runtime.hal.cuda.context``).

Memory as the Vulkan device keeps it: each allocation is host numpy memory (what the HAL's host operations,
observers and the tensor inspector read) with a device copy made on the first dispatch that binds it; flags
say which side is newer. A dispatch queues the uploads of what the host wrote and its ``cuLaunchKernel``
(IREE's argument packing, ``cuda.abi``) on the device's one stream and returns; the stream is synchronised
only when the host needs bytes (a read or write of a buffer the GPU may hold newer: an observer at a stop, a
transfer, the program's results) and at the end of each batch ``Device.execute`` plans between watched
dispatches, so a stretch of dispatches costs one sync. Transfers (fill, copy, update) run on the host side.

It answers ``hal.device.id`` as ``cuda``, like IREE's CUDA driver.

UNVERIFIED ON HARDWARE: no NVIDIA GPU was at hand where this was written; only its refusal without a driver
is tested there. ``benchmarks/cuda_device_check.py`` is the check to run on a GPU machine.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ExecutableFormatError, HalError
from engine.runtime.hal.buffers import MirroredAllocation, owned_allocation
from engine.runtime.hal.commands import BindingTableEntry, ResolvedRange
from engine.runtime.hal.cuda.abi import BindingAddress, kernel_params, kernel_payload, launch_shape
from engine.runtime.hal.cuda.context import CudaContext, CudaKernel
from engine.runtime.hal.device import HalExecutable, MirroredMemoryDevice
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vmfb.cda1 import CUDA_FORMAT, CudaExportDef, read_cda1


class CudaAllocation(MirroredAllocation):
    """Host memory with a device copy; ``host_newer``/``device_newer`` say which side to copy from."""

    def __init__(self, data: np.ndarray, device: CudaHalDevice, origin: str):
        super().__init__(data, device, origin)
        self.device_pointer = 0  # 0: no device copy yet

    @property
    def cuda_device(self) -> CudaHalDevice:
        return self.device  # type: ignore[return-value]

    def sync_host(self) -> None:
        """Make the host bytes current: wait for queued work that reads them, copy back what the GPU wrote."""
        hal_device = self.cuda_device
        if self.device_newer:
            hal_device.cuda.download(self.device_pointer, self.data)
            hal_device.pending = False
            self.device_newer = False
        else:
            hal_device.settle()  # a queued upload still reads these bytes

    def restore_checkpoint(self, state: tuple[int, np.ndarray | None]) -> None:
        if state[1] is not None:
            self.cuda_device.settle()  # queued work that reads the bytes finishes before they change
        super().restore_checkpoint(state)

    def on_device(self) -> int:
        """The device pointer of an up-to-date device copy (allocated and upload queued as needed)."""
        hal_device = self.cuda_device
        if not self.device_pointer:
            self.device_pointer = hal_device.cuda.allocate(self.size)
            # Device memory goes with the allocation (the finalizer holds the context, not the allocation).
            weakref.finalize(self, hal_device.cuda.release, self.device_pointer)
            self.host_newer = True
        if self.host_newer:
            if self.size:
                hal_device.cuda.upload(self.device_pointer, self.data)
                hal_device.pending = True
            self.host_newer = False
        return self.device_pointer


@dataclass(frozen=True)
class CudaExecutable:
    """A loaded CDA1 executable: its definition and one kernel per export."""

    definition: Any  # CudaExecutableDef, HipExecutableDef
    kernels: tuple[CudaKernel, ...]

    def launch_target(self, ordinal: int) -> tuple[CudaExportDef, CudaKernel]:
        """Export ``ordinal``'s definition (block size, arguments) and its loaded kernel (an ``ExportOverlay``
        of a substitution routes some ordinals to another executable's)."""
        if not 0 <= ordinal < len(self.kernels):
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT, f"export ordinal {ordinal} out of range ({len(self.kernels)} exports)"
            )
        return self.definition.exports[ordinal], self.kernels[ordinal]


class LaunchTimeline:
    """CUDA events of one batch: one recorded before its first launch and one after each launch, which time
    its dispatches on the GPU's clock (a profile's zones) without a synchronisation between them."""

    def __init__(self, cuda: CudaContext):
        self.cuda = cuda
        self.start = cuda.record_event()
        self.marks: list[int] = []

    def mark(self) -> None:
        self.marks.append(self.cuda.record_event())

    def ends(self, started_ns: int, finished_ns: int) -> list[int]:
        """Each launch's end on the host clock (``perf_counter_ns``): the GPU's times after the first event,
        placed so that the last launch ends when the host saw the stream finish (``finished_ns``), and no
        earlier than the batch started. Destroys the events."""
        ms = self.cuda.elapsed_since(self.start, self.marks)
        self.marks = []
        if not ms:
            return []
        anchor = max(started_ns, finished_ns - round(ms[-1] * 1e6))
        return [min(anchor + round(m * 1e6), finished_ns) for m in ms]

    def discard(self) -> None:
        self.cuda.destroy_events([self.start, *self.marks])
        self.marks = []


class CudaHalDevice(MirroredMemoryDevice):
    """The HAL device over CUDA device ``index`` (``cuda://N``). ``HipHalDevice`` is this over HIP: the same
    device through another driver API (``context``), with another executable container."""

    identifier = "cuda"
    executable_format = CUDA_FORMAT
    vendor = "CUDA"
    allocation_type = CudaAllocation
    # A profile's zones come from CUDA events around each launch of a batch (``LaunchTimeline``), so a
    # profiled run keeps its batches: one synchronisation per stretch, as without the profile.
    times_batch_dispatches = True

    def __init__(self, index: int = 0, name: str | None = None, context: Any = None):
        self.cuda = context if context is not None else self.open_context(index)
        self.pending = False  # work queued on the stream since its last synchronisation
        self._timeline: LaunchTimeline | None = None  # while a profiled batch runs
        super().__init__(name or f"{self.identifier} ({self.cuda.info.name})")

    @staticmethod
    def open_context(index: int) -> Any:
        return CudaContext(index)

    @staticmethod
    def read_definition(data: np.ndarray) -> Any:
        """The executable's exports and modules (``CudaExecutableDef``)."""
        return read_cda1(data)

    @staticmethod
    def module_image(module: Any) -> str | bytes:
        return module.ptx

    def supports_format(self, executable_format: str) -> bool:
        return executable_format == self.executable_format

    def settle(self) -> None:
        """Wait for the stream (a launch's errors surface here, as IREE's do at a semaphore wait)."""
        if self.pending:
            self.pending = False
            try:
                self.cuda.synchronize()
            except HalError as e:
                raise VmStatusError(StatusCode.INTERNAL, str(e)) from None

    def load_executable_binary(
        self, executable_format: str, data: np.ndarray, constants: tuple[int, ...], label: str
    ) -> HalExecutable:
        if executable_format != self.executable_format:
            return super().load_executable_binary(executable_format, data, constants, label)
        if constants:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"executable {label}: {self.vendor} executables take no executable constants",
            )
        try:
            definition = self.read_definition(np.asarray(data, dtype=np.uint8))
            modules = [self.cuda.load_module(self.module_image(m)) for m in definition.modules]
            kernels = tuple(
                self.cuda.kernel(modules[e.module_ordinal], e.kernel_name, e.block_shared_memory_size)
                for e in definition.exports
            )
        except (ExecutableFormatError, HalError) as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"cannot load executable {label}: {e}") from None
        impl = CudaExecutable(definition, kernels)
        return HalExecutable(self, executable_format, label, list(definition.export_names), impl)

    def run_dispatch(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
    ) -> None:
        """Queue one launch on the stream (uploads first); the host waits only when it needs bytes."""
        export, kernel = executable.impl.launch_target(ordinal)
        if 0 in workgroup_count:
            # No workgroups, no work: IREE's HIP HAL skips the launch too (a 0 grid is a launch error).
            if self._timeline is not None:
                self._timeline.mark()  # its zone still ends somewhere: where the launch before it ended
            return
        addresses = []
        touched: list[CudaAllocation] = []
        for b in bindings:
            if b.buffer is None:
                addresses.append(BindingAddress(0))
                continue
            allocation = owned_allocation(self, b.buffer, CudaAllocation)
            start, _ = b.buffer.resolve(b.offset, b.length)
            addresses.append(BindingAddress(allocation.on_device(), start))
            touched.append(allocation)
        try:
            payload = kernel_payload(export, addresses, constants)
            self.cuda.launch(kernel, launch_shape(export, workgroup_count), kernel_params(payload))
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, str(e)) from None
        self.pending = True
        if self._timeline is not None:
            self._timeline.mark()
        for allocation in touched:
            allocation.device_newer = True  # the kernel may have written any binding

    # A batch runs as ``Device.run_batch`` runs it, its launches queued on the stream: the hooks below time it
    # (a profile: CUDA events around each launch) and wait for it before the observers hear of it.

    def batch_records(self, dispatches: Any, table: list[BindingTableEntry]) -> Any:
        records = super().batch_records(dispatches, table)
        if records is not None and any(getattr(o, "wants_dispatch_times", False) for o in self.observers):
            self._timeline = LaunchTimeline(self.cuda)
        return records

    def batch_queued(self) -> None:
        """One synchronisation for the whole stretch (its faults are the batch's)."""
        self.settle()

    def batch_ran(self, records: Any, start_ns: int, end_ns: int) -> None:
        timeline, self._timeline = self._timeline, None
        if timeline is not None:
            try:
                self.batch_dispatch_ends.extend(timeline.ends(start_ns, end_ns))
            except HalError:
                pass  # untimed: the observers split the batch's host time among its dispatches
        super().batch_ran(records, start_ns, end_ns)

    def batch_failed(self, records: Any, error: Exception) -> None:
        timeline, self._timeline = self._timeline, None
        if timeline is not None:
            timeline.discard()
        super().batch_failed(records, error)

    def dispatch(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
        kernel: Callable[[], None] | None = None,
    ) -> None:
        """A watched dispatch: its launch and the wait for it run between the observers' ``before_dispatch``
        and ``after_dispatch``, so a zone spans the GPU's work and a fault is this dispatch's."""
        launch = kernel or (lambda: self.run_dispatch(executable, ordinal, workgroup_count, constants, bindings))

        def launch_and_wait() -> None:
            launch()
            self.settle()

        super().dispatch(executable, ordinal, workgroup_count, constants, bindings, launch_and_wait)
