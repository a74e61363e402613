"""The ``io_parameters`` native module for our VM: how a program compiled with external parameters loads its
weights (``engine.runtime.parameters``), as ``runtime/src/iree/modules/io/parameters/module.c`` (IREE 3.13).

Each call names its parameters indirectly, by a key table, key data and spans (``parameters.named_spans``,
which the static ``vmfb.parameter_loads`` reads too). ``load`` returns a list of new buffers, one a span; ``gather``
copies each span into one target buffer. Both are queue operations (wait fence, signal fence) on the device,
whose writes the device's listeners see as host updates (``queue_update``), so a capture or the time travel
sees the weights arrive. ``scatter`` writes an archive (exporting parameters): refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.runtime.hal.buffers import HalBuffer
from engine.runtime.hal.commands import ResolvedRange
from engine.runtime.hal.device import Device
from engine.runtime.hal.sync import HalFence
from engine.runtime.parameters import (
    IO_PARAMETERS,
    ParameterArchives,
    ParameterError,
    SpanTableError,
    named_spans,
)
from engine.runtime.vm.native import NativeModule, StatusCode, VmStatusError, export
from engine.runtime.vm.values import VmBuffer, VmList, ref_type_name


def _ref(value: Any, cls: type, type_name: str, null_ok: bool = False) -> Any:
    if value is None and null_ok:
        return None
    if not isinstance(value, cls):
        have = "null" if value is None else ref_type_name(value)
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"ref type mismatch; expected {type_name} but have {have}")
    return value


def _scope(value: Any) -> str:
    buffer = _ref(value, VmBuffer, "vm.buffer", null_ok=True)
    return "" if buffer is None else bytes(buffer.data).decode("utf-8", errors="replace")


def _named_spans(key_table: Any, key_data: Any, spans: Any) -> list[tuple[str, int, int, int]]:
    """``parameters.named_spans`` of the call's three buffers, its errors as IREE's statuses."""
    buffers = [bytes(_ref(b, VmBuffer, "vm.buffer").data) for b in (key_table, key_data, spans)]
    try:
        return named_spans(*buffers)
    except SpanTableError as e:
        raise VmStatusError(StatusCode.OUT_OF_RANGE if e.out_of_range else StatusCode.INVALID_ARGUMENT, str(e)) from None


class IoParametersModule(NativeModule):
    """``io_parameters`` serving ``archives`` (none: the first load says which archive the program wants)."""

    name = IO_PARAMETERS

    def __init__(self, archives: ParameterArchives | None = None):
        super().__init__()
        self.archives = archives if archives is not None else ParameterArchives()

    def _read(self, scope: str, key: str, offset: int, length: int) -> np.ndarray:
        try:
            return self.archives.bytes_of(scope, key, offset, length)
        except ParameterError as e:
            raise VmStatusError(StatusCode.NOT_FOUND, str(e)) from None

    @export("load", "0rIrrrIiirrr_r")
    def load(self, device, queue_affinity, wait_fence, signal_fence, source_scope, target_queue_affinity,
             target_memory_types, target_buffer_usage, key_table, key_data, spans) -> VmList:  # fmt: skip
        dev = _ref(device, Device, "hal.device")
        wait = _ref(wait_fence, HalFence, "hal.fence", null_ok=True)
        signal = _ref(signal_fence, HalFence, "hal.fence", null_ok=True)
        scope = _scope(source_scope)
        named = _named_spans(key_table, key_data, spans)
        contents = [self._read(scope, key, offset, length) for key, offset, _, length in named]
        buffers = [dev.allocator.allocate(target_memory_types, target_buffer_usage, int(data.size), "parameter")
                   for data in contents]  # fmt: skip

        def run() -> None:
            for buffer, data in zip(buffers, contents):
                dev.queue_update(data, ResolvedRange(buffer, 0, int(data.size)))

        dev.submit(wait, signal, run, "io_parameters.load")
        return VmList("!hal.buffer", list(buffers), len(buffers))

    @export("gather", "0rIrrrrrrr_v")
    def gather(self, device, queue_affinity, wait_fence, signal_fence, source_scope, target_buffer, key_table,
               key_data, spans) -> None:  # fmt: skip
        dev = _ref(device, Device, "hal.device")
        wait = _ref(wait_fence, HalFence, "hal.fence", null_ok=True)
        signal = _ref(signal_fence, HalFence, "hal.fence", null_ok=True)
        target = _ref(target_buffer, HalBuffer, "hal.buffer")
        scope = _scope(source_scope)
        writes = [(self._read(scope, key, offset, length), at) for key, offset, at, length in
                  _named_spans(key_table, key_data, spans)]  # fmt: skip
        for data, at in writes:
            if at + data.size > target.byte_length:
                raise VmStatusError(StatusCode.OUT_OF_RANGE,
                                    f"parameter span [{at}, {at + data.size}) is outside the target buffer of "
                                    f"{target.byte_length} bytes")  # fmt: skip

        def run() -> None:
            for data, at in writes:
                dev.queue_update(data, ResolvedRange(target, at, int(data.size)))

        dev.submit(wait, signal, run, "io_parameters.gather")

    @export("scatter", "0rIrrrrrrr_v")
    def scatter(self, *args) -> None:
        raise VmStatusError(StatusCode.UNIMPLEMENTED,
                            "io_parameters.scatter writes parameters to an archive: not done by the debug engine "
                            "(run it with --engine=reference)")  # fmt: skip
