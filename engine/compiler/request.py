"""What a compile job is asked to do: an immutable request, turned into ``iree-compile`` flags."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.compiler.phases import COMPILE_FROM_PHASES, COMPILE_TO_PHASES
from engine.compiler.targets import find_target

# IREE's input type conversions: each name X is the flag --iree-input-X.
TYPE_CONVERSIONS: tuple[str, ...] = (
    "demote-f32-to-f16",
    "demote-f64-to-f32",
    "demote-i64-to-i32",
    "promote-f16-to-f32",
    "promote-bf16-to-f32",
)

# Flags the job sets itself; a request carrying them would break the capture of its results.
_RESERVED_FLAG_PREFIXES = (
    "--dump-compilation-phases-to",
    "--iree-hal-dump-executable-sources-to",
    "--iree-hal-dump-executable-configurations-to",
    "--iree-hal-dump-executable-intermediates-to",
    "--iree-hal-dump-executable-binaries-to",
    "--mlir-output-format",
    "--compile-from",
    "--compile-to",
    "-o",
    "--output-file",
)


def module_name_for(name: str) -> str:
    """A module name IREE keeps as it is (it turns other characters of a file stem into ``_``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name) or "module"
    return cleaned if not cleaned[0].isdigit() else f"m_{cleaned}"


@dataclass(frozen=True)
class CompileRequest:
    """One compile job, immutable so it can cross threads and be replayed.

    ``source`` is a path to a ``.mlir``/``.mlirbc`` file, MLIR text (``str``) or MLIR bytecode (``bytes``).
    ``name`` is the module name for text and bytecode sources (a file's stem otherwise); IREE names the
    phase snapshots, executables and the module itself after it.
    ``target`` is a key of ``TARGETS`` or ``COMPILE_ONLY_TARGETS``; ``target_cpu`` replaces llvm-cpu's
    ``--iree-llvmcpu-target-cpu`` (``host`` by default).
    ``type_conversions`` are names from ``TYPE_CONVERSIONS`` (``demote-f32-to-f16`` → ``--iree-input-demote-f32-to-f16``).
    ``extra_flags`` are passed to iree-compile verbatim, after everything else.
    ``compile_from``/``compile_to`` are IREE's ``--compile-from``/``--compile-to`` phases.
    """

    source: Path | str | bytes
    name: str | None = None
    target: str = "llvm-cpu"
    target_cpu: str | None = None
    type_conversions: tuple[str, ...] = ()
    trace_dispatch_tensors: bool = False
    extra_flags: tuple[str, ...] = ()
    compile_from: str | None = None
    compile_to: str | None = None
    dump_executables: bool = True
    timing: bool = True

    def __post_init__(self) -> None:
        find_target(self.target)  # raises ValueError for an unknown target
        for conversion in self.type_conversions:
            if conversion not in TYPE_CONVERSIONS:
                raise ValueError(
                    f"unknown type conversion {conversion!r}; known: {', '.join(TYPE_CONVERSIONS)}"
                )
        if self.compile_from is not None and self.compile_from not in COMPILE_FROM_PHASES:
            raise ValueError(f"unknown --compile-from phase {self.compile_from!r}")
        if self.compile_to is not None and self.compile_to not in COMPILE_TO_PHASES:
            raise ValueError(f"unknown --compile-to phase {self.compile_to!r}")
        if not isinstance(self.source, (Path, str, bytes)):
            raise TypeError("source must be a Path, MLIR text (str) or MLIR bytecode (bytes)")
        if isinstance(self.source, Path) and not self.source.is_file():
            raise FileNotFoundError(f"no such source file: {self.source}")
        for flag in self.extra_flags:
            if any(flag == p or flag.startswith(p + "=") for p in _RESERVED_FLAG_PREFIXES):
                raise ValueError(f"{flag!r} is set by the compile job itself; use the request's fields")

    @property
    def module_name(self) -> str:
        if isinstance(self.source, Path) and self.name is None:
            return module_name_for(self.source.name.split(".")[0])
        return module_name_for(self.name or "module")

    def compiler_flags(self) -> list[str]:
        """The flags that select the target and options (no input, output or dump flags)."""
        flags = list(find_target(self.target).flags)
        if self.target_cpu is not None:
            if self.target != "llvm-cpu":
                raise ValueError(f"target_cpu applies to llvm-cpu only, not {self.target}")
            flags = [f for f in flags if not f.startswith("--iree-llvmcpu-target-cpu=")]
            flags.append(f"--iree-llvmcpu-target-cpu={self.target_cpu}")
        flags += [f"--iree-input-{c}" for c in self.type_conversions]
        if self.trace_dispatch_tensors:
            flags.append("--iree-flow-trace-dispatch-tensors")
        if self.compile_from:
            flags.append(f"--compile-from={self.compile_from}")
        if self.compile_to:
            flags.append(f"--compile-to={self.compile_to}")
        flags += list(self.extra_flags)
        return flags
