"""IREE's ``check`` module (the expectations of IREE's e2e tests) for both engines.

``expectations`` holds the comparisons as pure functions over plain data; ``reference_check_module`` adapts
them to IREE's runtime and ``CheckModule`` to our VM. Both report failed expectations to a ``CheckRecorder``
and let the program go on; the caller reports them after the call.
"""

from engine.runtime.check.expectations import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    CheckError,
    Operand,
    expect_all_true,
    expect_almost_eq,
    expect_eq,
    expect_false,
    expect_true,
    format_operand,
)
from engine.runtime.check.failures import CheckFailure, CheckRecorder
from engine.runtime.check.imports import CHECK_MODULE_NAME, imports_check_module


def reference_check_module(recorder: CheckRecorder):
    """See ``engine.runtime.check.reference_module`` (imports ``iree.runtime`` only when called)."""
    from engine.runtime.check.reference_module import reference_check_module as factory

    return factory(recorder)


def __getattr__(name: str):
    # The VM adapter is imported on first use, so the pure comparisons load without the VM.
    if name == "CheckModule":
        from engine.runtime.check.debug_module import CheckModule

        return CheckModule
    raise AttributeError(name)


__all__ = [
    "CHECK_MODULE_NAME",
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "CheckError",
    "CheckFailure",
    "CheckModule",
    "CheckRecorder",
    "Operand",
    "expect_all_true",
    "expect_almost_eq",
    "expect_eq",
    "expect_false",
    "expect_true",
    "format_operand",
    "imports_check_module",
    "reference_check_module",
]
