"""Drives IREE's compiler: phase snapshots, pass timing, executables, diagnostics, resume, substitution.

The public API, all plain Python (no Qt):

* ``CompileRequest`` (immutable) → ``compile_program(request, out_dir=, task=, timeout_s=)`` → ``Compilation``
* ``resume_from_phase(parent, phase, text)`` → a ``Compilation`` with ``parent``/``resumed_from``
* ``ExecutableSubstitutions(base)`` (replacement map, ``revert``) / ``substitute_executables(base, replacements)``
* ``TaskState`` (cancel + progress callback receiving ``Progress``)
"""

from engine.compiler.compilation import Compilation, Replacement
from engine.compiler.diagnostics import Diagnostic, parse_diagnostics
from engine.compiler.executables import ExecutableArtifacts
from engine.compiler.job import compile_program, load_compilation
from engine.compiler.phases import PHASES, PhaseSnapshot
from engine.compiler.request import TYPE_CONVERSIONS, CompileRequest
from engine.compiler.resume import resume_from_phase
from engine.compiler.substitution import (
    ExecutableSubstitutions,
    HalBinary,
    hal_binaries,
    replace_hal_binary,
    substitute_executables,
)
from engine.compiler.task import Progress, TaskState
from engine.compiler.timing import PassTiming, TimingReport

__all__ = [
    "PHASES",
    "TYPE_CONVERSIONS",
    "Compilation",
    "CompileRequest",
    "Diagnostic",
    "ExecutableArtifacts",
    "ExecutableSubstitutions",
    "HalBinary",
    "PassTiming",
    "PhaseSnapshot",
    "Progress",
    "Replacement",
    "TaskState",
    "TimingReport",
    "compile_program",
    "hal_binaries",
    "load_compilation",
    "parse_diagnostics",
    "replace_hal_binary",
    "resume_from_phase",
    "substitute_executables",
]
