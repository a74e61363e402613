"""The session protocol as bytes: a safe, self-describing encoding of commands, events and tensors.

A message is one *frame*::

    b"ILW1" | u32 header length | u32 buffer count | header (UTF-8 JSON) | buffers

The JSON header holds the message as a tree of plain values; what JSON cannot say is tagged:
``{"$t": [...]}`` a tuple, ``{"$m": [[k, v], ...]}`` a dict whose keys are not all plain strings,
``{"$d": "module:Class", "f": {...}}`` a protocol dataclass, ``{"$e": "module:Class", "v": ...}`` an
enum member, ``{"$a": N, "dtype": ..., "shape": [...]}`` a numpy array whose bytes are buffer N,
``{"$B": N}`` bytes, ``{"$s": dtype, "v": ...}`` a numpy scalar. Tensors never go through JSON: their
bytes follow the header raw, or zlib-compressed in 4 MiB chunks when a sample shows that it pays
(``"z": [chunk sizes]`` in the buffer's description).

Decoding never runs code named by the peer: only dataclasses and enums defined in ``engine`` modules are
built (by their fields, as the constructor takes them); anything else is a ``WireError``. Unlike pickle, a
hostile or confused server cannot make the client execute anything.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
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
        if v is None or isinstance(v, bool | int | float):
            return v
        if isinstance(v, enum.Enum):
            if isinstance(v, str):  # StrEnum: its text is its meaning, and it compares equal to it
                return str(v)
            return {"$e": _type_name(type(v)), "v": self.value(v.value)}
        if isinstance(v, str):
            return v
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return {"$t": [self.value(x) for x in v]}
        if isinstance(v, dict):
            if all(type(k) is str and not k.startswith("$") for k in v):
                return {k: self.value(x) for k, x in v.items()}
            return {"$m": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, np.ndarray):
            array = v if v.flags.c_contiguous else v.copy(order="C")  # (ascontiguousarray makes rank 0 rank 1)
            out = {"$a": self.buffer(_bytes_view(array)), "shape": list(array.shape)}
            out.update(_dtype_json(array.dtype))
            return out
        if isinstance(v, np.generic):
            return {"$s": _dtype_json(v.dtype), "v": self.value(v.item())}
        if isinstance(v, bytes | bytearray | memoryview):
            return {"$B": self.buffer(memoryview(v).cast("B"))}
        if isinstance(v, set | frozenset):
            return {"$set": [self.value(x) for x in v]}
        if isinstance(v, PurePath):
            return str(v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            fields = {f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v)}
            return {"$d": _type_name(type(v)), "f": fields}
        raise WireError(f"cannot send a {type(v).__module__}.{type(v).__qualname__} over the session stream")


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
    header = json.dumps({"m": tree, "b": descriptions}, separators=(",", ":")).encode()
    return [_HEAD.pack(MAGIC, len(header), len(descriptions)), header, *blocks]


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
    def __init__(self, buffers: list[np.ndarray]):
        self.buffers = buffers

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "$t" in v:
            return tuple(self.value(x) for x in v["$t"])
        if "$m" in v:
            return {_hashable(self.value(k)): self.value(x) for k, x in v["$m"]}
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
            return _dtype(v["$s"]).type(self.value(v["v"]))
        if "$set" in v:
            return {self.value(x) for x in v["$set"]}
        if "$e" in v:
            cls = _engine_type(v["$e"])
            if not issubclass(cls, enum.Enum):
                raise WireError(f"{v['$e']} is not an enum")
            return cls(self.value(v["v"]))
        if "$d" in v:
            cls = _engine_type(v["$d"])
            if not dataclasses.is_dataclass(cls):
                raise WireError(f"{v['$d']} is not a protocol dataclass")
            values = {k: self.value(x) for k, x in v["f"].items()}
            init = {f.name for f in dataclasses.fields(cls) if f.init}
            obj = cls(**{k: x for k, x in values.items() if k in init})
            for k, x in values.items():
                if k not in init:
                    object.__setattr__(obj, k, x)
            return obj
        return {k: self.value(x) for k, x in v.items()}

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
    magic, header_len, count = _HEAD.unpack(head)
    if magic != MAGIC:
        text = head.decode("utf-8", "replace")
        raise WireError(f"the stream does not carry session messages (it begins {text!r})")
    if header_len > _MAX_HEADER:
        raise WireError(f"a message header of {header_len} bytes is not one of ours")
    try:
        header = json.loads(_read_exact(stream, header_len))
        descriptions = header["b"]
    except (ValueError, KeyError, TypeError) as e:
        raise WireError(f"a corrupt message header ({e})") from None
    if len(descriptions) != count:
        raise WireError("a message header lists the wrong number of buffers")
    buffers = [_read_buffer(stream, d) for d in descriptions]
    return _Decoder(buffers).value(header["m"])


def _read_buffer(stream: BinaryIO, description: dict) -> np.ndarray:
    size = int(description["n"])
    out = np.empty(size, np.uint8)
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


def _read_into(stream: BinaryIO, view: memoryview) -> None:
    at = 0
    while at < view.nbytes:
        n = stream.readinto(view[at:])
        if not n:
            raise ConnectionLost(f"the session stream ended inside a tensor ({at} of {view.nbytes} bytes)")
        at += n


def write_frame(stream: BinaryIO, message: Any, *, compress: bool = True) -> None:
    for block in encode(message, compress=compress):
        stream.write(block)
    stream.flush()
