"""One compilation: everything a compile job produced, as plain data over the files in its folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.compiler.diagnostics import Diagnostic
from engine.compiler.executables import ExecutableArtifacts
from engine.compiler.phases import PhaseSnapshot
from engine.compiler.request import CompileRequest
from engine.compiler.timing import TimingReport
from engine.errors import CompileError


@dataclass(frozen=True)
class Replacement:
    """One executable replaced in a compilation.

    ``kind`` is ``binary`` (the bytes of the ``hal.executable.binary`` ops of executable ``executable``
    in the ``hal`` phase, swapped for the file ``path``) or ``source`` (IREE's
    ``--iree-hal-substitute-executable-source=<executable>=<path>``, an MLIR ``hal.executable``).
    """

    executable: str
    kind: str
    path: Path
    variant: str | None = None  # binary: which hal.executable.binary (None: the only one)


@dataclass(frozen=True)
class Compilation:
    """The result of one compile job (successful or not), stored under ``out_dir``.

    Layout of ``out_dir``: the phase snapshots with IREE's own names (``<module>.<N>.<phase>.mlir``),
    ``executables/{sources,configurations,intermediates,binaries}/``, ``timing.json`` (IREE's JSON as
    printed), ``<module>.vmfb``, ``stderr.txt`` (iree-compile's stderr without the timing report) and
    ``source/`` (the input file when the request's source was text, bytes or an edited snapshot).

    ``parent``/``resumed_from`` say where a compilation came from: an edited snapshot of ``parent`` at
    phase ``resumed_from``, or (with ``substitutions``) ``parent`` with executables replaced.
    """

    request: CompileRequest
    out_dir: Path
    module_name: str
    source_path: Path
    command: tuple[str, ...]
    returncode: int
    elapsed_s: float
    phases: tuple[PhaseSnapshot, ...]
    executables: tuple[ExecutableArtifacts, ...]
    timing: TimingReport | None
    diagnostics: tuple[Diagnostic, ...]
    vmfb_path: Path | None
    failed_executables: tuple[str, ...] = ()
    # When the compile failed inside executables: the errors located in those executables' own files
    # (``executables/failure/``), from a second compile with IREE's executable dumps.
    executable_diagnostics: tuple[Diagnostic, ...] = ()
    parent: Compilation | None = None
    resumed_from: str | None = None
    substitutions: tuple[Replacement, ...] = ()

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.vmfb_path is not None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    @property
    def crashed(self) -> bool:
        """iree-compile died from a signal (a compiler crash), as opposed to rejecting the program."""
        return self.returncode < 0

    def phase(self, name: str) -> PhaseSnapshot:
        for snapshot in self.phases:
            if snapshot.phase == name:
                return snapshot
        raise KeyError(f"compilation has no snapshot of phase {name!r}")

    def executable(self, name: str) -> ExecutableArtifacts:
        for executable in self.executables:
            if executable.name == name:
                return executable
        raise KeyError(f"compilation has no executable {name!r}")

    def vmfb_bytes(self) -> bytes:
        self.raise_if_failed()
        return Path(str(self.vmfb_path)).read_bytes()  # ok implies vmfb_path is set

    def stderr(self) -> str:
        path = self.out_dir / "stderr.txt"
        return path.read_text() if path.exists() else ""

    def raise_if_failed(self) -> None:
        """Raise ``CompileError`` (with the diagnostics) if the compiler did not produce a module."""
        if self.ok:
            return
        if self.crashed:
            message = f"iree-compile crashed (signal {-self.returncode})"
        else:
            message = f"iree-compile failed (exit code {self.returncode})"
        if self.errors:
            message += ": " + str(self.errors[0])
        if self.failed_executables:
            message += f" [failing executables: {', '.join(self.failed_executables)}]"
        raise CompileError(message, list(self.diagnostics))

    def lineage(self) -> list[Compilation]:
        """This compilation and its parents, nearest first."""
        chain: list[Compilation] = []
        node: Compilation | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain
