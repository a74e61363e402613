"""The CPU device: IREE's local-sync device emulated on host memory.

It answers device queries like local-sync (id ``local-sync``, formats ``embedded-elf-x86_64``,
``system-elf-x86_64`` and ``vmvx-bytecode-fb``, concurrency 1, ``hal.cpu:<feature>`` bits), so a compiled module's ``__init`` selects it.
llvm-cpu executables run natively through ``CpuExecutableLibrary`` (ctypes); VMVX executables run in our
own VM interpreter (``engine.runtime.vm.vmvx``). Bindings are views of the buffers' host memory: kernels
read and write it in place.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import numpy as np

from engine.errors import DispatchError, HalError
from engine.runtime.hal import commands as cmd
from engine.runtime.hal.buffers import HalBuffer
from engine.runtime.hal.commands import BindingTableEntry, HalCommandBuffer, ResolvedRange
from engine.runtime.hal.cpu_batch import BatchSegments, CpuBatchPlan, native_dispatch, plan_stretch
from engine.runtime.hal.device import BUFFER_ALIGNMENT, BatchRecords, Device, HalExecutable, aligned_zeros
from engine.runtime.hal.formats import (
    CPU_FORMATS,
    STATIC_LIBRARY,
    VMVX_BYTECODE,
    is_native_cpu,
    runs_natively,
)
from engine.runtime.hal.machine_code import machine_code
from engine.runtime.hal.native_loop import native_loop
from engine.runtime.hal.static_libraries import StaticLibraries
from engine.runtime.vm.native import StatusCode, VmStatusError

_PLANS_PER_COMMAND_BUFFER = 512  # stretches kept per command buffer: a typed model's in-place dispatches and transfers cut
# EfficientViT's into ~110 every call (16 were re-planned at every call); breakpoints moving cut new ones
_WATCHED_PLANS = 64  # watched commands remembered per command buffer (see CpuDevice._watched_plan)

# iree/schemas/cpu_feature_bits.inl for x86-64: LLVM feature name -> bit of processor data word 0.
X86_64_FEATURE_BITS = {
    "sse3": 0,
    "ssse3": 1,
    "sse4.1": 2,
    "sse4.2": 3,
    "sse4a": 4,
    "avx": 10,
    "fma": 11,
    "fma4": 12,
    "xop": 13,
    "f16c": 14,
    "avx2": 15,
    "avx512f": 20,
    "avx512cd": 21,
    "avx512vl": 22,
    "avx512dq": 23,
    "avx512bw": 24,
    "avx512ifma": 25,
    "avx512vbmi": 26,
    "avx512vpopcntdq": 27,
    "avx512vnni": 28,
    "avx512vbmi2": 29,
    "avx512bitalg": 30,
    "avx512bf16": 31,
    "avx512fp16": 32,
    "amx-tile": 50,
    "amx-int8": 51,
    "amx-bf16": 52,
}


class CpuDevice(Device):
    """``local-sync`` on the host: synchronous queue, native ELF dispatches, VMVX in our interpreter."""

    identifier = "local-sync"
    formats = CPU_FORMATS

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        # The kernels of a static-library build, as its host links them (``static_libraries``); None: no such host.
        self.static_libraries: StaticLibraries | None = None
        # Native plans of the command buffers this device ran, by stretch ``(start, end, transfers inside)``.
        self._plans: weakref.WeakKeyDictionary[
            HalCommandBuffer, dict[tuple[int, int, bool], BatchSegments]
        ] = weakref.WeakKeyDictionary()
        self._native_calls = 0
        self._first_started: int | None = None  # run_batch: when its first native dispatch started
        # Watched dispatches' one-dispatch plans (None: watched once so far), by command index.
        self._watched_plans: weakref.WeakKeyDictionary[
            HalCommandBuffer, dict[int, BatchSegments | None]
        ] = weakref.WeakKeyDictionary()
        # Where a watched dispatch's native call writes its index (0): not a batch's progress.
        self._watched_progress = np.zeros(1, np.uint64)
        self._watched_progress_address = int(self._watched_progress.ctypes.data)

    times_batch_dispatches = True

    @property
    def native_calls(self) -> int:
        """How many calls of the native batch loop this device made (each runs one prepared plan)."""
        return self._native_calls

    def supports_format(self, executable_format: str) -> bool:
        # Static libraries: where the host gave their object, as IREE's static library loader is registered.
        return executable_format in self.formats or (
            executable_format == STATIC_LIBRARY and self.static_libraries is not None
        )

    def query_i64(self, category: str, key: str) -> int | None:
        if category == "hal.cpu":
            bit = X86_64_FEATURE_BITS.get(key)
            if bit is None:
                return None
            from engine.runtime.hal.cpu_abi import processor_data

            return (processor_data()[0] >> bit) & 1
        return super().query_i64(category, key)

    # -- executables

    def load_executable_binary(
        self, executable_format: str, data: np.ndarray, constants: tuple[int, ...], label: str
    ) -> HalExecutable:
        """Load an executable without telling the registry (what a substitution loads its replacement with)."""
        if is_native_cpu(executable_format):
            from engine.runtime.hal.cpu_library import CpuExecutableLibrary

            try:
                library = CpuExecutableLibrary.load(
                    memoryview(np.ascontiguousarray(data)), label, constants=constants
                )
            except HalError as e:
                raise VmStatusError(
                    StatusCode.INVALID_ARGUMENT, f"cannot load executable {label}: {e}"
                ) from None
            names = [e.name for e in library.exports]
            return HalExecutable(self, executable_format, label, names, library)
        if executable_format == STATIC_LIBRARY and self.static_libraries is not None:
            name = bytes(np.asarray(data, np.uint8)).rstrip(b"\0").decode("utf-8", "replace")  # what the module holds
            try:
                library = self.static_libraries.load(name, constants, label)
            except HalError as e:
                raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"cannot load executable {label}: {e}") from None
            return HalExecutable(self, executable_format, label, [e.name for e in library.exports], library)
        if executable_format == VMVX_BYTECODE:
            from engine.runtime.vm.vmvx import VmvxExecutable  # another engineer's module; imported on demand

            try:
                executable = VmvxExecutable.load(data, list(constants))
            except HalError as e:
                raise VmStatusError(
                    StatusCode.INVALID_ARGUMENT, f"cannot load executable {label}: {e}"
                ) from None
            return HalExecutable(self, executable_format, label, _vmvx_export_names(executable), executable)
        return super().load_executable_binary(executable_format, data, constants, label)

    # -- native batches

    def run_batch(
        self, command_buffer: HalCommandBuffer, start: int, end: int, table: list[BindingTableEntry]
    ) -> None:
        """Run commands ``[start, end)`` (no watched dispatch among them) natively: the stretch's plan
        (``cpu_batch``) is made once per command buffer and reused by every later submission of it."""
        planned = self._segments(command_buffer, start, end)
        records = self.batch_records(planned.dispatches, table)
        if any(type(s) is CpuBatchPlan for s in planned.segments):
            native_loop(), machine_code()  # compiled on first use: not the first dispatch's time (46 ms)
        started = time.perf_counter_ns()
        self._first_started = None  # when the batch's first dispatch started, binding done (its zone's start)
        progress = self.progress_cell
        ran = 0  # dispatches of the batch run so far
        # Each dispatch's end time, for observers (profiles: a zone per dispatch); none without observers.
        ends = None
        if records is not None and any(getattr(o, "wants_dispatch_times", False) for o in self.observers):
            ends = self.batch_dispatch_ends
        try:
            for segment in planned.segments:
                if type(segment) is CpuBatchPlan:
                    progress[1] = ran
                    self._run_plan(segment, table, records, progress, ends)
                    ran += segment.count
                else:
                    dispatch = type(segment) is cmd.DispatchCommand
                    if dispatch:
                        progress[:] = (0, ran)
                        ran += 1
                    self.run_unwatched(segment, table, records)  # type: ignore[arg-type]
                    if dispatch and ends is not None:
                        ends.append(time.perf_counter_ns())
        except Exception as e:
            self.batch_failed(records, e)
            raise
        finally:
            self.batch_progress_ended()
        self.batch_ran(records, self._first_started or started, time.perf_counter_ns())

    def execute_watched(self, command_buffer: HalCommandBuffer, index: int, table: list[BindingTableEntry]) -> None:
        """A watched dispatch runs from a one-dispatch plan kept for it (made the first time it is watched,
        reused by later calls stopping there): binding it to the table and one native call, instead of
        building IREE's dispatch state for it each time. Its observers are told as for any dispatch."""
        command = command_buffer.commands[index]
        if type(command) is not cmd.DispatchCommand or not native_dispatch(command):
            super().execute_watched(command_buffer, index, table)
            return
        plan = self._watched_plan(command_buffer, index)
        if plan is None:
            super().execute_watched(command_buffer, index, table)
            return
        workgroup_count, bindings = self.resolve_dispatch(command, table)
        executable, ordinal, constants = command.executable, command.ordinal, command.constants

        def kernel() -> None:
            with plan.lock:
                # An observer may have substituted the executable while the run was parked before it; a
                # binding IREE's checks refuse raises their error: both run the dispatch the usual way.
                if plan.still_valid() and plan.bind(table) is None:
                    self._native_calls += 1
                    failure = plan.run(self._watched_progress_address)
                    if failure is None:
                        return
                    error = DispatchError(
                        plan.impls[0].name, plan.exports[0].name, plan.failed_workgroup(0), failure[1]
                    )
                    raise VmStatusError(StatusCode.INTERNAL, str(error))
            self.run_dispatch(executable, ordinal, workgroup_count, constants, bindings)

        self.dispatch(executable, ordinal, workgroup_count, constants, bindings, kernel)

    def _watched_plan(self, command_buffer: HalCommandBuffer, index: int) -> CpuBatchPlan | None:
        """The one-dispatch plan of command ``index`` once it is watched a second time (a breakpoint a run
        continues to call after call); None the first time, or when it cannot be planned. A plan costs
        several times what the usual path costs per run, so dispatches watched once (stepping, a watch
        judging every dispatch) are not planned: at most ``_WATCHED_PLANS`` commands are remembered."""
        watched = self._watched_plans.get(command_buffer)
        if watched is None:
            watched = self._watched_plans[command_buffer] = {}
        found = watched.get(index)
        if found is not None and found.still_valid(command_buffer.version):
            segments = found.segments
            return segments[0] if len(segments) == 1 and type(segments[0]) is CpuBatchPlan else None  # type: ignore[return-value]
        if index not in watched:
            if len(watched) >= _WATCHED_PLANS:
                watched.clear()
            watched[index] = None
            return None
        planned = watched[index] = plan_stretch(command_buffer.commands[index : index + 1], command_buffer.version)
        segments = planned.segments
        return segments[0] if len(segments) == 1 and type(segments[0]) is CpuBatchPlan else None  # type: ignore[return-value]

    def _segments(self, command_buffer: HalCommandBuffer, start: int, end: int) -> BatchSegments:
        plans = self._plans.get(command_buffer)
        if plans is None:
            plans = self._plans[command_buffer] = {}
        # Transfers run inside the native plans unless someone listens to them (each must be told).
        transfers = not self.transfer_listeners
        key = (start, end, transfers)
        found = plans.get(key)
        if found is None or not found.still_valid(command_buffer.version):
            if len(plans) >= _PLANS_PER_COMMAND_BUFFER:  # stops moving around: keep the latest few
                plans.clear()
            found = plans[key] = plan_stretch(
                command_buffer.commands[start:end], command_buffer.version, transfers
            )
        return found

    def _run_plan(
        self,
        plan: CpuBatchPlan,
        table: list[BindingTableEntry],
        records: BatchRecords | None,
        progress: np.ndarray,
        ends: list[int] | None,
    ) -> None:
        with plan.lock:
            if plan.bind(table) is not None:
                # A binding IREE's checks refuse: one at a time, which raises their errors.
                first = int(progress[1])
                k = 0
                for command in plan.commands:
                    if type(command) is not cmd.DispatchCommand:
                        self.execute_command(command, table)
                        continue
                    progress[:] = (k, first)
                    k += 1
                    if records is not None:  # before it runs: a failure names it
                        records.add_unmade((command,), self.dispatch_count)
                    self.run_unwatched(command, table, None)
                    if ends is not None:
                        ends.append(time.perf_counter_ns())
                return
            if records is not None:
                records.add_unmade(plan.dispatches, self.dispatch_count)
            self._native_calls += 1
            if ends is not None and not ends and self._first_started is None:
                self._first_started = time.perf_counter_ns()  # binding the table is not the dispatch's time
            failure = plan.run(self.progress_address, timed=ends is not None)
            if failure is None:
                self.count_dispatches(plan.count)
                if ends is not None:
                    ends.extend(plan.dispatch_ends(plan.count))
                return
            index, code = failure
            if ends is not None:
                ends.extend(plan.dispatch_ends(index))
            self.count_dispatches(index + 1)
            if records is not None:
                records.truncate(len(records) - plan.count + index + 1)
            error = DispatchError(
                plan.impls[index].name, plan.exports[index].name, plan.failed_workgroup(index), code
            )
        raise VmStatusError(StatusCode.INTERNAL, str(error))

    # -- dispatch

    def run_dispatch(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
    ) -> None:
        impl = executable.impl
        if runs_natively(executable.format):
            attrs = impl.exports[ordinal].attributes
            expected_constants, expected_bindings = attrs.constant_count, attrs.binding_count
        else:
            expected_constants, expected_bindings = _vmvx_counts(impl, ordinal)
        if expected_constants is not None and len(constants) != expected_constants:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"constant count mismatch, expected {expected_constants} but was provided {len(constants)}",
            )
        if expected_bindings is not None and len(bindings) != expected_bindings:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"binding count mismatch, expected {expected_bindings} but was provided {len(bindings)}",
            )
        views = [_binding_view(b) for b in bindings]
        try:
            impl.dispatch(
                ordinal, tuple(workgroup_count), tuple(int(v) & 0xFFFFFFFF for v in constants), views
            )
        except DispatchError as e:
            raise VmStatusError(StatusCode.INTERNAL, str(e)) from None
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, str(e)) from None


def _binding_view(r: ResolvedRange) -> np.ndarray:
    buffer: HalBuffer = r.buffer  # type: ignore[assignment]
    if r.length == 0:
        return aligned_zeros(0)  # an empty binding still needs an aligned pointer
    view = buffer.write_view(r.offset, r.length)
    if view.ctypes.data % BUFFER_ALIGNMENT:
        # Not IREE's layout (its buffers and binding offsets are 64-byte aligned); kernels would fault.
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"binding at offset {r.offset} of {buffer!r} is not {BUFFER_ALIGNMENT}-byte aligned",
        )
    return view


def _vmvx_export_names(executable: Any) -> list[str]:
    names = getattr(executable, "export_names", None)
    if names is None:
        names = [getattr(e, "name", e) for e in getattr(executable, "exports", ())]
    return [str(n) for n in names]


def _vmvx_counts(executable: Any, ordinal: int) -> tuple[int | None, int | None]:
    exports = getattr(executable, "exports", None)
    if exports is None:
        return None, None
    export = exports[ordinal]
    attrs = getattr(export, "attributes", export)
    return getattr(attrs, "constant_count", None), getattr(attrs, "binding_count", None)
