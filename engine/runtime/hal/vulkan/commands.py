"""Commands recorded for a Vulkan device, as plain data.

A :class:`VulkanCommandBuffer` records IREE's command-buffer operations (dispatch, indirect dispatch,
fill, copy, update, execution barrier) into a list of frozen op records. Nothing touches Vulkan while
recording: :meth:`VulkanDevice.submit <engine.runtime.hal.vulkan.device.VulkanDevice.submit>` encodes
the list into ``VkCommandBuffer``s, either all at once (fast) or split at dispatch boundaries so an
observer can read any binding before and after each dispatch (debug).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.errors import HalError

if TYPE_CHECKING:
    from engine.runtime.hal.vulkan.resources import VulkanBuffer, VulkanPipeline


@dataclass(frozen=True)
class BufferRange:
    """``length`` bytes of ``buffer`` from ``offset``; ``length=None`` means to the end of the buffer."""

    buffer: VulkanBuffer
    offset: int = 0
    length: int | None = None

    @property
    def byte_length(self) -> int:
        return self.buffer.size - self.offset if self.length is None else self.length

    def validate(self, what: str) -> None:
        if self.buffer.released:
            raise HalError(f"{what}: buffer {self.buffer.label!r} was released")
        if self.offset < 0 or (self.length is not None and self.length < 0):
            raise HalError(f"{what}: negative offset or length ({self.offset}, {self.length})")
        if self.offset + self.byte_length > self.buffer.size:
            raise HalError(
                f"{what}: range [{self.offset}, {self.offset + self.byte_length}) is outside "
                f"buffer {self.buffer.label!r} of {self.buffer.size} bytes"
            )


# A binding as callers may write it: a BufferRange, or a (buffer, offset, length) tuple.
BindingLike = BufferRange | tuple


def as_range(b: BindingLike, what: str) -> BufferRange:
    r = b if isinstance(b, BufferRange) else BufferRange(*b)
    r.validate(what)
    return r


@dataclass(frozen=True)
class DispatchOp:
    pipeline: VulkanPipeline
    workgroup_count: tuple[int, int, int]
    constants: tuple[int, ...]  # 32-bit words pushed as push constants
    bindings: tuple[BufferRange, ...]


@dataclass(frozen=True)
class DispatchIndirectOp:
    pipeline: VulkanPipeline
    workgroup_count_range: BufferRange  # three uint32 (x, y, z)
    constants: tuple[int, ...]
    bindings: tuple[BufferRange, ...]


@dataclass(frozen=True)
class FillOp:
    target: BufferRange
    pattern: bytes  # 1, 2 or 4 bytes


@dataclass(frozen=True)
class CopyOp:
    source: BufferRange
    target: BufferRange


@dataclass(frozen=True)
class UpdateOp:
    target: BufferRange
    data: bytes


@dataclass(frozen=True)
class BarrierOp:
    pass


Op = DispatchOp | DispatchIndirectOp | FillOp | CopyOp | UpdateOp | BarrierOp
AnyDispatch = DispatchOp | DispatchIndirectOp


@dataclass(frozen=True)
class DispatchEvent:
    """What ``VulkanDevice.submit(cb, observer=...)`` tells the HAL's one observer API
    (:class:`engine.runtime.hal.device.DispatchObserver`) before and after one dispatch runs: its
    ``before_dispatch(event)``/``after_dispatch(event)`` run while the device is idle, so they may read any
    buffer (``device.read``/``device.read_binding``); an optional ``wants(index, op)`` picks the dispatches
    to stop at, the others run batched."""

    phase: str  # "before" or "after"
    index: int  # the dispatch's position among the command buffer's dispatches
    op: AnyDispatch


def _u32_words(constants: Sequence[int] | np.ndarray, what: str) -> tuple[int, ...]:
    words = []
    for c in np.asarray(constants).reshape(-1).tolist() if isinstance(constants, np.ndarray) else constants:
        c = int(c)
        if not -(2**31) <= c < 2**32:
            raise HalError(f"{what}: constant {c} does not fit in 32 bits")
        words.append(c & 0xFFFFFFFF)
    return tuple(words)


class VulkanCommandBuffer:
    """Records commands for one submission. ``begin`` → commands → ``end``; then ``device.submit``."""

    def __init__(self, label: str = ""):
        self.label = label
        self.ops: list[Op] = []
        self.state = "initial"  # initial → recording → executable

    @property
    def dispatch_count(self) -> int:
        return sum(isinstance(op, (DispatchOp, DispatchIndirectOp)) for op in self.ops)

    def begin(self) -> None:
        if self.state == "recording":
            raise HalError("command buffer is already recording")
        self.ops = []
        self.state = "recording"

    def end(self) -> None:
        self._check_recording("end")
        self.state = "executable"

    def _check_recording(self, what: str) -> None:
        if self.state != "recording":
            raise HalError(
                f"{what}: command buffer is not recording (state {self.state}); call begin() first"
            )

    def _check_dispatch(self, pipeline: VulkanPipeline, constants, bindings, what: str):
        words = _u32_words(constants, what)
        if 4 * len(words) > pipeline.push_constant_bytes:
            raise HalError(
                f"{what}: {len(words)} constants ({4 * len(words)} bytes) but {pipeline.entry_point} "
                f"declares {pipeline.push_constant_bytes} bytes of push constants"
            )
        ranges = tuple(as_range(b, f"{what} binding {i}") for i, b in enumerate(bindings))
        if len(ranges) < pipeline.binding_count:
            raise HalError(
                f"{what}: {pipeline.entry_point} needs {pipeline.binding_count} bindings, got {len(ranges)}"
            )
        return words, ranges

    def dispatch(
        self,
        pipeline: VulkanPipeline,
        workgroup_count: Sequence[int],
        constants: Sequence[int] | np.ndarray = (),
        bindings: Sequence[BindingLike] = (),
    ) -> None:
        """Dispatch ``pipeline`` over ``workgroup_count`` (x, y, z) workgroups. HAL binding i is
        descriptor i of the pipeline's layout; ``constants`` are 32-bit words (push constants)."""
        self._check_recording("dispatch")
        counts = tuple(int(c) for c in workgroup_count)
        if len(counts) != 3 or min(counts) < 0:
            raise HalError(f"dispatch: workgroup count must be three non-negative integers, got {counts}")
        limit = pipeline.executable.device.info.max_compute_workgroup_count
        if any(c > m for c, m in zip(counts, limit)):
            raise HalError(f"dispatch: workgroup count {counts} exceeds the device's limit {limit}")
        words, ranges = self._check_dispatch(pipeline, constants, bindings, "dispatch")
        self.ops.append(DispatchOp(pipeline, counts, words, ranges))

    def dispatch_indirect(
        self,
        pipeline: VulkanPipeline,
        workgroup_count: BindingLike,
        constants: Sequence[int] | np.ndarray = (),
        bindings: Sequence[BindingLike] = (),
    ) -> None:
        """Like :meth:`dispatch`, the workgroup count read at execution time from three uint32 in a buffer."""
        self._check_recording("dispatch_indirect")
        wc = workgroup_count if isinstance(workgroup_count, BufferRange) else BufferRange(*workgroup_count)
        wc = BufferRange(wc.buffer, wc.offset, 12)
        wc.validate("dispatch_indirect workgroup count")
        if wc.offset % 4:
            raise HalError(f"dispatch_indirect: workgroup count offset {wc.offset} is not 4-byte aligned")
        words, ranges = self._check_dispatch(pipeline, constants, bindings, "dispatch_indirect")
        self.ops.append(DispatchIndirectOp(pipeline, wc, words, ranges))

    def fill(self, target: BindingLike, pattern: bytes | int, pattern_length: int = 4) -> None:
        """Fill ``target`` with a repeated 1-, 2- or 4-byte pattern (an int is little endian)."""
        self._check_recording("fill")
        if isinstance(pattern, int):
            pattern = (pattern & ((1 << (8 * pattern_length)) - 1)).to_bytes(pattern_length, "little")
        pattern = bytes(pattern)
        if len(pattern) not in (1, 2, 4):
            raise HalError(f"fill: pattern must be 1, 2 or 4 bytes, got {len(pattern)}")
        r = as_range(target, "fill")
        if r.byte_length % len(pattern):
            raise HalError(
                f"fill: length {r.byte_length} is not a multiple of the {len(pattern)}-byte pattern"
            )
        self.ops.append(FillOp(r, pattern))

    def copy(self, source: BindingLike, target: BindingLike) -> None:
        """Copy ``source`` into ``target`` (equal lengths; a ``None`` length takes the other's)."""
        self._check_recording("copy")
        s = source if isinstance(source, BufferRange) else BufferRange(*source)
        t = target if isinstance(target, BufferRange) else BufferRange(*target)
        if s.length is None and t.length is not None:
            s = BufferRange(s.buffer, s.offset, t.length)
        if t.length is None:
            t = BufferRange(t.buffer, t.offset, s.byte_length)
        s.validate("copy source")
        t.validate("copy target")
        if s.byte_length != t.byte_length:
            raise HalError(f"copy: source length {s.byte_length} != target length {t.byte_length}")
        self.ops.append(CopyOp(s, t))

    def update(self, target: BindingLike, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        """Write host ``data`` into ``target`` when the command executes (the bytes are captured now)."""
        self._check_recording("update")
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        t = target if isinstance(target, BufferRange) else BufferRange(*target)
        t = BufferRange(t.buffer, t.offset, len(raw) if t.length is None else t.length)
        t.validate("update")
        if t.byte_length != len(raw):
            raise HalError(f"update: {len(raw)} bytes of data for a {t.byte_length}-byte range")
        self.ops.append(UpdateOp(t, raw))

    def execution_barrier(self) -> None:
        """Make every earlier dispatch/transfer's writes visible to every later command."""
        self._check_recording("execution_barrier")
        self.ops.append(BarrierOp())
