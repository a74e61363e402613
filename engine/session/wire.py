"""The session protocol as bytes: a safe, self-describing encoding of commands, events and tensors.

A message is one *frame*::

    b"ILW1" | u32 table length | u32 message length | buffer table (JSON) | buffers | message (JSON)

The table is empty when the message has no buffers (most messages). The message (UTF-8 JSON, last so that it is parsed with its buffers at hand, in one pass) holds it as a
tree of plain values; what JSON cannot say is tagged:
``{"$t": [...]}`` a tuple, ``{"$m": [[k, v], ...]}`` a dict whose keys are not all plain strings,
``{"$d": "module:Class", field: value, ...}`` an engine dataclass (a field still at its default left out;
the protocol's own classes by their bare names),
``{"$e": "module:Class", "v": ...}`` an
enum member, ``{"$a": N, "dtype": ..., "shape": [...]}`` a numpy array whose bytes are buffer N,
``{"$B": N}`` bytes, ``{"$s": dtype, "v": ...}`` a numpy scalar. Tensors never go through JSON: their
bytes follow the table: small ones as they are, big ones (``"k": 1`` in the table) in 4 MiB chunks, each
after a header (bytes sent, bytes meant, encoding), raw or zlib-compressed where ``Compression`` finds that
it pays on this link.

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
import time
import zlib
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, BinaryIO

import numpy as np

from engine.errors import LensError

MAGIC = b"ILW1"
_HEAD = struct.Struct("<4sII")
_CHUNK_HEAD = struct.Struct("<IIB")  # bytes on the wire, bytes it stands for, encoding
_RAW, _ZLIB = 0, 1
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
    """Turns a message into a JSON tree, its arrays and bytes into buffers. One encoding function per type,
    made once (``_ENCODERS``): a step's stop record is a few dozen values, and a lookup each beats a chain of
    isinstance tests. A dataclass field still at its default (the very object) is left out: a stop record's
    many empty fields cost neither bytes nor decoding."""

    def __init__(self):
        self.buffers: list[memoryview] = []

    def buffer(self, data: memoryview) -> int:
        self.buffers.append(data)
        return len(self.buffers) - 1

    def value(self, v: Any) -> Any:
        t = type(v)
        if t in _PLAIN:
            return v
        encode_type = _ENCODERS.get(t)
        if encode_type is None:
            encode_type = _ENCODERS[t] = _encoder_for(t)
        return encode_type(self, v)


_PLAIN = frozenset((type(None), bool, int, float, str))
_NO_DEFAULT = object()
_ENCODERS: dict[type, Callable[[_Encoder, Any], Any]] = {}
_JSON = json.JSONEncoder(separators=(",", ":"), check_circular=False)  # (json.dumps makes one a call)


def _items(encoder: _Encoder, v: Any) -> list:
    return [x if type(x) in _PLAIN else encoder.value(x) for x in v]


def _encode_tuple(encoder: _Encoder, v: tuple) -> dict:
    return {"$t": _items(encoder, v)}


def _encode_dict(encoder: _Encoder, v: dict) -> dict:
    if all(type(k) is str and not k.startswith("$") for k in v):
        return {k: x if type(x) in _PLAIN else encoder.value(x) for k, x in v.items()}
    return {"$m": [[encoder.value(k), encoder.value(x)] for k, x in v.items()]}


def _encode_array(encoder: _Encoder, v: np.ndarray) -> dict:
    array = v if v.flags.c_contiguous else v.copy(order="C")  # (ascontiguousarray makes rank 0 rank 1)
    out = {"$a": encoder.buffer(_bytes_view(array)), "shape": list(array.shape)}
    out.update(_dtype_json(array.dtype))
    return out


def _dataclass_encoder(cls: type) -> Callable[[_Encoder, Any], dict]:
    name = _type_name(cls)
    fields = tuple(
        (f.name, f.default if f.default is not dataclasses.MISSING else _NO_DEFAULT) for f in dataclasses.fields(cls)
    )

    def encode_dataclass(encoder: _Encoder, v: Any) -> dict:
        out = {"$d": name}  # (its fields beside the tag: one JSON object, one decoding hook, per dataclass)
        for field, default in fields:
            x = getattr(v, field)
            if x is not default:
                out[field] = x if type(x) in _PLAIN else encoder.value(x)
        return out

    return encode_dataclass


def _encoder_for(t: type) -> Callable[[_Encoder, Any], Any]:
    """How values of type ``t`` travel; ``WireError`` for a type that cannot."""
    if issubclass(t, tuple) and not dataclasses.is_dataclass(t):
        return _encode_tuple if t is tuple or not hasattr(t, "_fields") else lambda e, x: _encode_tuple(e, tuple(x))
    if t is list:
        return _items
    if dataclasses.is_dataclass(t):
        return _dataclass_encoder(t)
    if issubclass(t, enum.Enum):
        if issubclass(t, str):  # StrEnum: its text is its meaning, and it compares equal to it
            return lambda e, x: str(x)
        name = _type_name(t)
        return lambda e, x: {"$e": name, "v": e.value(x.value)}
    if issubclass(t, np.generic):  # before float: numpy's float64 is a float
        return lambda e, x: {"$s": _dtype_json(x.dtype), "v": e.value(x.item())}
    for plain in (bool, int, float, str):  # other subclasses of plain values
        if issubclass(t, plain):
            return lambda e, x, plain=plain: plain(x)
    if issubclass(t, list):
        return lambda e, x: _items(e, x)
    if issubclass(t, dict):
        return _encode_dict
    if issubclass(t, np.ndarray):
        return _encode_array
    if issubclass(t, bytes | bytearray | memoryview):
        return lambda e, x: {"$B": e.buffer(memoryview(x).cast("B"))}
    if issubclass(t, set | frozenset):
        return lambda e, x: {"$set": _items(e, x)}
    if issubclass(t, PurePath):
        return lambda e, x: str(x)
    raise WireError(f"cannot send a {t.__module__}.{t.__qualname__} over the session stream")


def _bytes_view(array: np.ndarray) -> memoryview:
    if array.dtype.hasobject:
        raise WireError("cannot send an array of Python objects over the session stream")
    return memoryview(array.reshape(-1).view(np.uint8)) if array.size else memoryview(b"")


def _dtype_json(dtype: np.dtype) -> dict[str, str]:
    # Extension types (ml_dtypes' bfloat16, float8...) have no portable ``str``: they go by name.
    if dtype.kind == "V" and dtype.fields is None and dtype.name not in ("void", f"void{dtype.itemsize * 8}"):
        return {"dtype_name": dtype.name}
    return {"dtype": dtype.str}


_PROTOCOL = "engine.session.protocol"  # its types go by their bare names (most of what a session sends)


def _type_name(cls: type) -> str:
    if cls.__module__ == _PROTOCOL:
        return cls.__qualname__
    return f"{cls.__module__}:{cls.__qualname__}"


class Compression:
    """When zlib pays for a tensor's chunk: when sending the chunk raw would take longer than compressing it
    and sending what is left. The link's speed is measured on the raw chunks sent so far (the time a write
    blocks is the time the peer takes to drain it: a local pipe is faster than zlib, ssh over a network is
    not); zlib's speed and ratio on the data from a sample of each tensor, then from its chunks. A tensor is
    not even sampled while the link is unknown (its chunks go raw and measure it) or while it is faster than
    zlib has ever been here (no data could pay: a local pipe). ``Compression(False)`` never compresses;
    ``link`` fixes the link's speed (bytes/s) instead of measuring."""

    def __init__(self, enabled: bool = True, link: float | None = None):
        self.enabled = enabled
        self.link = link  # bytes/s of raw chunks sent; None until measured
        self.fixed = link is not None
        self.fastest_zlib: float | None = None  # bytes/s: zlib's best speed seen on this link's data

    def may_pay(self) -> bool:
        """Whether compressing could pay at all now (even data that compresses to nothing)."""
        if not self.enabled or self.link is None:
            return False
        return self.fastest_zlib is None or 2 / self.fastest_zlib < 0.8 / self.link

    def pays(self, ratio: float, zlib_speed: float) -> bool:
        if not self.enabled or ratio > 0.5 or self.link is None:
            return False  # (the first chunks go raw: they measure the link)
        # raw: 1/link a second a byte; compressed: compressing, sending what is left, decompressing (about
        # as fast as compressing for level 1 on data that compresses well: measured, not assumed)
        return 2 / zlib_speed + ratio / self.link < 0.8 / self.link

    def compressed(self, nbytes: int, seconds: float) -> float:
        """zlib took ``seconds`` for ``nbytes``: its speed (bytes/s), remembered when it is the best yet."""
        speed = nbytes / max(seconds, 1e-6)
        self.fastest_zlib = speed if self.fastest_zlib is None else max(self.fastest_zlib, speed)
        return speed

    def sent_raw(self, nbytes: int, seconds: float) -> None:
        if self.fixed or nbytes < _COMPRESS_MIN or seconds <= 0:
            return
        speed = nbytes / seconds
        self.link = speed if self.link is None else 0.7 * self.link + 0.3 * speed


def encode(message: Any) -> tuple[bytes, list[memoryview], bytes]:
    """A frame's parts: head and buffer table, the buffers (views of the tensors, not copies), the message."""
    encoder = _Encoder()
    tree = encoder.value(message)
    body = _JSON.encode(tree).encode()
    table = b""  # (no buffers, no table: most messages)
    if encoder.buffers:
        descriptions = [{"n": data.nbytes, "k": 1} if data.nbytes >= _COMPRESS_MIN else {"n": data.nbytes}
                        for data in encoder.buffers]  # fmt: skip
        table = _JSON.encode(descriptions).encode()
    return _HEAD.pack(MAGIC, len(table), len(body)) + table, encoder.buffers, body


def write_frame(stream: BinaryIO, message: Any, *, compression: Compression | None = None) -> None:
    """Write ``message``'s frame: small ones in one write (the peer wakes once), big tensors in chunks, each
    raw or zlib-compressed as ``compression`` finds that it pays (``"k"`` buffers: a chunk header each)."""
    head, buffers, body = encode(message)
    small = all(b.nbytes < _COMPRESS_MIN for b in buffers)  # (bigger ones are sent in chunks)
    if small and sum(b.nbytes for b in buffers) + len(head) + len(body) <= _IO_CHUNK:
        stream.write(b"".join([head, *(bytes(b) for b in buffers), body]))
        stream.flush()
        return
    policy = compression if compression is not None else Compression(False)
    stream.write(head)
    for data in buffers:
        if data.nbytes < _COMPRESS_MIN:
            stream.write(data)
        else:
            _write_chunks(stream, data, policy)
    stream.write(body)
    stream.flush()


def _write_chunks(stream: BinaryIO, data: memoryview, policy: Compression) -> None:
    ratio: float | None = None  # how well and how fast this tensor compresses, from a sample when it may pay
    zlib_speed = 1.0
    for k in range(0, data.nbytes, CHUNK):
        chunk = data[k : k + CHUNK]
        if policy.may_pay():
            if ratio is None:
                sample = data[: min(_SAMPLE, data.nbytes)]
                # zlib's speed in this thread's CPU time: a loaded machine that preempts the thread half way
                # must not make zlib look slow (the link's speed, below, is wall time: waiting is its cost).
                start = time.thread_time()
                ratio = len(zlib.compress(sample, 1)) / sample.nbytes
                zlib_speed = policy.compressed(sample.nbytes, time.thread_time() - start)
            if policy.pays(ratio, zlib_speed):
                start = time.thread_time()
                packed = zlib.compress(chunk, 1)
                zlib_speed = policy.compressed(chunk.nbytes, time.thread_time() - start)
                ratio = len(packed) / chunk.nbytes
                stream.write(_CHUNK_HEAD.pack(len(packed), chunk.nbytes, _ZLIB))
                stream.write(packed)
                continue
        stream.write(_CHUNK_HEAD.pack(chunk.nbytes, chunk.nbytes, _RAW))
        start = time.perf_counter()
        for j in range(0, chunk.nbytes, _IO_CHUNK):  # pipe-sized writes: the reader starts on each at once
            stream.write(chunk[j : j + _IO_CHUNK])
        stream.flush()
        if k:  # (the first chunk also waits for the reader to make room for the whole tensor: not the link)
            policy.sent_raw(chunk.nbytes, time.perf_counter() - start)


# ------------------------------------------------------------------------------------------- decoding


class _Decoder:
    """Builds tagged values while ``json`` parses (``object_hook``: inner values first, in C's loop)."""

    def __init__(self, buffers: list[np.ndarray]):
        self.buffers = buffers

    def hook(self, v: dict) -> Any:
        for tag in v:  # tagged objects lead with their tag; a plain dict's keys never begin with "$"
            decode_tag = _TAGS.get(tag)
            return v if decode_tag is None else decode_tag(self, v)
        return v

    def dataclass(self, v: dict) -> Any:
        return _dataclass(v.pop("$d")).build(v)

    def array(self, v: dict) -> np.ndarray:
        dtype = _dtype(v)
        raw = self.buffer(v["$a"])
        shape = tuple(int(d) for d in v["shape"])
        if raw.nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise WireError(f"array of shape {shape} {dtype} does not match its {raw.nbytes} bytes")
        return raw.view(dtype).reshape(shape)

    def enum(self, v: dict) -> enum.Enum:
        cls = _engine_type(v["$e"])
        if not issubclass(cls, enum.Enum):
            raise WireError(f"{v['$e']} is not an enum")
        return cls(v["v"])

    def buffer(self, index: int) -> np.ndarray:
        try:
            return self.buffers[index]
        except (IndexError, TypeError):
            raise WireError(f"the message names buffer {index!r}, which the frame does not have") from None


_TAGS: dict[str, Callable[[_Decoder, dict], Any]] = {
    "$t": lambda d, v: tuple(v["$t"]),
    "$d": _Decoder.dataclass,
    "$m": lambda d, v: {_hashable(k): x for k, x in v["$m"]},
    "$a": _Decoder.array,
    "$B": lambda d, v: d.buffer(v["$B"]).tobytes(),
    "$s": lambda d, v: _dtype(v["$s"]).type(v["v"]),
    "$set": lambda d, v: set(v["$set"]),
    "$e": _Decoder.enum,
}
_NO_BUFFERS = json.JSONDecoder(object_hook=_Decoder([]).hook)  # most messages: one decoder made once


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


class _DataclassBuilder:
    """Builds one engine dataclass from its decoded fields. Most (no ``__post_init__``, no slots) are built
    without their ``__init__``: the defaults, then the fields sent, straight into the instance (a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``: three times the cost, on every
    stop record); a missing required field or an unknown one is a ``WireError`` either way."""

    def __init__(self, cls: type):
        fields = dataclasses.fields(cls)
        self.cls = cls
        self.init = frozenset(f.name for f in fields if f.init)
        self.names = frozenset(f.name for f in fields)
        self.required = frozenset(
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        self.defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        self.factories = {
            f.name: f.default_factory for f in fields if f.default_factory is not dataclasses.MISSING
        }
        params = getattr(cls, "__dataclass_params__", None)
        self.direct = (
            params is not None and params.init and not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__")
        )

    def build(self, values: dict) -> Any:
        keys = values.keys()
        if not keys <= self.names or not self.required <= keys:
            unknown, missing = sorted(keys - self.names), sorted(self.required - keys)
            raise WireError(f"{self.cls.__qualname__}: unknown fields {unknown}, missing fields {missing}")
        if self.direct:
            obj = object.__new__(self.cls)
            state = obj.__dict__
            state.update(self.defaults)
            for name, factory in self.factories.items():
                if name not in values:
                    state[name] = factory()
            state.update(values)
            return obj
        if keys <= self.init:
            return self.cls(**values)
        obj = self.cls(**{k: x for k, x in values.items() if k in self.init})
        for k, x in values.items():
            if k not in self.init:
                object.__setattr__(obj, k, x)
        return obj


_DECODABLE: dict[str, _DataclassBuilder] = {}


def _dataclass(name: str) -> _DataclassBuilder:
    """The builder of an engine dataclass by wire name."""
    known = _DECODABLE.get(name)
    if known is None:
        cls = _engine_type(name)
        if not dataclasses.is_dataclass(cls):
            raise WireError(f"{name} is not a protocol dataclass")
        known = _DECODABLE[name] = _DataclassBuilder(cls)
    return known


def _engine_type(name: str) -> type:
    """A class of IREE Lens's engine by ``module:QualName`` (a bare name: of ``engine.session.protocol``);
    nothing outside ``engine`` is built."""
    module_name, _, qualname = str(name).rpartition(":")
    module_name = module_name or _PROTOCOL
    if not (module_name == "engine" or module_name.startswith("engine.")) or not qualname:
        raise WireError(f"refusing to build {name!r}: only the engine's protocol types cross the stream")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise WireError(f"unknown protocol type {name!r} (a different IREE Lens version at the other end?)") from None
    if not isinstance(obj, type) or not str(obj.__module__).startswith("engine."):
        raise WireError(f"{name!r} is not a type of the engine")
    return obj


def small_frame(message: Any) -> bytes | None:
    """``message``'s whole frame when it has no buffers (one write), else None."""
    head, buffers, body = encode(message)
    return None if buffers else head + body


class FrameMemo:
    """Frames of small immutable messages (a command: a debugger sends the same ``Step`` again and again),
    encoded once and decoded once: equal bytes decode to equal values, and a value that hashes (frozen
    dataclasses, tuples, strings) cannot be changed by whoever receives it twice."""

    def __init__(self, size: int = 256, largest: int = 1024):
        self.size = size
        self.largest = largest  # bytes: a bigger message is rare enough not to keep
        self.frames: dict[Any, bytes] = {}
        self.values: dict[bytes, Any] = {}

    def frame(self, message: Any) -> bytes | None:
        """The frame of a hashable ``message``, made once; None for one that is not."""
        try:
            frame = self.frames.get(message)
        except TypeError:  # unhashable: encoded each time
            return None
        if frame is None:
            frame = small_frame(message)
            if frame is not None and len(frame) <= self.largest:
                self._keep(self.frames, message, frame)
        return frame

    def decoded(self, body: bytes, decode: Callable[[], Any]) -> Any:
        value = self.values.get(body)
        if value is None:
            value = decode()
            if len(body) <= self.largest and _immutable(value):
                self._keep(self.values, body, value)
        return value

    def _keep(self, table: dict, key: Any, value: Any) -> None:
        if len(table) >= self.size:
            table.clear()
        table[key] = value


def _immutable(value: Any) -> bool:
    try:
        if type(value) is dict:
            return all(type(k) is str for k in value) and hash(tuple(value.values())) is not None
        return hash(value) is not None
    except TypeError:
        return False


def read_frame(stream: BinaryIO, memo: FrameMemo | None = None) -> Any:
    """The next message of ``stream``; ``ConnectionLost`` at its end, ``WireError`` if it is not a frame.
    ``memo``: small messages without buffers seen before are not decoded again."""
    head = _read_exact(stream, _HEAD.size, at_start=True)
    magic, table_len, body_len = _HEAD.unpack(head)
    if magic != MAGIC:
        text = head.decode("utf-8", "replace")
        raise WireError(f"the stream does not carry session messages (it begins {text!r})")
    if table_len > _MAX_HEADER or body_len > _MAX_HEADER:
        raise WireError(f"a message of {table_len} + {body_len} bytes of header is not one of ours")
    decoder = _NO_BUFFERS
    if table_len:
        try:
            descriptions = json.loads(_read_exact(stream, table_len))
            if not isinstance(descriptions, list):
                raise TypeError("the buffer table is not a list")
            buffers = [_read_buffer(stream, d) for d in descriptions]
        except (ValueError, KeyError, TypeError) as e:
            raise WireError(f"a corrupt message header ({e})") from None
        except (MemoryError, OSError) as e:  # a tensor bigger than this machine can hold
            raise WireError(f"cannot receive the message's tensors here: {e!r}") from None
        decoder = json.JSONDecoder(object_hook=_Decoder(buffers).hook)
    body = _read_exact(stream, body_len)
    if memo is not None and not table_len:
        return memo.decoded(body, lambda: _decode_body(decoder, body))
    return _decode_body(decoder, body)


def _decode_body(decoder: json.JSONDecoder, body: bytes) -> Any:
    try:
        return decoder.decode(body.decode())
    except (ValueError, KeyError, TypeError) as e:  # (WireError, a LensError, passes through)
        raise WireError(f"a corrupt message ({type(e).__name__}: {e})") from None


def _read_buffer(stream: BinaryIO, description: dict) -> np.ndarray:
    size = int(description["n"])
    out = _prefaulted(size)
    if not description.get("k"):
        _read_into(stream, memoryview(out))
        return out
    at = 0
    while at < size:  # chunks, each after its header: raw, or zlib
        wire_size, raw_size, codec = _CHUNK_HEAD.unpack(_read_exact(stream, _CHUNK_HEAD.size))
        if at + raw_size > size or raw_size == 0:
            raise WireError("a tensor's chunks do not add up to its size")
        if codec == _RAW and wire_size == raw_size:
            _read_into(stream, memoryview(out)[at : at + raw_size])
        elif codec == _ZLIB:
            piece = zlib.decompress(_read_exact(stream, wire_size))
            if len(piece) != raw_size:
                raise WireError("a compressed chunk is not the size it says")
            out[at : at + raw_size] = np.frombuffer(piece, np.uint8)
        else:
            raise WireError(f"a chunk in an unknown encoding ({codec})")
        at += raw_size
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
