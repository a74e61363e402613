"""Golden bundles: one directory with ``manifest.json``, the program's inputs and outputs, and every
dispatch's tensors as ``.npy`` files (paths in the manifest are relative to the directory).

``BundleWriter`` writes tensors as they come (a long capture holds no tensor in memory after it is on
disk, and identical bytes are written once); ``Bundle`` reads one back, typed by the manifest.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.dispatch.tensor_types import TensorType, from_storage, to_storage
from engine.errors import LensError
from engine.temp_caches import scratch_dir

MANIFEST = "manifest.json"
ENTRIES = "dispatches.jsonl"  # written during a capture, folded into the manifest at the end
DEDUPLICATE_RECENT = 4096
PENDING_BYTES = 128 << 20  # tensors copied and waiting for the writer thread, at most
RECENT_BYTES = 64 << 20  # copies of the newest tensors kept to compare against
FORMAT = "iree-lens-capture/1"


class BundleError(LensError):
    """A capture bundle is missing, unreadable or inconsistent."""


@dataclass
class DispatchEntry:
    """One dispatch of a capture, in execution order; ``inputs``/``outputs`` are file names in the bundle."""

    ordinal: int
    name: str
    executable: str | None
    workgroups: list[int] | None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    input_types: list[str] = field(default_factory=list)
    output_types: list[str] = field(default_factory=list)
    constants: list[int] = field(default_factory=list)
    # One per binding: {"index", "buffer", "offset", "length", "access"} (debug engine only): the graph's input.
    bindings: list[dict] = field(default_factory=list)
    # Where the tensors' types came from, in the bundle format's words (``BUNDLE_PROVENANCE``): trace (IREE's
    # trace points), interface (the executables' sources) or bindings (exactly the bound bytes, untyped).
    tensors_from: str = "bindings"
    health: str = "ok"
    # Tensors a dispatch reads and writes in place (IREE's concatenation into slices of one buffer) whose
    # bytes the program had not all defined: "input0"/"output1"... -> the undefined byte ranges [start, end)
    # of that tensor. Their bytes there are whatever the memory held, not data (debug engine only).
    undefined: dict[str, list[list[int]]] = field(default_factory=dict)
    # Each tensor slot ("input0"/"output1"...: the files of ``inputs``/``outputs`` by position) in the one
    # vocabulary of a dispatch's tensors (``typed_tensors.binding_label``): "binding 3, write, output 0" when
    # the sources typed it, "binding 3, write" when untyped (the slot's name is where the bytes are filed,
    # not a role claimed). Debug engine only.
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "ordinal": self.ordinal,
            "name": self.name,
            "executable": self.executable,
            "workgroups": self.workgroups,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "input_types": self.input_types,
            "output_types": self.output_types,
            "constants": self.constants,
            "bindings": self.bindings,
            "tensors_from": self.tensors_from,
            "health": self.health,
            **({"undefined": self.undefined} if self.undefined else {}),
            **({"labels": self.labels} if self.labels else {}),
        }

    @classmethod
    def from_json(cls, d: dict) -> DispatchEntry:
        return cls(
            int(d["ordinal"]),
            str(d["name"]),
            d.get("executable"),
            d.get("workgroups"),
            list(d.get("inputs", [])),
            list(d.get("outputs", [])),
            list(d.get("input_types", [])),
            list(d.get("output_types", [])),
            list(d.get("constants", [])),
            list(d.get("bindings", [])),
            d.get("tensors_from", "bindings"),
            d.get("health", "ok"),
            {str(k): [list(map(int, r)) for r in v] for k, v in d.get("undefined", {}).items()},
            {str(k): str(v) for k, v in d.get("labels", {}).items()},
        )


# typed_tensors.Provenance -> the bundle format's ``tensors_from`` (its words predate the provenance names).
BUNDLE_PROVENANCE = {"runtime": "trace", "sources": "interface", "untyped": "bindings"}


def executable_of(export_name: str) -> str:
    """IREE's executable name for an export: ``main_dispatch_0_matmul_4x8_f32`` -> ``main_dispatch_0``
    (what trace keys and ``--iree-hal-substitute-executable-source`` use)."""
    import re

    m = re.match(r"^(.*?_dispatch_\d+)(?:_|$)", export_name)
    return m[1] if m else export_name


class BundleWriter:
    """Writes a bundle directory as a capture runs; ``finish`` writes the manifest."""

    def __init__(self, directory: str | Path, *, module: str, function: str, engine: str, device: str):
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BundleError(f"cannot create {self.directory}: {e}") from None
        self.manifest: dict = {
            "format": FORMAT,
            "module": str(Path(module).resolve()),
            "function": function,
            "engine": engine,
            "device": device,
            "inputs": [],
            "outputs": [],
            "input_types": [],
            "output_types": [],
            "dispatches": [],
        }
        # Entries go to disk as they come (one JSON line each), so a long capture's memory stays flat.
        self.dispatch_count = 0
        # Told of each dispatch entry once it is written (``add_dispatch``), in order.
        self.dispatch_listeners: list[Callable[[DispatchEntry], None]] = []
        self._entries = open(self.directory / ENTRIES, "w")  # noqa: SIM115 (closed by finish)
        # fingerprint -> files with it; the most recent only (neighbouring dispatches share tensors).
        self._by_digest: OrderedDict[tuple, list[str]] = OrderedDict()
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._recent_bytes = 0
        self._saver = None  # a one-thread pool that writes the .npy files
        self._pending: deque = deque()  # (future, bytes, path) not yet known to be written
        self._pending_bytes = 0
        self.bytes_written = 0

    def write_tensor(
        self, stem: str, array: np.ndarray, tensor_type: TensorType | None = None
    ) -> tuple[str, str]:
        """Save ``array`` as ``stem.npy`` (or reuse an identical file already written); returns the file
        name and the type string recorded in the manifest."""
        array = np.asarray(array, order="C")  # (np.ascontiguousarray would make a rank-0 tensor 1-d)
        stored = to_storage(array)
        type_text = str(tensor_type) if tensor_type is not None else _type_of(array)
        # Identical tensors (a dispatch's output is the next one's input) are written once. A cheap
        # fingerprint finds candidates; the bytes themselves decide (hashing everything costs more than the
        # write it saves).
        key = _fingerprint(stored)
        for name in self._by_digest.get(key, ()):
            existing = self._recent.get(name)
            if existing is None:
                existing = np.load(self.directory / name, mmap_mode="r", allow_pickle=False)
            if existing.dtype == stored.dtype and np.array_equal(existing, stored):
                return name, type_text
        name = f"{stem}.npy"
        copy = np.array(stored, copy=True)  # the caller's memory is only valid until it returns
        self._save_async(self.directory / name, copy)
        self._remember(name, copy)
        self._by_digest.setdefault(key, []).append(name)
        self._by_digest.move_to_end(key)
        if len(self._by_digest) > DEDUPLICATE_RECENT:
            self._by_digest.popitem(last=False)
        self.bytes_written += stored.nbytes
        return name, type_text

    def _save_async(self, path: Path, array: np.ndarray) -> None:
        """Write on a worker thread (file writes release the GIL, so the run goes on meanwhile); at most
        ``PENDING_BYTES`` wait to be written, the caller blocks beyond that."""
        from concurrent.futures import ThreadPoolExecutor

        if self._saver is None:
            self._saver = ThreadPoolExecutor(1, thread_name_prefix="lens-bundle-writer")
        while self._pending and self._pending_bytes + array.nbytes > PENDING_BYTES:
            self._settle(self._pending.popleft())
        future = self._saver.submit(np.save, path, array, allow_pickle=False)
        self._pending.append((future, array.nbytes, path))
        self._pending_bytes += array.nbytes

    def _settle(self, item) -> None:
        future, nbytes, path = item
        self._pending_bytes -= nbytes
        try:
            future.result()
        except OSError as e:
            raise BundleError(f"cannot write {path}: {e}") from None

    def wait_written(self) -> None:
        """Block until every tensor handed over so far is on disk (a live viewer reads them next)."""
        while self._pending:
            self._settle(self._pending.popleft())

    def _drain(self) -> None:
        self.wait_written()
        if self._saver is not None:
            self._saver.shutdown()
            self._saver = None

    def _remember(self, name: str, stored: np.ndarray) -> None:
        """Keep a copy of the newest tensors (bounded): the next dispatch usually reads what this one
        wrote, and comparing in memory is cheaper than mapping the file again."""
        if stored.nbytes > RECENT_BYTES // 4:
            return
        self._recent[name] = np.array(stored, copy=True)
        self._recent_bytes += stored.nbytes
        while self._recent_bytes > RECENT_BYTES:
            _, old = self._recent.popitem(last=False)
            self._recent_bytes -= old.nbytes

    def add_dispatch(self, entry: DispatchEntry) -> None:
        self._entries.write(json.dumps(entry.to_json()) + "\n")
        self.dispatch_count += 1
        for listener in list(self.dispatch_listeners):
            listener(entry)

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, kind, error, trace) -> None:
        if error is not None:
            self.abandon()

    def abandon(self) -> None:
        """A capture that ends in an error before ``finish`` (no device, a module that does not load): the
        files written so far stay, the entries file is closed (idempotent; nothing after ``finish``)."""
        if not self._entries.closed:
            self._drain()
            self._entries.close()

    def finish(self, extra: dict | None = None) -> Path:
        """Write ``manifest.json``: the header, then the dispatches streamed from the entries file."""
        self._drain()
        self._entries.close()
        if extra:
            self.manifest.update(extra)
        head = dict(self.manifest)
        head.pop("dispatches", None)
        path = self.directory / MANIFEST
        entries = self.directory / ENTRIES
        with open(path, "w") as out, open(entries) as lines:
            text = json.dumps(head, indent=1)
            out.write(text[:-2] + ',\n "dispatches": [')
            for i, line in enumerate(lines):
                out.write(("\n  " if i == 0 else ",\n  ") + line.rstrip("\n"))
            out.write("\n ]\n}\n")
        entries.unlink()
        return path


def _fingerprint(stored: np.ndarray) -> tuple:
    """dtype, shape and a CRC of at most ~64 KiB sampled evenly over the bytes."""
    raw = stored.reshape(-1).view(np.uint8)
    step = max(1, raw.size // 65536)
    return stored.dtype.str, stored.shape, zlib.crc32(np.ascontiguousarray(raw[::step]).data)


def _type_of(array: np.ndarray) -> str:
    from engine.dispatch.tensor_types import element_name

    return "x".join([*(str(d) for d in array.shape), element_name(array.dtype)])


class Bundle:
    """A capture read back: the manifest, and tensors loaded (typed) on demand."""

    def __init__(self, path: str | Path):
        path = Path(path)
        if path.suffix == ".zip" and path.is_file():
            path = _unzip(path)
        if path.is_file() and path.name == MANIFEST:
            path = path.parent
        self.directory = path
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise BundleError(f"{path} is not a capture bundle: no {MANIFEST}")
        try:
            self.manifest = json.loads(manifest_path.read_text())
            if not isinstance(self.manifest, dict):
                raise ValueError("the manifest is not a JSON object")
            self.dispatches = [DispatchEntry.from_json(d) for d in self.manifest.get("dispatches", [])]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BundleError(f"{manifest_path} is not a valid manifest: {e}") from None

    @classmethod
    def in_progress(cls, directory: str | Path, module: str = "", function: str = "") -> Bundle:
        """A bundle still being written (no manifest yet): its tensor files can be read already."""
        bundle = cls.__new__(cls)
        bundle.directory = Path(directory)
        bundle.manifest = {"module": module, "function": function, "dispatches": []}
        bundle.dispatches = []
        return bundle

    @property
    def module(self) -> str:
        return self.manifest.get("module", "")

    @property
    def function(self) -> str:
        return self.manifest.get("function", "")

    @property
    def calls_before(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The calls the module instance ran before the captured one (``capture_debug``'s ``calls_before``):
        none for a capture of a freshly loaded module."""
        return tuple((str(f), tuple(map(str, specs))) for f, specs in self.manifest.get("calls_before", []))

    def load(self, name: str, type_text: str | None = None) -> np.ndarray:
        """The tensor in file ``name`` (memory-mapped), typed by ``type_text`` when that is bf16/f8."""
        p = self.directory / name
        try:
            array = np.load(p, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as e:
            raise BundleError(f"cannot read {p}: {e}") from None
        element = type_text.split("x")[-1] if type_text else None
        return from_storage(array, element)

    def dispatch_tensors(self, entry: DispatchEntry, which: str) -> list[np.ndarray]:
        names = entry.inputs if which == "inputs" else entry.outputs
        types = entry.input_types if which == "inputs" else entry.output_types
        return [self.load(n, types[i] if i < len(types) else None) for i, n in enumerate(names)]

    def program_tensors(self, which: str) -> list[np.ndarray]:
        names = self.manifest.get(which, [])
        types = self.manifest.get(f"{which[:-1]}_types", [])
        return [self.load(n, types[i] if i < len(types) else None) for i, n in enumerate(names)]


def _unzip(path: Path) -> Path:

    target = scratch_dir("iree-lens-bundle-")
    try:
        with zipfile.ZipFile(path) as z:
            z.extractall(target)
    except (zipfile.BadZipFile, OSError) as e:
        raise BundleError(f"cannot open {path} as a zip bundle: {e}") from None
    found = list(target.rglob(MANIFEST))
    return found[0].parent if found else target
