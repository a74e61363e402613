"""The ``check`` module for IREE's runtime (``iree.runtime``), written in Python with ``PyModuleInterface``.

Used by ``ReferenceRunner(..., extra_modules=[reference_check_module(recorder)])``: the factory is called with
the runner's VM instance and HAL device, which the module needs to copy device-local buffers to the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from engine.runtime.check import expectations as ex
from engine.runtime.check.failures import CheckRecorder
from engine.runtime.check.imports import CHECK_MODULE_NAME

# The imports' calling conventions as iree-compile 3.13 declares them (check.imports.mlir).
CCONVS = {
    "expect_true": "0i_v",
    "expect_false": "0i_v",
    "expect_all_true": "0rr_v",
    "expect_eq": "0rrr_v",
    "expect_almost_eq": "0rrrff_v",
}


def _host_bytes(rt, device, view) -> np.ndarray:
    """The view's ``byte_length`` bytes, mapped when the buffer allows it, else copied through staging memory
    (the check module's ``TransferBuffersToHost``)."""
    n = int(view.byte_length)
    if n == 0:
        return np.zeros(0, dtype=np.uint8)
    buffer = view.get_buffer()
    visible = int(rt.MemoryType.HOST_VISIBLE)
    scoped = int(rt.BufferUsage.MAPPING_SCOPED)
    if int(buffer.memory_type()) & visible == visible and int(buffer.allowed_usage()) & scoped == scoped:
        return np.array(view.map().asarray([n], np.dtype(np.uint8)), copy=True)
    size = int(buffer.byte_length())
    staging = device.allocator.allocate_buffer(
        memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,
        allowed_usage=rt.BufferUsage.TRANSFER | rt.BufferUsage.MAPPING,
        allocation_size=size,
    )
    semaphore = device.create_semaphore(0)
    device.queue_copy(buffer, staging, [(semaphore, 0)], [(semaphore, 1)])
    semaphore.wait(1)
    return np.array(staging.map().asarray([size], np.dtype(np.uint8))[:n], copy=True)


def reference_check_module(recorder: CheckRecorder) -> Callable[[Any, Any], Any]:
    """A factory ``f(instance, device) -> module`` of IREE-runtime ``check`` modules reporting to ``recorder``.

    A failed expectation is recorded and the call goes on; an operand the check cannot compare raises
    (IREE's runtime turns it into a failed call).
    """
    import iree.runtime as rt

    def factory(instance, device):
        def operand(ref) -> ex.Operand:
            view = ref.deref(rt.HalBufferView)
            if view is None:
                raise ex.CheckError("expected a hal.buffer_view, got a null reference")
            return ex.Operand.from_bytes(
                int(view.element_type), tuple(view.shape), _host_bytes(rt, device, view)
            )

        class Check:
            def __init__(self, _iface):
                pass  # no reference back to the interface: a cycle would outlive the runtime at exit

            def expect_true(self, value):
                recorder.record("expect_true", ex.expect_true(value))

            def expect_false(self, value):
                recorder.record("expect_false", ex.expect_false(value))

            def expect_all_true(self, _device, view):
                recorder.record("expect_all_true", ex.expect_all_true(operand(view)))

            def expect_eq(self, _device, lhs, rhs):
                recorder.record("expect_eq", ex.expect_eq(operand(lhs), operand(rhs)))

            def expect_almost_eq(self, _device, lhs, rhs, atol, rtol):
                recorder.record(
                    "expect_almost_eq", ex.expect_almost_eq(operand(lhs), operand(rhs), atol, rtol)
                )

        iface = rt.PyModuleInterface(CHECK_MODULE_NAME, Check)
        for name, cconv in CCONVS.items():
            iface.export(name, cconv, getattr(Check, name))
        # The interface must live as long as the module it creates; the factory keeps it, so whoever holds
        # the factory (and the runner) decides, and nothing global survives into interpreter teardown.
        factory.interfaces.append(iface)
        return iface.create()

    factory.interfaces = []
    return factory
