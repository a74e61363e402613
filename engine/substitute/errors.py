"""Errors of executable substitution (each names the executable or file and says what is wrong)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import LensError


@dataclass(frozen=True)
class SourceDiagnostic:
    """One compiler message at a line of the edited file (1-based; 0 when the tool gave none)."""

    path: str
    line: int
    column: int
    severity: str  # error, warning, note
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}" if self.line else self.path
        return f"{where}: {self.severity}: {self.message}"


class SubstitutionError(LensError):
    """A substitution cannot be made: unknown name, unsupported file or format, or a tool failed."""


class EditCompileError(SubstitutionError):
    """The edited file does not compile; ``diagnostics`` hold the messages at their lines."""

    def __init__(self, path: str, diagnostics: list[SourceDiagnostic], tool_output: str = ""):
        self.path = path
        self.diagnostics = list(diagnostics)
        self.tool_output = tool_output
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        if first is not None:
            text = str(first)
        else:
            text = f"{path}: does not compile: {tool_output.strip().splitlines()[-1] if tool_output.strip() else 'no message'}"
        super().__init__(text)


class InterfaceMismatchError(SubstitutionError):
    """The replacement does not take what the module passes (bindings, constants, export names)."""


def plain_error(error: Exception) -> dict:
    """An error as plain data for a session's ``Answer``/``Failed`` event (these exceptions do not pickle)."""
    diagnostics = [
        {"path": d.path, "line": d.line, "column": d.column, "severity": d.severity, "message": d.message}
        for d in getattr(error, "diagnostics", ())
        if isinstance(d, SourceDiagnostic)
    ]
    kind = (
        "compile"
        if isinstance(error, EditCompileError)
        else "interface"
        if isinstance(error, InterfaceMismatchError)
        else "substitution"
    )
    return {"kind": kind, "message": str(error), "diagnostics": diagnostics}
