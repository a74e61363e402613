"""The session protocol as bytes: a safe, self-describing encoding of commands, events and tensors.

A message is one *frame*::

    b"ILW1" | u32 table length | u32 message length | buffer table (JSON) | buffers | message (JSON)

The message (UTF-8 JSON, last so that it is parsed with its buffers at hand, in one pass) holds it as a tree of plain values; what JSON cannot say is tagged:
``{"$t": [...]}`` a tuple, ``{"$m": [[k, v], ...]}`` a dict whose keys are not all plain strings,
``{"$d": "module:Class", "f": {...}}`` a protocol dataclass, ``{"$e": "module:Class", "v": ...}`` an
enum member, ``{"$a": N, "dtype": ..., "shape": [...]}`` a numpy array whose bytes are buffer N,
``{"$B": N}`` bytes, ``{"$s": dtype, "v": ...}`` a numpy scalar. Tensors never go through JSON: their
bytes follow the header raw, or zlib-compressed in 4 MiB chunks when a sample shows that it pays
(``"z": [chunk sizes]`` in the buffer's description in the table).

Decoding never runs code named by the peer: only dataclasses and enums defined in ``engine`` modules are
built (by their fields, as the constructor takes them); anything else is a ``WireError``. Unlike pickle, a
hostile or confused server cannot make the client execute anything.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import mmap
import struct
import zlib
from pathlib import PurePath
from typing import Any, BinaryIO

import numpy as np

from engine.errors import LensError

MAGIC = b"ILW1"
_HEAD = struct.Struct("<4sII")
CHUNK = 4 << 20  # compression works chunk by chunk: bounded memory, and decompression into place
_SAMPLE = 256 << 10
_COMPRESS_MIN = 64 << 10  # smaller buffers are sent as they are
_IO_CHUNK = 1 << 20  # the pipe's size (engine.session.stream grows pipes to 1 MiB)
_PREFAULT_MIN = 4 << 20
_MAX_HEADER = 256 << 20  # a header this long is not one of ours: refuse before allocating


class WireError(LensError):
    """A frame that is not a session message (corrupt stream, another program's output, a foreign type)."""


class ConnectionLost(WireError):
    """The stream ended (the peer exited, the connection dropped) in the middle of a frame or before one."""


# ------------------------------------------------------------------------------------------- encoding


class _Encoder:
    def __init__(self, compress: bool):
        self.compress = compress
        self.buffers: list[memoryview] = []

    def buffer(self, data: memoryview) -> int:
        self.buffers.append(data)
        return len(self.buffers) - 1

    def value(self, v: Any) -> Any:
        t = type(v)
        if t in _PLAIN:
            return v
        if t is tuple or t is list:
            # Register files and frame lists are long runs of plain values: no call per element.
            items = list(v) if all(type(x) in _PLAIN for x in v) else [self.value(x) for x in v]
            return items if t is list else {"$t": items}
        known = _DATACLASSES.get(t)
        if known is not None:
            name, fields = known
            return {"$d": name, "f": {f: self.value(getattr(v, f)) for f in fields}}
        if isinstance(v, enum.Enum):
            if isinstance(v, str):  # StrEnum: its text is its meaning, and it compares equal to it
                return str(v)
            return {"$e": _type_name(type(v)), "v": self.value(v.value)}
        if isinstance(v, np.generic):  # before float: numpy's float64 is a float
            return {"$s": _dtype_json(v.dtype), "v": self.value(v.item())}
        for plain in (bool, int, float, str):  # other subclasses of plain values
            if isinstance(v, plain):
                return plain(v)
        if isinstance(v, list | tuple):
            return self.value(list(v) if isinstance(v, list) else tuple(v))
        if isinstance(v, dict):
            if all(type(k) is str and not k.startswith("$") for k in v):
                return {k: self.value(x) for k, x in v.items()}
            return {"$m": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, np.ndarray):
            array = v if v.flags.c_contiguous else v.copy(order="C")  # (ascontiguousarray makes rank 0 rank 1)
            out = {"$a": self.buffer(_bytes_view(array)), "shape": list(array.shape)}
            out.update(_dtype_json(array.dtype))
            return out
        if isinstance(v, bytes | bytearray | memoryview):
            return {"$B": self.buffer(memoryview(v).cast("B"))}
        if isinstance(v, set | frozenset):
            return {"$set": [self.value(x) for x in v]}
        if isinstance(v, PurePath):
            return str(v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            _DATACLASSES[t] = (_type_name(t), tuple(f.name for f in dataclasses.fields(v)))
            return self.value(v)
        raise WireError(f"cannot send a {type(v).__module__}.{type(v).__qualname__} over the session stream")


_PLAIN = frozenset((type(None), bool, int, float, str))
_DATACLASSES: dict[type, tuple[str, tuple[str, ...]]] = {}  # class -> (wire name, field names)


def _bytes_view(array: np.ndarray) -> memoryview:
    if array.dtype.hasobject:
        raise WireError("cannot send an array of Python objects over the session stream")
    return memoryview(array.reshape(-1).view(np.uint8)) if array.size else memoryview(b"")


def _dtype_json(dtype: np.dtype) -> dict[str, str]:
    # Extension types (ml_dtypes' bfloat16, float8...) have no portable ``str``: they go by name.
    if dtype.kind == "V" and dtype.fields is None and dtype.name not in ("void", f"void{dtype.itemsize * 8}"):
        return {"dtype_name": dtype.name}
    return {"dtype": dtype.str}


def _type_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def encode(message: Any, *, compress: bool = True) -> list[memoryview | bytes]:
    """The frame of ``message`` as a list of byte blocks to write in order (large tensors are not copied
    unless compressed)."""
    encoder = _Encoder(compress)
    tree = encoder.value(message)
    descriptions, blocks = [], []
    for data in encoder.buffers:
        chunks = _compressed_chunks(data) if compress else None
        if chunks is None:
            descriptions.append({"n": data.nbytes})
            blocks.append(data)
        else:
            descriptions.append({"n": data.nbytes, "z": [len(c) for c in chunks]})
            blocks.extend(chunks)
    table = json.dumps(descriptions, separators=(",", ":")).encode()
    body = json.dumps(tree, separators=(",", ":")).encode()
    return [_HEAD.pack(MAGIC, len(table), len(body)), table, *blocks, body]


def _compressed_chunks(data: memoryview) -> list[bytes] | None:
    """zlib chunks of ``data`` when a sample compresses to less than half, else None (sent raw)."""
    if data.nbytes < _COMPRESS_MIN:
        return None
    sample = data[: min(_SAMPLE, data.nbytes)]
    if len(zlib.compress(sample, 1)) * 2 > sample.nbytes:
        return None
    return [zlib.compress(data[k : k + CHUNK], 1) for k in range(0, data.nbytes, CHUNK)]


# ------------------------------------------------------------------------------------------- decoding


class _Decoder:
    """Builds tagged values while ``json`` parses (``object_hook``: inner values first, in C's loop)."""

    def __init__(self, buffers: list[np.ndarray]):
        self.buffers = buffers

    def hook(self, v: dict) -> Any:
        if len(v) > 3 or not v or next(iter(v))[:1] != "$":
            return v  # a plain dict (tagged ones lead with their tag)
        if "$t" in v:
            return tuple(v["$t"])
        if "$d" in v:
            cls, init = _dataclass(v["$d"])
            values = v["f"]
            if values.keys() <= init:
                return cls(**values)
            obj = cls(**{k: x for k, x in values.items() if k in init})
            for k, x in values.items():
                if k not in init:
                    object.__setattr__(obj, k, x)
            return obj
        if "$m" in v:
            return {_hashable(k): x for k, x in v["$m"]}
        if "$a" in v:
            dtype = _dtype(v)
            raw = self._buffer(v["$a"])
            shape = tuple(int(d) for d in v["shape"])
            if raw.nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
                raise WireError(f"array of shape {shape} {dtype} does not match its {raw.nbytes} bytes")
            return raw.view(dtype).reshape(shape)
        if "$B" in v:
            return self._buffer(v["$B"]).tobytes()
        if "$s" in v:
            return _dtype(v["$s"]).type(v["v"])
        if "$set" in v:
            return set(v["$set"])
        if "$e" in v:
            cls = _engine_type(v["$e"])
            if not issubclass(cls, enum.Enum):
                raise WireError(f"{v['$e']} is not an enum")
            return cls(v["v"])
        return v

    def _buffer(self, index: int) -> np.ndarray:
        try:
            return self.buffers[index]
        except (IndexError, TypeError):
            raise WireError(f"the message names buffer {index!r}, which the frame does not have") from None


def _hashable(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _dtype(spec: dict) -> np.dtype:
    if "dtype_name" in spec:
        import ml_dtypes  # noqa: F401  (registers bfloat16, float8... with numpy)

        return np.dtype(getattr(ml_dtypes, spec["dtype_name"], spec["dtype_name"]))
    dtype = np.dtype(spec["dtype"])
    if dtype.hasobject:
        raise WireError("object arrays are not accepted from the session stream")
    return dtype


_DECODABLE: dict[str, tuple[type, frozenset[str]]] = {}


def _dataclass(name: str) -> tuple[type, frozenset[str]]:
    """An engine dataclass by wire name, and the names of the fields its constructor takes."""
    known = _DECODABLE.get(name)
    if known is None:
        cls = _engine_type(name)
        if not dataclasses.is_dataclass(cls):
            raise WireError(f"{name} is not a protocol dataclass")
        known = _DECODABLE[name] = (cls, frozenset(f.name for f in dataclasses.fields(cls) if f.init))
    return known


def _engine_type(name: str) -> type:
    """A class of IREE Lens's engine by ``module:QualName``; nothing outside ``engine`` is built."""
    module_name, _, qualname = str(name).partition(":")
    if not (module_name == "engine" or module_name.startswith("engine.")) or not qualname:
        raise WireError(f"refusing to build {name!r}: only the engine's protocol types cross the stream")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise WireError(f"unknown protocol type {name!r} (a different IREE Lens version at the other end?)") from None
    if not isinstance(obj, type):
        raise WireError(f"{name!r} is not a type")
    return obj


def read_frame(stream: BinaryIO) -> Any:
    """The next message of ``stream``; ``ConnectionLost`` at its end, ``WireError`` if it is not a frame."""
    head = _read_exact(stream, _HEAD.size, at_start=True)
    magic, table_len, body_len = _HEAD.unpack(head)
    if magic != MAGIC:
        text = head.decode("utf-8", "replace")
        raise WireError(f"the stream does not carry session messages (it begins {text!r})")
    if table_len > _MAX_HEADER or body_len > _MAX_HEADER:
        raise WireError(f"a message of {table_len} + {body_len} bytes of header is not one of ours")
    try:
        descriptions = json.loads(_read_exact(stream, table_len))
        if not isinstance(descriptions, list):
            raise TypeError("the buffer table is not a list")
        buffers = [_read_buffer(stream, d) for d in descriptions]
    except (ValueError, KeyError, TypeError) as e:
        raise WireError(f"a corrupt message header ({e})") from None
    except (MemoryError, OSError) as e:  # a tensor bigger than this machine can hold
        raise WireError(f"cannot receive the message's tensors here: {e!r}") from None
    body = _read_exact(stream, body_len)
    try:
        return json.loads(body, object_hook=_Decoder(buffers).hook)
    except (ValueError, KeyError, TypeError) as e:  # (WireError, a LensError, passes through)
        raise WireError(f"a corrupt message ({type(e).__name__}: {e})") from None


def _read_buffer(stream: BinaryIO, description: dict) -> np.ndarray:
    size = int(description["n"])
    out = _prefaulted(size)
    chunks = description.get("z")
    if chunks is None:
        _read_into(stream, memoryview(out))
        return out
    at = 0
    for wire_size in chunks:
        piece = zlib.decompress(_read_exact(stream, int(wire_size)))
        if at + len(piece) > size:
            raise WireError("a compressed buffer is longer than it says")
        out[at : at + len(piece)] = np.frombuffer(piece, np.uint8)
        at += len(piece)
    if at != size:
        raise WireError("a compressed buffer is shorter than it says")
    return out


def _read_exact(stream: BinaryIO, size: int, *, at_start: bool = False) -> bytes:
    data = stream.read(size)
    if data is None or len(data) < size:
        got = 0 if data is None else len(data)
        if at_start and got == 0:
            raise ConnectionLost("the session stream ended")
        raise ConnectionLost(f"the session stream ended inside a message ({got} of {size} bytes)")
    return data


def _prefaulted(size: int) -> np.ndarray:
    """A byte array whose pages exist already: one kernel call maps them all instead of a page fault every
    4 KiB while the tensor streams in (about twice the speed for big tensors)."""
    if size < _PREFAULT_MIN or not hasattr(mmap, "MAP_POPULATE"):
        return np.empty(size, np.uint8)
    block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
    return np.frombuffer(block, np.uint8)


def _read_into(stream: BinaryIO, view: memoryview) -> None:
    at = 0
    while at < view.nbytes:
        n = stream.readinto(view[at : at + _IO_CHUNK])
        if not n:
            raise ConnectionLost(f"the session stream ended inside a tensor ({at} of {view.nbytes} bytes)")
        at += n


def write_frame(stream: BinaryIO, message: Any, *, compress: bool = True) -> None:
    blocks = encode(message, compress=compress)
    if sum(memoryview(b).nbytes for b in blocks) <= _IO_CHUNK:  # one write: the peer wakes once
        stream.write(b"".join(blocks))
        stream.flush()
        return
    for block in blocks:
        view = memoryview(block)
        for k in range(0, view.nbytes, _IO_CHUNK):  # pipe-sized writes: the reader starts on each at once
            stream.write(view[k : k + _IO_CHUNK])
    stream.flush()
