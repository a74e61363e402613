"""A dispatch's tensors, typed once from the best source there is, and labelled with that source.

A dispatch binds byte ranges; a user wants tensors. The one function here, ``dispatch_tensors``, cuts and
types a dispatch's bindings for every client (the debug session, which answers typed tensors; the capture
bundle; the CLI), from, in order of trust:

1. **the executables' sources** (``ExecutableSources``: the ``hal.executable`` dumps of
   ``--iree-hal-dump-executable-sources-to``, or IREE Lens's own compile output): each
   ``hal.interface.binding.subspan`` says where a tensor lies in its binding (a constant, or a push
   constant when IREE packs several tensors in one binding), its shape and element type, and whether the
   dispatch reads it, writes it or both. Provenance ``sources``.
2. **nothing**: each binding is exactly the byte range the dispatch binds, as bytes (``u8``), with the
   access seen (a binding whose bytes the dispatch changed was written, and read too, ``readwrite``, when
   it held what an earlier dispatch wrote; before it runs the access is unknown). Provenance ``untyped``. No shape is guessed (IREE's dispatch names give loop sizes, not
   operand shapes; a guess shown as the tensor is worse than none).

Inputs and outputs are told apart by access, never by position: what the dispatch reads is an input (its
bytes before the dispatch ran), what it writes an output (its bytes after); a tensor read and written in
place is both. Inputs and outputs are each in IREE's operand order (the order of the subspans in the
source), which is the order of IREE's own dispatch trace points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

import numpy as np

from engine.dispatch.tensor_types import (
    RAW,
    BindingInterface,
    TensorType,
    binding_interfaces,
    raw_type,
    resolve_offset,
    view_bytes,
)
from engine.errors import LensError


class Provenance(StrEnum):
    """Where a tensor's type came from."""

    SOURCES = "sources"  # the executable's source (hal.interface.binding.subspan)
    RUNTIME = "runtime"  # IREE's runtime typed it (a trace point's buffer view)
    UNTYPED = "untyped"  # exactly the bound bytes, no type claimed


class Role(StrEnum):
    INPUT = "input"  # read by the dispatch: its bytes before the dispatch ran
    OUTPUT = "output"  # written by the dispatch: its bytes after it ran
    BINDING = "binding"  # untyped and not run yet: whether the dispatch reads or writes it is unknown


@dataclass(frozen=True)
class TypedTensor:
    """One tensor of a dispatch: ``length`` bytes at ``offset`` of binding ``binding``, as ``type``.

    ``access`` is the binding's (``read``, ``write``, ``readwrite``, or ``unknown`` untyped before the
    dispatch ran); ``written`` says whether ``array`` holds the bytes after the dispatch ran (False for an
    output at a stop before it: what the memory held then, not the output). ``note`` says more about the
    provenance (the source file, why a source did not fit).
    """

    role: str
    position: int  # among the dispatch's inputs (or outputs), in IREE's operand order
    binding: int
    offset: int
    length: int
    access: str
    type: TensorType
    provenance: str
    array: np.ndarray = field(repr=False, compare=False)
    written: bool = True
    note: str = ""
    # The source's type where ``type`` is another view of the same bytes (``tensor_types.shown_instead``:
    # ``64x32xi4`` shown as its bytes, ``6xcomplex<f32>`` as 6x2xf32), else "".
    declared: str = ""

    @property
    def label(self) -> str:
        return f"{self.role} {self.position}"

    @property
    def binding_label(self) -> str:
        """The one label of a tensor everywhere (``binding_label``): ``binding 3, write, output 0``; no role
        when untyped."""
        typed = self.provenance != Provenance.UNTYPED
        return binding_label(self.binding, self.access, self.role if typed else None, self.position)


def binding_label(binding: int, access: str, role: str | None = None, position: int | None = None) -> str:
    """The one vocabulary for a dispatch's tensors and bindings, in every report (the window's paused
    dispatch, the divergence report, ``save-tensors``, NaN reports, DAP): the binding number as the dispatch
    binds it, its access, then its role among the dispatch's operands when the sources say it
    (``binding 3, write, output 0``); an untyped binding gets no role (never called an input or an output by
    guess): ``binding 3, write``, ``binding 3, access unknown`` before it ran."""
    text = f"binding {binding}, {access if access and access != 'unknown' else 'access unknown'}"
    if role in (Role.INPUT, Role.OUTPUT) and position is not None:
        text += f", {role} {position}"
    return text


# ------------------------------------------------------------------------------------------- sources


class SourcesError(LensError):
    """Executable sources named by the user cannot be read."""


@dataclass(frozen=True)
class ExecutableSources:
    """The executables' sources of one module: what each export's bindings hold (``interfaces``), where the
    sources were found (``origin``: given, beside, named by the module, rebuilt, none) and the folder or file (``path``)."""

    interfaces: dict[str, dict[int, BindingInterface]]
    origin: str = "none"
    path: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # export -> the source file that declares it
    note: str = ""  # how they were found, or why there are none
    folder: str | None = None  # a rebuild's compile folder (its phase snapshots are there too)

    @property
    def found(self) -> bool:
        return bool(self.interfaces)

    def describe(self) -> str:
        if not self.found:
            return "no executable sources: bindings are shown as their bytes" + (f" ({self.note})" if self.note else "")
        return f"executable sources {self.origin} ({self.path}): {len(self.interfaces)} exports"


NO_SOURCES = ExecutableSources({})
# Said of a dispatch whose source binds an element type not shown typed (``BindingInterface.unshown``): its
# sources are here, so no other sources would type it.
NOT_SHOWN_YET = "an element type IREE Lens does not show yet"


def shown_instead_note(binding: int, declared: str, shown: TensorType) -> str:
    """What is said of a tensor the source types as ``declared`` and IREE Lens shows as ``shown``, a view of
    the same bytes (``tensor_types.shown_instead``); it names NOT_SHOWN_YET, so every view says it."""
    if shown.element != RAW and "#" in declared:  # an encoding, laid out as the kernel's memref says
        return f"binding {binding} holds {declared}: shown as {shown}, the layout its encoding chose (its tiles)"
    if shown.element == RAW and "#" in declared:  # an encoding: IREE's own layout (data tiling), not the tensor's
        how = (f"the binding's {shown.byte_length} bytes from where it starts, in the layout its encoding chose "
               "(where it ends is not known here)")
    elif shown.element == RAW:
        how = f"its {shown.byte_length} bytes (packed, low bits first)"
    else:
        how = f"{shown}, its (real, imaginary) pairs"
    return f"binding {binding} holds {declared}, {NOT_SHOWN_YET}: shown as {how}"

# Where IREE Lens and people put a module's executable sources, relative to the .vmfb's folder: IREE Lens's
# compile output (<out>/executables/sources beside <out>/<module>.vmfb), then common dump folder names.
BESIDE = ("executables/sources", "{stem}.sources", "{stem}_sources", "sources", ".")
MAX_SOURCE_BYTES = 256 << 20  # a larger .mlir beside a module is a program, not an executable's source


def read_sources(paths: Sequence[str | Path], origin: str = "given") -> ExecutableSources:
    """The interfaces declared in ``paths``: ``hal.executable`` files, folders of them (the layout of
    ``--iree-hal-dump-executable-sources-to``: ``<module>_<executable>.mlir``; IREE Lens's compile output
    folder, whose sources are in ``executables/sources``), or a hal-phase snapshot. ``SourcesError`` when a
    path does not exist; files that declare no executable add nothing."""
    interfaces: dict[str, dict[int, BindingInterface]] = {}
    files: dict[str, str] = {}
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise SourcesError(f"executable sources {path} do not exist")
        if path.is_dir():
            # IREE Lens's compile folder: its executables' sources; a folder of phase snapshots
            # (--dump-compilation-phases-to): the executable-sources phase, whose interfaces are the
            # dispatches' (later phases rewrite them); else every .mlir (IREE's dump of the sources).
            nested = path / "executables" / "sources"
            phase = sorted(path.glob("*.executable-sources.mlir"))
            found = sorted(nested.glob("*.mlir")) if nested.is_dir() else phase or sorted(path.glob("*.mlir"))
            # IREE's --iree-hal-dump-executable-files-to puts later forms of each executable in the same folder:
            # its configured source (read for encoded layouts, ``_with_materialized``) and a benchmark; the
            # executables' own sources are the others.
            found = [f for f in found if not f.name.startswith("configured_") and not f.name.endswith("_benchmark.mlir")]
        else:
            found = [path]
        for f in found:
            try:
                if f.stat().st_size > MAX_SOURCE_BYTES or not _binds_anything(f):
                    continue
                text = f.read_text(errors="replace")
            except OSError:
                continue
            for export, bindings in _with_materialized(binding_interfaces(text), f).items():
                interfaces[export] = bindings
                files[export] = str(f)
    label = ", ".join(str(p) for p in paths)
    return ExecutableSources(interfaces, origin if interfaces else "none", label, files)


def _with_materialized(found: dict[str, dict[int, BindingInterface]], source: Path) -> dict:
    """``found`` with the layout of each tensor it cannot show (an encoded one) read from the same executable's
    configured source, where the compile kept it (IREE's ``--iree-hal-dump-executable-configurations-to``,
    ``configured_<name>``: subspans as the kernel's memrefs)."""
    if not any(bi.unshown for bindings in found.values() for bi in bindings.values()):
        return found
    # IREE Lens's compile folder (executables/sources beside executables/configurations), or IREE's one folder
    # of --iree-hal-dump-executable-files-to.
    candidates = (source.parent.parent / "configurations" / f"configured_{source.name}",
                  source.parent / f"configured_{source.name}")  # fmt: skip
    configured = next((c for c in candidates if c.is_file()), None)
    try:
        later = binding_interfaces(configured.read_text(errors="replace")) if configured is not None else {}
    except OSError:
        return found
    out = {}
    for export, bindings in found.items():
        laid = later.get(export, {})
        out[export] = {
            index: (replace(bi, materialized=laid[index].tensors)
                    if bi.unshown and index in laid and len(laid[index].tensors) == len(bi.unshown) else bi)
            for index, bi in bindings.items()
        }  # fmt: skip
    return out


def _binds_anything(path: Path) -> bool:
    """Whether the file declares an interface binding (a program's own source does not): a byte search of
    the mapped file, so the program beside a module is not parsed at every open."""
    import mmap

    with open(path, "rb") as f:
        try:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(b"hal.interface.binding.subspan") >= 0
        except ValueError:  # an empty file cannot be mapped
            return False


def find_sources(module_path: str | Path, given: Sequence[str | Path] = ()) -> ExecutableSources:
    """The best executable sources for the module at ``module_path``: those ``given`` (``--sources``), else
    a sources folder beside the ``.vmfb`` (``BESIDE``; ``.``: ``hal.executable`` files in the module's own
    folder, as ``iree-lens sources`` writes them), else the dumped sources its exports are located in
    (``_files_named_by_exports``), else none."""
    if given:
        return read_sources(given, "given")
    module = Path(module_path)
    exports = dispatched_exports(module)
    foreign = []
    partial = None  # the module's own folder's sources, where they declare only some of its dispatches
    for pattern in BESIDE:
        folder = module.parent / pattern.format(stem=module.stem)
        if folder.is_dir() and any(folder.glob("*.mlir")):
            found = read_sources([folder], "beside")
            if found.found and exports and not exports & set(found.interfaces):
                # Another program's executables (an edited dispatch left in the module's folder): used, they
                # would type nothing and stand in the way of a rebuild that would.
                foreign.append(str(folder))
                continue
            if found.found and _program_declares_part(module, exports, found):
                partial = partial or found
                continue
            if found.found:
                return found
    named = _files_named_by_exports(module)
    if named:
        found = read_sources(named, "named by the module")
        if found.found and (not exports or exports & set(found.interfaces)):
            found = replace(found, path=", ".join(sorted({str(f.parent) for f in named})))  # the dump folder
            if not _program_declares_part(module, exports, found):
                return found
            partial = partial or found
    if partial is not None and _rebuilt_program(module) is None:  # nothing to rebuild: some typed beat none
        return partial
    if foreign:
        return ExecutableSources({}, note=f"the sources beside the module ({', '.join(foreign)}) declare none of "
                                          "its dispatches")  # fmt: skip
    return NO_SOURCES


def _rebuilt_program(module: Path) -> Path | None:
    from engine.dispatch.rebuild_sources import program_named_by

    return program_named_by(module)


def _program_declares_part(module: Path, exports: set[str], found: ExecutableSources) -> bool:
    """Whether ``found`` types only some of the module's dispatches, out of the program itself: hand-written
    executables beside those IREE forms (IREE's custom_dispatch samples) are in the program's file, the
    others only in a rebuild of it, which declares them all."""
    if not exports or exports <= set(found.interfaces):
        return False
    program = _rebuilt_program(module)
    return program is not None and any(Path(f).resolve() == program.resolve() for f in found.files.values())


def _files_named_by_exports(module: Path) -> list[Path]:
    """The files the module's exports are located in, where they are here: a module compiled with
    ``--iree-hal-dump-executable-sources-to=DIR`` locates each export in its dumped source (``DIR/<module>_<executable>.mlir``,
    as the compile named DIR: relative to the folder it ran in, looked for here and beside the module).
    IREE rewrites the locations so, hence such a module is never rebuilt byte for byte: these are its
    sources. A program's own file is among them otherwise; ``read_sources`` skips it unread."""
    from engine.trace.by_source import export_locations

    try:
        locations = export_locations(module)
    except (LensError, OSError):
        return []
    files: set[Path] = set()
    for location in locations.values():
        name = Path(location.rpartition(":")[0])
        if name.suffix != ".mlir":
            continue
        for path in (name,) if name.is_absolute() else (Path.cwd() / name, module.parent.absolute() / name):
            if path.is_file():
                files.add(path)
                break
    return sorted(files)


def dispatched_exports(module: Path) -> set[str]:
    """The exports the module's host code dispatches (empty when it cannot be read: nothing is checked)."""
    from engine.runtime.vmfb.call_sites import calls_per_export
    from engine.runtime.vmfb.module import open_vmfb

    try:
        return set(calls_per_export(open_vmfb(str(module))))
    except (LensError, OSError, IndexError, ValueError):
        return set()


# --------------------------------------------------------------------------------------------- typing


@dataclass(frozen=True)
class _Subspan:
    position: int  # place among the function's subspans: IREE's operand order
    binding: int
    offset: int
    tensor: TensorType
    mode: str  # readonly / writeonly / readwrite
    declared: str = ""  # the source's type where ``tensor`` is another view of its bytes (``shown_instead``)


def output_modes(interface: dict[int, BindingInterface]) -> list[str]:
    """The modes (``writeonly``, ``readwrite``: updated in place) of an export's outputs in IREE's operand
    order, the order ``dispatch_tensors`` numbers them and IREE's trace points list a dispatch's results."""
    found = [_placed(bi, index, k) for index, bi in interface.items() for k in range(len(bi.tensors))]
    found.sort(key=lambda placed: placed[0])
    return [mode for _, mode in found if mode in ("writeonly", "readwrite")]


def _placed(bi: BindingInterface, index: int, k: int) -> tuple[int, str]:
    """Subspan ``k`` of binding ``index``'s place among the function's subspans (IREE's operand order) and its
    mode (``readonly``/``writeonly``/``readwrite``)."""
    position = bi.positions[k] if k < len(bi.positions) else index
    return position, bi.modes[k] if k < len(bi.modes) else ("readonly" if bi.read_only else "readwrite")


def _unshown_ranges(bi: BindingInterface, constants: Sequence[int], length: int) -> list[tuple] | None:
    """Where each tensor of a binding that holds only tensors IREE Lens does not show (encoded: data tiling)
    lies: from its offset to the next one's, the last to the binding's end (where each really ends is not
    known); (position, start, end, mode, declared, laid out) each, ``laid out`` its type as the kernel lays it
    out where the build's configured source says (``materialized``) and it fits, else None; None in all when
    the binding also holds typed tensors or an offset is not known."""
    if bi.tensors or len(bi.unshown_offsets) != len(bi.unshown) or len(bi.unshown_positions) != len(bi.unshown):
        return None
    starts = [resolve_offset(o, constants) for o in bi.unshown_offsets]
    if any(s is None or s > length for s in starts):
        return None
    order = sorted(range(len(starts)), key=lambda k: starts[k])
    ends = {k: starts[order[n + 1]] if n + 1 < len(order) else length for n, k in enumerate(order)}
    laid = bi.materialized if len(bi.materialized) == len(bi.unshown) else ()
    return [(bi.unshown_positions[k], starts[k], ends[k], bi.unshown_modes[k], bi.unshown[k],
             laid[k] if laid and starts[k] + laid[k].byte_length <= ends[k] else None) for k in order]  # fmt: skip


def _subspans(
    interface: dict[int, BindingInterface], constants: Sequence[int], lengths: Sequence[int]
) -> tuple[list[_Subspan] | None, str]:
    """The source's subspans placed in this dispatch's bindings; None (and why) when one does not fit."""
    found = []
    layout = next((bi.layout for bi in interface.values() if bi.layout), None)
    if layout and (layout[0] != len(lengths) or (constants and layout[1] != len(constants))):
        # Another build's source (two builds of a program in one folder, one dump): the sizes may fit all the
        # same, and its types would be shown as this dispatch's.
        return None, (f"its layout declares {layout[0]} bindings and {layout[1]} push constants; the dispatch "
                      f"binds {len(lengths)} and passes {len(constants)}: another build's source")
    for index, bi in interface.items():
        if index >= len(lengths):
            return None, f"the source binds binding {index}; the dispatch has {len(lengths)}"
        if bi.unshown:
            placed = _unshown_ranges(bi, constants, lengths[index])
            if placed is None:
                return None, f"binding {index} holds {bi.unshown[0]}, {NOT_SHOWN_YET}"
            found += [_Subspan(position, index, start, laid or raw_type(end - start), mode, declared)
                      for position, start, end, mode, declared, laid in placed]  # fmt: skip
            continue
        for k, t in enumerate(bi.tensors):
            offset = resolve_offset(bi.offsets[k], constants) if k < len(bi.offsets) else 0
            if offset is None:
                return None, f"binding {index}: the source's offset is not a constant or push constant"
            dims = bi.dynamic_dims[k] if k < len(bi.dynamic_dims) else ()
            if dims:  # a dynamic shape: each ``?`` sized by the push constant the source names
                sizes = {axis: resolve_offset(where, constants) for axis, where in dims}
                if None in sizes.values():
                    return None, f"binding {index}: a dynamic dimension of {t} is not a push constant"
                t = TensorType(tuple(sizes.get(a, d) for a, d in enumerate(t.shape)), t.element, t.source)
            elif any(d == 0 for d in t.shape) and t.byte_length == 0:
                return None, f"binding {index}: a dynamic shape ({t}) the source does not fix"
            if offset + t.byte_length > lengths[index]:
                return None, (
                    f"binding {index}: {t} at byte {offset} does not fit the {lengths[index]} bytes bound"
                )
            position, mode = _placed(bi, index, k)
            found.append(_Subspan(position, index, offset, t, mode, bi.declared[k] if k < len(bi.declared) else ""))
    found.sort(key=lambda s: s.position)
    return found, ""


def dispatch_tensors(
    export: str,
    constants: Sequence[int],
    before: Sequence[np.ndarray | None],
    after: Sequence[np.ndarray] | None,
    sources: ExecutableSources = NO_SOURCES,
    observed_access: Sequence[str] | None = None,
) -> list[TypedTensor]:
    """The tensors of one dispatch of ``export``, inputs first, then outputs.

    ``before[i]``: binding ``i``'s bytes before the dispatch ran (None when not kept); ``after``: each
    binding's bytes after it ran, or None when the dispatch has not run yet (a stop before it: outputs are
    then cut from the current bytes, ``written=False``). ``observed_access``: per binding, ``read`` or
    ``write`` as seen by comparing the bytes (untyped bindings only). The arrays are views of the bytes
    given; copy them to keep them past the moment they describe.
    """
    ran = after is not None
    lengths = [int(np.asarray(a if a is not None else b).size) for a, b in zip(after or before, before)]

    def raw(k: int, moment: str) -> np.ndarray:
        data = (after[k] if moment == "after" and after is not None else before[k])
        if data is None:  # no copy before: the only bytes known are the current ones
            data = after[k] if after is not None else np.zeros(0, np.uint8)
        return np.asarray(data).reshape(-1).view(np.uint8)

    interface = sources.interfaces.get(export)
    note = ""
    if interface:
        subspans, note = _subspans(interface, constants, lengths)
        if subspans is not None:
            where = sources.files.get(export, sources.path or "")
            inputs: list[TypedTensor] = []
            outputs: list[TypedTensor] = []
            for s in subspans:
                access = {"readonly": "read", "writeonly": "write"}.get(s.mode, "readwrite")
                end = s.offset + s.tensor.byte_length
                tt = TensorType(s.tensor.shape, s.tensor.element, Provenance.SOURCES)
                said = shown_instead_note(s.binding, s.declared, tt) if s.declared else where
                if s.mode in ("readonly", "readwrite"):
                    array, _ = view_bytes(raw(s.binding, "before")[s.offset : end], tt)
                    inputs.append(
                        TypedTensor(Role.INPUT, len(inputs), s.binding, s.offset, tt.byte_length, access, tt,
                                    Provenance.SOURCES, array, True, said, s.declared)
                    )
                if s.mode in ("writeonly", "readwrite"):
                    array, _ = view_bytes(raw(s.binding, "after" if ran else "before")[s.offset : end], tt)
                    outputs.append(
                        TypedTensor(Role.OUTPUT, len(outputs), s.binding, s.offset, tt.byte_length, access, tt,
                                    Provenance.SOURCES, array, ran, said, s.declared)
                    )
            return inputs + outputs
        note = f"the executable source does not type this dispatch ({note}): shown as bytes"
    elif sources.found:
        note = f"the executable sources do not declare {export}: shown as bytes"
    else:
        note = sources.note
    return _untyped(len(lengths), raw, ran, observed_access, note)


def spans_by_mode(
    export: str, constants: Sequence[int], lengths: Sequence[int], sources: ExecutableSources
) -> dict[str, list[tuple[int, int, int]]] | None:
    """(binding, byte offset, byte length) of each tensor of a dispatch of ``export`` with bindings of
    ``lengths`` bytes, by its mode (``writeonly``: what a dispatch defines whole; ``readwrite``: what it
    updates in place; ``readonly``), from its source alone (no bytes read or copied); None when the sources
    do not type this dispatch."""
    interface = sources.interfaces.get(export)
    if not interface:
        return None
    subspans, _ = _subspans(interface, constants, lengths)
    if subspans is None:
        return None
    found: dict[str, list[tuple[int, int, int]]] = {"readonly": [], "writeonly": [], "readwrite": []}
    for s in subspans:
        found.setdefault(s.mode, []).append((s.binding, s.offset, s.tensor.byte_length))
    return found


def _untyped(count: int, raw, ran: bool, observed_access: Sequence[str] | None, note: str) -> list[TypedTensor]:
    inputs: list[TypedTensor] = []
    outputs: list[TypedTensor] = []
    unknown: list[TypedTensor] = []
    for k in range(count):
        access = observed_access[k] if observed_access is not None and k < len(observed_access) else "unknown"
        if not ran or access == "unknown":
            data = raw(k, "before")
            unknown.append(
                TypedTensor(Role.BINDING, len(unknown), k, 0, data.size, "unknown", raw_type(data.size),
                            Provenance.UNTYPED, data, False, note)
            )
            continue
        if access in ("read", "readwrite"):
            data = raw(k, "before")
            inputs.append(
                TypedTensor(Role.INPUT, len(inputs), k, 0, data.size, access, raw_type(data.size),
                            Provenance.UNTYPED, data, True, note)
            )
        if access in ("write", "readwrite"):
            data = raw(k, "after")
            outputs.append(
                TypedTensor(Role.OUTPUT, len(outputs), k, 0, data.size, access, raw_type(data.size),
                            Provenance.UNTYPED, data, True, note)
            )
    return inputs + outputs + unknown


def observed_access(before: Sequence[np.ndarray | None], after: Sequence[np.ndarray]) -> list[str]:
    """``write`` for each binding whose bytes the dispatch changed, ``read`` for the others, ``unknown``
    where the bytes before were not kept."""
    return [
        "unknown" if b is None else ("read" if np.array_equal(b, a) else "write") for b, a in zip(before, after)
    ]
