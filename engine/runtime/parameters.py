"""Parameter archives: the weights a program compiled with external parameters loads at run time.

A program whose globals are ``#flow.parameter.named<"scope"::"key">`` (iree-turbine's externalized weights,
sharktank's models) imports the ``io_parameters`` module and asks it for each key of a scope. The archives
are given as iree-run-module takes them, ``--parameters=[SCOPE=]FILE`` (repeatable; several files of one
scope form one index; no scope is the anonymous scope ""), in IREE's formats (``.irpa``, ``.gguf``,
``.safetensors``), read by IREE's own index (``iree.runtime.ParameterIndex``: memory-mapped, nothing
copied). The debug engine's ``io_parameters`` (``engine.runtime.hal.parameters_module``) and IREE's, for
the reference engine (``io_parameters_module``), serve the same archives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import LensError

IO_PARAMETERS = "io_parameters"
NO_ARCHIVE = "no archive was given for scope"  # said when the program loads from a scope none was given for


class ParameterError(LensError):
    """An archive that cannot be read, or a parameter the program asks for that no archive holds."""


class SpanTableError(LensError):
    """An io_parameters call's key table, key data or spans that do not fit together (IREE's messages);
    ``out_of_range``: a key runs past the key data (IREE's OUT_OF_RANGE), else a table too short for the
    spans (INVALID_ARGUMENT)."""

    def __init__(self, message: str, out_of_range: bool = False):
        super().__init__(message)
        self.out_of_range = out_of_range


_STRING_ENTRY = np.dtype([("offset", "<u4"), ("length", "<u4")])
_SPAN_ENTRY = np.dtype([("parameter_offset", "<u8"), ("buffer_offset", "<u8"), ("length", "<u8")])


def named_spans(key_table: bytes, key_data: bytes, spans: bytes) -> list[tuple[str, int, int, int]]:
    """(key, parameter offset, buffer offset, length) of each span of an ``io_parameters`` call, as IREE's
    ``iree_io_parameters_prepare_indirect_args`` reads them: ``key_table`` holds ``{u32 offset, u32 length}``
    per parameter into the ``key_data`` string bytes, ``spans`` holds ``{u64 parameter_offset, u64
    buffer_offset, u64 length}`` (their count is its length over 24). ``SpanTableError`` when they do not fit."""
    if len(spans) % _SPAN_ENTRY.itemsize:
        raise SpanTableError("buffer span storage must be aligned to iree_io_parameters_span_entry_t")
    count = len(spans) // _SPAN_ENTRY.itemsize
    if len(key_table) < count * _STRING_ENTRY.itemsize:
        raise SpanTableError("key string table must have enough data to service all defined spans")
    keys = np.frombuffer(key_table[: count * _STRING_ENTRY.itemsize], _STRING_ENTRY)
    found = []
    for key, span in zip(keys, np.frombuffer(spans, _SPAN_ENTRY)):
        start, length = int(key["offset"]), int(key["length"])
        if start + length > len(key_data):
            raise SpanTableError(f"attempted to access an address outside of the valid buffer range (offset={start}, "
                                 f"length={length}, data_capacity={len(key_data)})", out_of_range=True)  # fmt: skip
        found.append((key_data[start : start + length].decode("utf-8", errors="replace"),
                      int(span["parameter_offset"]), int(span["buffer_offset"]), int(span["length"])))  # fmt: skip
    return found


@dataclass(frozen=True)
class ParameterSpec:
    """One ``--parameters=[SCOPE=]FILE``."""

    scope: str
    path: str

    @classmethod
    def parse(cls, text: str) -> ParameterSpec:
        scope, sep, path = text.partition("=")
        return cls(scope, path) if sep else cls("", text)

    def __str__(self) -> str:
        return f"{self.scope}={self.path}" if self.scope else self.path


@dataclass
class ParameterArchives:
    """The archives of a run, by scope: ``bytes_of(scope, key)`` for the debug engine, ``providers`` for IREE's."""

    specs: tuple[ParameterSpec, ...] = ()
    indices: dict[str, Any] = field(default_factory=dict)  # scope -> iree.runtime.ParameterIndex
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # scope -> key -> ParameterIndexEntry

    @classmethod
    def open_given(cls, specs) -> ParameterArchives | None:
        """``open(specs)``, or None when none is given (a runner then registers io_parameters only for a
        program that imports it, which then names the scope it wants)."""
        return cls.open(specs) if specs else None

    @classmethod
    def open(cls, specs: list[str] | tuple[str, ...] | tuple[ParameterSpec, ...]) -> ParameterArchives:
        """The archives ``specs`` name (``[SCOPE=]FILE`` texts or ``ParameterSpec``); ``ParameterError`` naming
        the file when one does not exist or IREE cannot read it."""
        parsed = tuple(s if isinstance(s, ParameterSpec) else ParameterSpec.parse(s) for s in specs)
        archives = cls(parsed)
        if not parsed:
            return archives
        import iree.runtime as rt

        for spec in parsed:
            if not Path(spec.path).is_file():
                raise ParameterError(f"--parameters={spec}: no such file: {spec.path}")
            index = archives.indices.get(spec.scope)
            if index is None:
                index = archives.indices[spec.scope] = rt.ParameterIndex()
            try:
                index.load(spec.path)
            except (RuntimeError, ValueError) as e:
                raise ParameterError(f"--parameters={spec}: IREE cannot read {spec.path} as a parameter archive "
                                     f"(.irpa, .gguf, .safetensors): {e}") from None  # fmt: skip
        for scope, index in archives.indices.items():
            archives.entries[scope] = dict(index.items())
        return archives

    def describe(self) -> str:
        return ", ".join(str(s) for s in self.specs) or "none"

    def bytes_of(self, scope: str, key: str, offset: int, length: int) -> np.ndarray:
        """``length`` bytes of parameter ``scope::key`` from ``offset`` (a splat's pattern repeated), as
        ``iree_io_parameter_provider`` reads them; ``ParameterError`` saying what is missing otherwise."""
        entry = self._entry(scope, key)
        if offset < 0 or length < 0 or offset + length > int(entry.length):
            raise ParameterError(f"parameter {_named(scope, key)} has {int(entry.length)} bytes; "
                                 f"{length} asked from byte {offset}")  # fmt: skip
        if entry.is_splat:
            pattern = np.frombuffer(entry.splat_pattern, np.uint8)
            start = offset % pattern.size
            return np.resize(np.roll(pattern, -start), length)
        return np.frombuffer(entry.file_view, np.uint8)[offset : offset + length]

    def _entry(self, scope: str, key: str):
        if scope not in self.entries:
            given = f"the archives given: {self.describe()}" if self.specs else "none was given"
            raise ParameterError(
                f"the program loads parameter {_named(scope, key)}, and {NO_ARCHIVE} {scope!r} "
                f"({given}): pass it as iree-run-module takes it, --parameters={scope + '=' if scope else ''}FILE "
                "(.irpa, .gguf, .safetensors)"
            )
        found = self.entries[scope].get(key)
        if found is None:
            keys = sorted(self.entries[scope])
            shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
            raise ParameterError(f"no parameter {key!r} in scope {scope!r} ({self.describe()}; its keys: {shown})")
        return found

    def io_parameters_module(self, instance) -> Any:
        """IREE's own ``io_parameters`` module serving these archives, for the reference engine."""
        import iree.runtime as rt

        providers = [index.create_provider(scope=scope) for scope, index in self.indices.items()]
        return rt.create_io_parameters_module(instance, *providers)


def _named(scope: str, key: str) -> str:
    return f'"{scope}"::"{key}"'


def imports_parameters(module) -> bool:
    """Whether a loaded ``VmfbModule`` (or anything with ``dependencies``) depends on ``io_parameters``."""
    return any(getattr(d, "name", None) == IO_PARAMETERS for d in getattr(module, "dependencies", ()) or ())


# The formats IREE's ParameterIndex reads, and how many files beside a program are opened to find its
# archives (a build folder, not a weights store: the search stays bounded).
ARCHIVE_SUFFIXES = (".irpa", ".gguf", ".safetensors")
MAX_ARCHIVES_BESIDE = 32


def archives_beside(module_path: str | Path, module) -> tuple[ParameterSpec, ...]:
    """For a program given no archives: for each scope its host code loads from, the one archive beside it
    that holds every key it loads there (as ``SCOPE=FILE``), so that model.vmfb runs with the model.irpa
    exported with it. A scope with no such archive, or several, gets none (its first load says what it
    wants); a program whose loads cannot be read gets none."""
    from engine.runtime.vmfb.parameter_loads import parameter_loads

    try:
        loads = parameter_loads(module)
    except LensError:
        return ()
    wanted: dict[str, set[str]] = {}
    for load in loads:
        if not load.resolved or load.scope is None:
            return ()  # a load it cannot name: which archive it needs is not known
        wanted.setdefault(load.scope, set()).update(key for key, _ in load.keys)
    if not wanted:
        return ()
    folder = Path(module_path).resolve().parent
    candidates = sorted(p for p in folder.iterdir() if p.suffix in ARCHIVE_SUFFIXES and p.is_file())
    import iree.runtime as rt

    held: dict[Path, set[str]] = {}
    for path in candidates[:MAX_ARCHIVES_BESIDE]:
        index = rt.ParameterIndex()
        try:
            index.load(str(path))
        except (RuntimeError, ValueError):
            continue  # not an archive IREE reads: not the program's
        held[path] = {key for key, _ in index.items()}
    found = []
    for scope, keys in sorted(wanted.items()):
        holding = [path for path, have in held.items() if keys <= have]
        if len(holding) == 1:
            found.append(ParameterSpec(scope, str(holding[0])))
    return tuple(found)


def given_or_beside(module_path: str | Path, module, given: ParameterArchives | None):
    """The archives a runner serves: ``given``, else for a program that loads weights those beside it
    (``archives_beside``: none for a program that loads none); with the specs found beside (``()`` when given
    or none), which the runner says."""
    if given is not None:
        return given, ()
    found = archives_beside(module_path, module)
    return (ParameterArchives.open(found) if found else None), found
