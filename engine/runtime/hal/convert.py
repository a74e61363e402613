"""numpy arrays in and out of HAL buffer views, as the run commands pass inputs and read results.

Inputs are copied into a new device allocation, like ``iree.runtime``'s ``allocate_buffer_copy`` with
DEVICE_LOCAL memory and the default usage, so the program sees the same memory type and usage bits
(``hal.buffer.assert``) in both engines. Results are read back zero-copy or as a copy.
"""

from __future__ import annotations

import numpy as np

from engine.runtime import element_types as et
from engine.runtime.function_io import Tensor
from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import HalBufferView
from engine.runtime.hal.device import Device


def buffer_view_from_numpy(
    device: Device,
    array: np.ndarray,
    element_type: int | et.ElementType | None = None,
    *,
    memory_type: int = c.MEMORY_TYPE_DEVICE_LOCAL,
    usage: int = c.BUFFER_USAGE_DEFAULT,
) -> HalBufferView:
    """A new buffer view on ``device`` holding a copy of ``array`` (row-major).

    ``element_type`` defaults to the type IREE's tools give the dtype (signless integers, ``i1`` for bool).
    """
    array = np.asarray(array)
    if not array.flags.c_contiguous:
        array = array.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    if element_type is None:
        code = et.element_type_for_dtype(array.dtype).code
    else:
        code = element_type.code if isinstance(element_type, et.ElementType) else int(element_type)
    raw = array.reshape(-1).view(np.uint8) if array.size else np.zeros(0, dtype=np.uint8)
    buffer = device.allocator.allocate(memory_type, usage, raw.nbytes, origin="input")
    buffer.write_view(0, raw.nbytes)[:] = raw
    return HalBufferView(buffer, tuple(array.shape), code, c.ENCODING_TYPE_DENSE_ROW_MAJOR)


def buffer_view_to_numpy(view: HalBufferView, *, copy: bool = True) -> np.ndarray:
    """The view's contents as an array of its dtype and shape; ``copy=False`` gives a view of the memory."""
    array = view.to_numpy()
    return np.array(array, copy=True) if copy else array


def buffer_view_from_tensor(device: Device, tensor: Tensor) -> HalBufferView:
    """A ``function_io.Tensor`` (a parsed ``--input``) as a buffer view on ``device``."""
    return buffer_view_from_numpy(device, tensor.array, tensor.element_type)


def tensor_from_buffer_view(view: HalBufferView) -> Tensor:
    """A copy of the view's contents as a ``function_io.Tensor`` (what both engines print and compare)."""
    return Tensor(buffer_view_to_numpy(view, copy=True), et.ElementType(view.element_type))
