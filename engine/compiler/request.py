"""What a compile job is asked to do: an immutable request, turned into ``iree-compile`` flags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.compiler.naming import declared_module_name, read_head, stem_module_name
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
    return stem_module_name(name + ".mlir")


# IREE's flags that choose the devices and backends to compile for. When a request's extra flags hold
# one, they are the whole target choice: the request adds no target flags of its own (so the result is
# what ``iree-compile`` gives for the same flags, not a second device beside the default one).
TARGET_SELECTION_FLAGS: tuple[str, ...] = (
    "--iree-hal-target-device",
    "--iree-hal-target-devices",
    "--iree-hal-local-target-device-backends",
    "--iree-hal-target-backends",
)

# Which of our target names a device or backend flag value stands for (to label results and pick the
# runtime device); anything else stays "custom".
_TARGET_OF_VALUE = {
    "llvm-cpu": "llvm-cpu",
    "vmvx": "vmvx",
    "vulkan": "vulkan-spirv",
    "vulkan-spirv": "vulkan-spirv",
    "cuda": "cuda",
    "hip": "rocm",
    "rocm": "rocm",
    "metal": "metal-spirv",
    "metal-spirv": "metal-spirv",
}


def _flag_values(flags: tuple[str, ...], name: str) -> list[str]:
    values: list[str] = []
    for i, flag in enumerate(flags):
        if flag.startswith(name + "="):
            values += flag.split("=", 1)[1].split(",")
        elif flag == name and i + 1 < len(flags):
            values += flags[i + 1].split(",")
    return [v.strip().strip("'\"") for v in values if v.strip()]


def selects_target(flags: tuple[str, ...] | list[str]) -> bool:
    """Whether ``flags`` hold one of IREE's own device/backend selection flags."""
    return any(f == p or f.startswith(p + "=") for f in flags for p in TARGET_SELECTION_FLAGS)


def target_of_flags(flags: tuple[str, ...]) -> str:
    """Our name for the target IREE's selection flags choose (``custom`` when it is none of ours)."""
    backends = _flag_values(flags, "--iree-hal-local-target-device-backends") + _flag_values(
        flags, "--iree-hal-target-backends"
    )
    devices = [v.split("[", 1)[0].split("=", 1)[-1] for v in _flag_values(flags, "--iree-hal-target-device")]
    devices += _flag_values(flags, "--iree-hal-target-devices")
    chosen = {_TARGET_OF_VALUE.get(b, "custom") for b in backends}
    chosen |= {_TARGET_OF_VALUE.get(d, "custom") for d in devices if d != "local"}
    return chosen.pop() if len(chosen) == 1 else "custom"


def _looks_like_mlir_text(text: str) -> bool:
    return "\n" in text or "{" in text or text.lstrip().startswith(("module", "func.func", "util.func"))


@dataclass(frozen=True)
class CompileRequest:
    """One compile job, immutable so it can cross threads and be replayed.

    The program is either a file, ``source_path`` (a ``.mlir``/``.mlirbc``; ``CompileRequest.from_file``),
    or in memory, ``source_text`` (MLIR text as ``str`` or bytecode as ``bytes``;
    ``CompileRequest.from_text``); exactly one of them. A ``str`` given as ``source_path`` is a path, never
    MLIR: one that looks like MLIR is refused rather than compiled as a file name.
    ``name`` is the module name for in-memory sources (and renames an unnamed file's module); IREE names the
    phase snapshots, executables and the module itself after the module (see ``engine.compiler.naming``).
    ``target`` is a key of ``TARGETS`` or ``COMPILE_ONLY_TARGETS``; ``target_cpu`` replaces llvm-cpu's
    ``--iree-llvmcpu-target-cpu`` (``host`` by default). When ``extra_flags`` hold IREE's own target
    selection flags (``--iree-hal-target-device=...`` and the like), they replace the target's flags and
    ``target`` becomes what they select (``custom`` if none of ours).
    ``type_conversions`` are names from ``TYPE_CONVERSIONS`` (``demote-f32-to-f16`` → ``--iree-input-demote-f32-to-f16``).
    ``extra_flags`` are passed to iree-compile verbatim, after everything else.
    ``compile_from``/``compile_to`` are IREE's ``--compile-from``/``--compile-to`` phases.
    """

    source_path: Path | None = None
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
    source_text: str | bytes | None = None
    # The folder the compiler runs in, given ``source_path`` relative to it: IREE records the path as given
    # in the kernels' debug information, so rebuilding a module compiled as ``iree-compile model.mlir`` must
    # name it so to give the same bytes.
    named_in: Path | None = None

    @classmethod
    def from_file(cls, path: Path | str, **options) -> CompileRequest:
        return cls(source_path=Path(path), **options)

    @classmethod
    def from_text(cls, text: str | bytes, **options) -> CompileRequest:
        return cls(source_text=text, **options)

    def __post_init__(self) -> None:
        if (self.source_path is None) == (self.source_text is None):
            raise TypeError("give exactly one of source_path (a file) and source_text (MLIR text or bytecode)")
        if self.source_path is not None:
            if isinstance(self.source_path, str):
                if _looks_like_mlir_text(self.source_path):
                    raise TypeError("source_path is a file name; pass MLIR text as source_text=")
                object.__setattr__(self, "source_path", Path(self.source_path))
            elif not isinstance(self.source_path, Path):
                raise TypeError("source_path must be a Path (or a path as str)")
        elif not isinstance(self.source_text, (str, bytes)):
            raise TypeError("source_text must be MLIR text (str) or MLIR bytecode (bytes)")
        object.__setattr__(self, "extra_flags", tuple(self.extra_flags))
        if selects_target(self.extra_flags):
            if self.target_cpu is not None:
                raise ValueError(
                    "the target CPU (--target-cpu, target_cpu) cannot be combined with IREE's own target flags; "
                    "give IREE's --iree-llvmcpu-target-cpu=... with them"
                )
            object.__setattr__(self, "target", target_of_flags(self.extra_flags))
        else:
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
        if self.source_path is not None and not self.source_path.is_file():
            raise FileNotFoundError(f"no such source file: {self.source_path}")
        if self.named_in is not None:
            if self.source_path is None or self.name is not None:
                raise ValueError("named_in applies to a source file compiled under its own name")
            object.__setattr__(self, "named_in", Path(self.named_in).absolute())
            object.__setattr__(self, "source_path", self.source_path.absolute())
            if not self.source_path.is_relative_to(self.named_in):
                raise ValueError(f"{self.source_path} is not inside {self.named_in}")
        for flag in self.extra_flags:
            if any(flag == p or flag.startswith(p + "=") for p in _RESERVED_FLAG_PREFIXES):
                raise ValueError(
                    f"{flag!r}: IREE Lens sets this flag itself (it chooses the output file, the dump folders "
                    "and the phases compiled)"
                )

    @property
    def source(self) -> Path | str | bytes:
        """The program: the file's ``Path``, or the in-memory text or bytecode."""
        return self.source_path if self.source_path is not None else self.source_text

    @property
    def targets_from_flags(self) -> bool:
        """True when IREE's own selection flags in ``extra_flags`` choose the target."""
        return selects_target(self.extra_flags)

    @property
    def module_name(self) -> str:
        """The name IREE gives the compiled module (and so its snapshots): the source's ``module @name``
        when it declares one, else the file's stem (or ``name``)."""
        if self.source_path is not None:
            head = read_head(self.source_path)
        else:
            head = self.source_text if isinstance(self.source_text, str) else None
        declared = declared_module_name(head) if head is not None else None
        if declared:
            return declared
        if self.source_path is not None and self.name is None:
            return stem_module_name(self.source_path.name)
        return module_name_for(self.name or "module")

    def compiler_flags(self) -> list[str]:
        """The flags that select the target and options (no input, output or dump flags)."""
        flags = [] if self.targets_from_flags else list(find_target(self.target).flags)
        if self.target_cpu is not None:
            if self.target != "llvm-cpu":
                raise ValueError(f"the target CPU (--target-cpu, target_cpu) applies to llvm-cpu only, not {self.target}")
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
