"""The ``check`` module for our VM: a ``NativeModule`` reading buffer views of our emulated HAL.

Buffer views are duck-typed (``element_type``, ``shape``, ``byte_length``, ``buffer.read_view``), so this
module depends on no HAL class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.runtime.check import expectations as ex
from engine.runtime.check.failures import CheckRecorder
from engine.runtime.check.imports import CHECK_MODULE_NAME
from engine.runtime.check.reference_module import CCONVS
from engine.runtime.vm.native import NativeModule, StatusCode, VmStatusError, export


def _operand(view: Any) -> ex.Operand:
    if view is None or getattr(view, "vm_type_name", None) != "hal.buffer_view":
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"expected a hal.buffer_view, got {view!r}")
    n = int(view.byte_length)
    raw = np.array(view.buffer.read_view(0, n), dtype=np.uint8, copy=True) if n else np.zeros(0, np.uint8)
    return ex.Operand.from_bytes(view.element_type, view.shape, raw)


class CheckModule(NativeModule):
    """``check`` for the debug engine; failures go to ``recorder`` and the call goes on."""

    name = CHECK_MODULE_NAME

    def __init__(self, recorder: CheckRecorder | None = None):
        super().__init__()
        self.recorder = recorder if recorder is not None else CheckRecorder()

    def _compare(self, expectation: str, compare, *args) -> None:
        try:
            self.recorder.record(expectation, compare(*args))
        except ex.CheckError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, str(e)) from None

    @export("expect_true", CCONVS["expect_true"])
    def expect_true(self, value: int) -> None:
        self._compare("expect_true", ex.expect_true, value)

    @export("expect_false", CCONVS["expect_false"])
    def expect_false(self, value: int) -> None:
        self._compare("expect_false", ex.expect_false, value)

    @export("expect_all_true", CCONVS["expect_all_true"])
    def expect_all_true(self, _device: Any, view: Any) -> None:
        self._compare("expect_all_true", ex.expect_all_true, _operand(view))

    @export("expect_eq", CCONVS["expect_eq"])
    def expect_eq(self, _device: Any, lhs: Any, rhs: Any) -> None:
        self._compare("expect_eq", ex.expect_eq, _operand(lhs), _operand(rhs))

    @export("expect_almost_eq", CCONVS["expect_almost_eq"])
    def expect_almost_eq(self, _device: Any, lhs: Any, rhs: Any, atol: float, rtol: float) -> None:
        self._compare("expect_almost_eq", ex.expect_almost_eq, _operand(lhs), _operand(rhs), atol, rtol)
