"""Function inputs and outputs the way IREE's tools take and print them.

``--input=`` strings as ``iree-run-module`` parses them (``iree/tooling/function_io.c``): ``2x3xf32=1 2 3 4 5 6``,
a splat ``4xf32=0.5``, a scalar ``7`` or ``1.5`` (typed by the function's calling convention), ``(null)``,
``@file.npy`` (and, beyond IREE, ``@file.npz`` for every array in the archive, in order). Results print as
``iree-run-module`` prints them (``result[0]: hal.buffer_view`` then ``4xf32=1 2 3 4``; at most 1024 elements,
then ``...``) and can be written with ``--output=@file.npy`` / ``+file.npy`` (append).

Both engines exchange values as the plain data below, so their outputs can be compared and printed alike.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import LensError
from engine.runtime import element_types as et
from engine.runtime.element_types import ElementType
from engine.runtime.hal.constants import format_shape_and_type

DEFAULT_MAX_ELEMENT_COUNT = 1024  # iree-run-module --output_max_element_count


class InputError(LensError):
    """An ``--input`` string or file could not be turned into a function argument."""


@dataclass(frozen=True)
class Tensor:
    """The contents of a HAL buffer view on the host: a dense row-major array and its IREE element type."""

    array: np.ndarray
    element_type: ElementType

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> Tensor:
        array = np.asarray(array, order="C")  # keeps a rank-0 array rank 0 (ascontiguousarray does not)
        return cls(array, et.element_type_for_dtype(array.dtype))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)


@dataclass(frozen=True)
class Scalar:
    """A primitive VM value: ``kind`` is ``i32``, ``i64``, ``f32`` or ``f64``."""

    kind: str
    value: int | float


@dataclass(frozen=True)
class OpaqueRef:
    """A ref result the tools cannot print (``(no printer)``), e.g. a ``!hal.buffer``; or a null ref (type ``None``)."""

    type_name: str | None


@dataclass(frozen=True)
class Storage:
    """``--input=&512xi8``: a HAL buffer sized and filled as ``tensor`` would be, passed without its shape
    (``!hal.buffer``): the storage a function takes for its transients (``iree.abi.transients``) or for an
    output, as iree-run-module's ``&`` prefix."""

    tensor: Tensor


Value = Tensor | Scalar | OpaqueRef | Storage | list

CCONV_SCALAR_KINDS = {"i": "i32", "I": "i64", "f": "f32", "F": "f64"}


# ---------------------------------------------------------------------------------------------- parsing


def split_cconv(cconv: str) -> tuple[str, str]:
    """``0rIf_r`` -> (``rIf``, ``r``): the argument and result characters of a calling convention."""
    if not cconv.startswith("0"):
        raise InputError(f"unsupported calling convention {cconv!r}")
    args, _, results = cconv[1:].partition("_")
    return ("" if args == "v" else args), ("" if results == "v" else results)


def split_shape_and_type(metadata: str) -> tuple[tuple[int, ...], str]:
    """``2x3xf32`` -> ((2, 3), "f32"), as iree_hal_parse_shape_and_element_type splits it: the type follows the
    last ``x``; an empty shape (``i32``, or ``xi32`` as a rank-0 shape joined naively) is rank 0.
    ``ValueError`` for a dimension that is not a number."""
    shape_text, _, type_text = metadata.strip().rpartition("x")
    return (tuple(int(p) for p in shape_text.split("x")) if shape_text else ()), type_text


def _parse_shape_and_type(metadata: str) -> tuple[tuple[int, ...], ElementType]:
    try:
        shape, type_text = split_shape_and_type(metadata)
        element_type = et.parse_element_type(type_text)
    except ValueError as e:
        raise InputError(f"invalid shape and element type `{metadata}`: {e}") from None
    if any(d < 0 for d in shape):
        raise InputError(f"invalid shape `{metadata}`: negative dimension")
    return shape, element_type


_SEPARATORS = re.compile(r"[\s,\[\]]+")


def _parse_element(token: str, element_type: ElementType):
    try:
        if element_type.is_float:
            return float(token)
        if element_type.numerical_type == et.BOOLEAN:
            if len(token) == 2 and all(c in "0123456789abcdefABCDEF" for c in token):
                return int(token, 16)  # IREE's own form: each byte as two hex digits (01 00), as it prints them
            return {"true": 1, "false": 0}.get(token.lower(), None) if token.isalpha() else int(token)
        return int(token, 10)
    except ValueError:
        raise InputError(f"cannot parse `{token}` as {element_type.name}") from None


# IREE's 8-bit float types and ml_dtypes' numpy types for them (numpy has none; the HAL's storage is their bits).
def _f8_dtype(element_type: ElementType) -> np.dtype | None:
    """The ml_dtypes type of an f8 element type (None for others)."""
    return et.ml_dtype(element_type.name) if element_type.name.startswith("f8") else None


def _float_to_storage(values: list[float], element_type: ElementType) -> np.ndarray:
    with np.errstate(over="ignore"):  # 70000 as f16 is INF, as IREE parses it: not a warning on stderr
        return _narrowed(values, element_type)


def _narrowed(values: list[float], element_type: ElementType) -> np.ndarray:
    f8 = _f8_dtype(element_type)
    if f8 is not None:
        # Parsed as IREE's tools parse them: to f32, then rounded to nearest even in the 8-bit type (its bits
        # are what the HAL stores). Bit for bit iree-run-module's, but for an f8E4M3FN subnormal: IREE 3.13
        # flushes 0.001 to 0 where rounding gives the smallest subnormal (its FNUZ twin rounds).
        return np.asarray(values, dtype=np.float32).astype(f8).view(np.uint8)
    if element_type.numerical_type == et.FLOAT_BRAIN:
        # bf16 = the top 16 bits of the f32 pattern, rounded to nearest even.
        bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.astype(np.uint16)
    return np.asarray(values, dtype=element_type.dtype)


def parse_tensor(spec: str) -> Tensor:
    """``2x3xf32=1 2 3 4 5 6`` (or a splat ``2x3xf32=1``, or ``2x3xf32`` for zeros) as a Tensor."""
    metadata = spec.partition("=")[0]
    try:
        return _parse_tensor(spec)
    except MemoryError:
        raise InputError(f"`{metadata.strip()}` is too large to allocate") from None
    except OSError as e:  # contents `@path`: a file that cannot be read
        raise InputError(f"cannot read `{spec.partition('=')[2].strip()}`: {e.strerror or e}") from None
    except (OverflowError, ValueError, TypeError) as e:  # a value numpy cannot store in the element type
        raise InputError(f"`{spec}` does not fit its element type: {e}") from None


def _parse_tensor(spec: str) -> Tensor:
    metadata, has_data, contents = spec.partition("=")
    shape, element_type = _parse_shape_and_type(metadata)
    if element_type.dtype.kind == "V":  # e.g. i72: IREE can name it, numpy has no arithmetic type for it
        raise InputError(f"element type {element_type.name} cannot be parsed from text")
    if element_type.packed:  # IREE packs them (two i4 a byte); its own parser refuses them too
        raise InputError(f"`{metadata.strip()}`: {element_type.name} elements are packed several to a byte, and "
                         "cannot be given as an input here (nor to iree-run-module); pass a wider type to the "
                         "program and narrow it inside")  # fmt: skip
    count = int(np.prod(shape, dtype=np.int64))
    if contents.strip().startswith(("@", "+")):
        path = contents.strip()[1:]
        raw = np.fromfile(path, dtype=np.uint8)
        nbytes = count * element_type.byte_size
        if raw.size < nbytes:
            raise InputError(f"file {path} has {raw.size} bytes; `{metadata}` needs {nbytes}")
        return Tensor(raw[:nbytes].view(element_type.dtype).reshape(shape), element_type)
    tokens = [t for t in _SEPARATORS.split(contents) if t] if has_data else []
    if not tokens:
        return Tensor(np.zeros(shape, dtype=element_type.dtype), element_type)
    values = [_parse_element(t, element_type) for t in tokens]
    if len(values) == 1 and count > 1:
        values = values * count
    elif len(values) > count:
        raise InputError(
            f"output data buffer overflow: element_capacity={count} < dst_i={count}+ in `{spec}`"
        )
    elif len(values) < count:
        raise InputError(
            f"input data string underflow: dst_i={len(values)} < element_capacity={count} in `{spec}`"
        )
    if element_type.is_float:
        array = _float_to_storage(values, element_type)
    else:
        bits = element_type.dtype.itemsize * 8
        mask = (1 << bits) - 1
        wrapped = [(v & mask) for v in values]
        array = np.asarray(wrapped, dtype=np.dtype(f"uint{bits}")).view(element_type.dtype)
    return Tensor(array.reshape(shape), element_type)


# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor keeps its recursion
# depth in state the threads share: two threads parsing at once fail with "AST constructor recursion depth
# mismatch" (diverge's runs A and B read their inputs on two threads; seen once in CI). One at a time.
NPY_READ_LOCK = threading.Lock()


def read_numpy_arrays(path: str | Path, cannot_read: Callable[[Exception], Exception]) -> list[tuple[str, np.ndarray]]:
    """The arrays of a ``.npy`` (one, named by the file) or ``.npz`` (each, by its key), in order, read one
    file at a time (``NPY_READ_LOCK``); ``cannot_read(e)`` is raised when numpy cannot read the file or one
    of its members (the caller's error, naming the file)."""
    with NPY_READ_LOCK:
        try:
            loaded = np.load(path, allow_pickle=False)
        except Exception as e:  # numpy raises several types for a bad file
            raise cannot_read(e) from None
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                try:
                    # Members are read lazily: a damaged member fails here, with zipfile's or numpy's errors.
                    return [(k, loaded[k]) for k in loaded.files]
                except Exception as e:  # noqa: BLE001 - numpy and zipfile raise several types
                    raise cannot_read(e) from None
    return [(Path(path).name, loaded)]


def _load_numpy_file(path: str) -> list[Tensor]:
    if not Path(path).exists():
        raise InputError(f"input file {path} does not exist")
    arrays = read_numpy_arrays(path, lambda e: InputError(f"cannot read {path} as a numpy file: {e}"))
    return [Tensor.from_numpy(array) for _, array in arrays]


def parse_inputs(specs: list[str], argument_kinds: str) -> list[Value]:
    """Turn ``--input`` strings into values for a function whose cconv arguments are ``argument_kinds``.

    ``argument_kinds`` is the argument part of the calling convention (``rrI``); spans are not supported as
    top-level arguments of exported functions.
    """
    values: list[Value] = []
    for raw in specs:
        spec = raw.strip()
        index = len(values)
        kind = argument_kinds[index] if index < len(argument_kinds) else "r"
        try:
            if not spec:
                raise InputError("no value specified for input")
            if spec in ("(null)", "(ignored)"):
                values.append(OpaqueRef(None))
            elif spec[0] in "@+*":
                path = spec[1:]
                if not (path.endswith(".npy") or path.endswith(".npz")):
                    raise InputError("only numpy (.npy, .npz) files are supported for metadata-less input")
                values.extend(_load_numpy_file(path))
            elif kind in CCONV_SCALAR_KINDS:
                text = spec.partition("=")[2] if "=" in spec else spec
                scalar_kind = CCONV_SCALAR_KINDS[kind]
                try:
                    number = float(text) if scalar_kind[0] == "f" else int(text, 10)
                except ValueError:
                    raise InputError(f"cannot parse `{text}` as {scalar_kind}") from None
                values.append(Scalar(scalar_kind, number))
            else:
                if "=" not in spec and "x" not in spec:
                    raise InputError(
                        "invalid tensor specification, requires at least a shape/type (`4x2xf32=...`)"
                    )
                if spec.startswith("&"):
                    values.append(Storage(parse_tensor(spec[1:])))
                else:
                    values.append(parse_tensor(spec))
        except InputError as e:
            raise InputError(f"{e}; parsing input `{spec}`") from None
    return values


# ---------------------------------------------------------------------------------------------- printing


def _element_to_text(value, element_type: ElementType) -> str:
    if element_type.is_float:
        if element_type.numerical_type == et.FLOAT_BRAIN:
            value = float(np.array([int(value) << 16], dtype=np.uint32).view(np.float32)[0])
        return "%G" % float(value)
    return str(int(value))


def format_tensor(tensor: Tensor, max_element_count: int = DEFAULT_MAX_ELEMENT_COUNT) -> str:
    """``4x2xf32=[1 2][3 4]...``: IREE's ``iree_hal_buffer_view_format``."""
    shape = tensor.shape
    prefix = format_shape_and_type(shape, tensor.element_type.name)
    flat = tensor.array.reshape(-1)
    f8 = _f8_dtype(tensor.element_type)
    if f8 is not None:  # stored as bits: their values, printed as IREE prints them (%G of the f32 they widen to)
        flat = flat.view(np.uint8).view(f8).astype(np.float32)
    if tensor.element_type.numerical_type == et.BOOLEAN:
        flat = flat.view(np.uint8)
    # IREE formats the types it has no number format for (i1, complex) as each element's bytes in hex.
    as_bytes = tensor.element_type.numerical_type == et.BOOLEAN or flat.dtype.kind == "c"
    if as_bytes and flat.dtype.itemsize > 1:
        flat = np.ascontiguousarray(flat).view(np.uint8).reshape(flat.size, flat.dtype.itemsize)
    budget = [max_element_count]
    # Converting to Python scalars once keeps the per-element formatting cheap.
    items = flat[: min(flat.size, max_element_count + 1)].tolist() if flat.size else []

    element_type = tensor.element_type
    plain_float = element_type.is_float and element_type.numerical_type != et.FLOAT_BRAIN and not as_bytes

    def leaf(offset: int, length: int) -> str:
        count = min(budget[0], length)
        budget[0] -= count
        if plain_float:  # the common case, without a call per element
            text = " ".join(["%G" % v for v in items[offset : offset + count]])
        elif as_bytes:
            text = " ".join(["".join("%02X" % b for b in v) if isinstance(v, list) else "%02X" % v
                             for v in items[offset : offset + count]])  # fmt: skip
        else:
            text = " ".join(_element_to_text(items[offset + i], element_type) for i in range(count))
        return text + ("..." if count < length else "")

    def recurse(dims: tuple[int, ...], offset: int) -> str:
        if len(dims) == 1:
            return leaf(offset, dims[0])
        stride = int(np.prod(dims[1:], dtype=np.int64))
        return "".join("[" + recurse(dims[1:], offset + i * stride) + "]" for i in range(dims[0]))

    body = recurse(shape if shape else (1,), 0)
    return f"{prefix}={body}"


def format_value(value: Value, max_element_count: int = DEFAULT_MAX_ELEMENT_COUNT) -> str:
    if isinstance(value, Scalar):
        if value.kind == "f32":
            return "f32=" + "%g" % float(np.float32(value.value))
        if value.kind == "f64":
            return "f64=" + "%g" % float(value.value)
        return f"{value.kind}={int(value.value)}"
    if isinstance(value, Tensor):
        return "hal.buffer_view\n" + format_tensor(value, max_element_count)
    if isinstance(value, list):
        lines = "".join(
            f"child_list[{i}]: {format_value(v, max_element_count)}\n" for i, v in enumerate(value)
        )
        return "vm.list\n" + lines
    if isinstance(value, OpaqueRef) and value.type_name is not None:
        return f"{value.type_name}\n(no printer)"
    return "(null)"


def format_results(values: list[Value], max_element_count: int = DEFAULT_MAX_ELEMENT_COUNT) -> str:
    """All results the way ``iree-run-module`` prints them (without its ``EXEC @fn`` header)."""
    return "".join(f"result[{i}]: {format_value(v, max_element_count)}\n" for i, v in enumerate(values))


# ---------------------------------------------------------------------------------------------- writing


def write_outputs(specs: list[str], values: list[Value], notes: list[str] | None = None) -> str:
    """Apply ``--output=`` specs to results in order; returns the text of results sent to stdout (``-``).

    ``@f.npy`` writes a new file, ``+f.npy`` appends to it (numpy reads consecutive arrays with repeated
    ``np.load`` on one open file), ``-`` prints, an empty spec drops the result. A type .npy cannot hold
    (bf16, f8: iree-run-module refuses them) is written as its bits, and ``notes`` says so.
    """
    printed = []
    for i, value in enumerate(values):
        spec = specs[i] if i < len(specs) else "-"
        if spec == "-":
            printed.append(f"result[{i}]: {format_value(value)}\n")
        elif spec == "":
            continue
        elif spec[0] in "@+" and spec.endswith(".npy"):
            if not isinstance(value, Tensor):
                raise InputError(f"result[{i}] is not a tensor; only tensors can be written to {spec[1:]}")
            with open(spec[1:], "wb" if spec[0] == "@" else "ab") as f:
                np.save(f, value.array, allow_pickle=False)
            stored_as = et.ML_DTYPE_NAMES.get(value.element_type.name)  # kept as bits: the type to view them as
            if stored_as is not None and notes is not None:
                notes.append(f"result[{i}] ({format_tensor(value, 0).split('=')[0]}) is in {spec[1:]} as its bits "
                             f"({value.array.dtype}): .npy has no {value.element_type.name}; read it with "
                             f"ml_dtypes.{stored_as}")  # fmt: skip
        else:
            raise InputError(f"unsupported output specification `{spec}` (use -, @file.npy or +file.npy)")
    return "".join(printed)
