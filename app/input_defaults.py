"""Inputs for a function, made from its signature so a user can run it without typing any.

The shapes and element types come from IREE's reflection (the export's ``iree.abi.declaration``, e.g.
``sync func @main(%input0: tensor<2x16xf32>, %input1: i32) -> ...``); a function without one falls back
to its calling convention (``0rr_r``: two refs, shapes unknown, so none can be made). Dynamic
dimensions (``?``) become 1. Values are written in ``iree-run-module``'s ``--input`` syntax, which the
stepper's inputs line takes; large random tensors go to a ``.npy`` file instead of a long line.
No Qt here: this runs in tests and on the worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.runtime.hal.constants import format_shape_and_type
from engine.runtime.vmfb.module import ASYNC_SUFFIX, caller_calling_convention, takes_fences
from engine.temp_caches import scratch_dir

FILLS = ("zeros", "ones", "random")
DYNAMIC_DIM = 1  # what a ``?`` dimension becomes
MAX_INLINE_RANDOM = 256  # random tensors with more elements are written to a .npy file

_ARG = re.compile(r"%[\w$.-]+\s*:\s*(?P<type>tensor<(?:[^<>]|<[^<>]*>)*>|[a-z]+\d*|![\w.]+)")
_TENSOR = re.compile(r"tensor<(?P<dims>(?:(?:\d+|\?)x)*)(?P<element>.+)>")
# The declaration's complex element types in IREE's spelling (a pair of floats: complex<f32> is cf64).
_COMPLEX = {"complex<f32>": "cf64", "complex<f64>": "cf128"}
_NUMPY_OF = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "bf16": None,  # no numpy type: written as a splat, not as a .npy file
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "si8": np.int8,
    "si16": np.int16,
    "si32": np.int32,
    "si64": np.int64,
    "ui8": np.uint8,
    "ui16": np.uint16,
    "ui32": np.uint32,
    "ui64": np.uint64,
    "cf64": np.complex64,
    "cf128": np.complex128,
}


@dataclass(frozen=True)
class Argument:
    """One argument: a tensor (``shape`` is a tuple) or a scalar (``shape`` is ``None``)."""

    element_type: str  # IREE's spelling: f32, i32, si8, ...; a ref type (``!hal.buffer``) when not a value
    shape: tuple[int, ...] | None
    storage: bool = False  # a buffer alone (``--input=&512xi8``): a function's transients storage

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


def parse_declaration(declaration: str) -> list[Argument] | None:
    """The arguments of an ``iree.abi.declaration``, or ``None`` when it cannot be read."""
    m = re.search(r"@[\w$.-]+\((?P<args>.*?)\)\s*(->|$)", declaration)
    if m is None:
        return None
    args: list[Argument] = []
    for a in _ARG.finditer(m["args"]):
        text = a["type"]
        tensor = _TENSOR.fullmatch(text)
        if tensor is not None:
            dims = tuple(DYNAMIC_DIM if d == "?" else int(d) for d in tensor["dims"].split("x") if d)
            args.append(Argument(_COMPLEX.get(tensor["element"], tensor["element"]), dims))
        else:
            args.append(Argument(text, None))
    return args


def function_arguments(module: Any, function: str) -> list[Argument] | None:
    """The arguments of exported ``function`` of a ``VmfbModule``, or ``None`` when unknown."""
    for export in getattr(module, "exports", []):
        if export.name != function:
            continue
        attrs = dict(getattr(export.signature, "attrs", {}) or {})
        declaration = attrs.get("iree.abi.declaration")
        if declaration:
            return _with_storage(parse_declaration(declaration), attrs)
        twin = function.removesuffix(ASYNC_SUFFIX)
        if twin != function and takes_fences(module, function):
            return function_arguments(module, twin)  # a torch import's F$async takes what F takes, and fences
        cconv = caller_calling_convention(module, function)
        args = cconv[1:].split("_", 1)[0] if cconv else ""
        if args in ("", "v"):
            return []
        if "r" in args:
            return _asserted(module, function)  # buffers: the shapes the host code checks, if it does
        return [Argument({"i": "i32", "I": "i64", "f": "f32", "F": "f64"}.get(c, "i32"), None) for c in args]
    return None


def _with_storage(args: list[Argument] | None, attrs: dict[str, str]) -> list[Argument] | None:
    """The declared arguments with the transients storage sized as the reflection says (``&512xi8``); None
    when another ref argument (a buffer of unknown size, a list) leaves an input nobody can choose for it."""
    from engine.runtime.vmfb.transients import transients_in

    if args is None:
        return None
    transients = transients_in(attrs)
    if transients is not None and transients.size is not None and transients.argument < len(args):
        args = list(args)
        args[transients.argument] = Argument("i8", (transients.size,), storage=True)
    return None if any(a.element_type.startswith("!") for a in args) else args


def _asserted(module: Any, function: str) -> list[Argument] | None:
    """The arguments as the function's ``hal.buffer_view.assert`` calls check them (PyTorch and ONNX
    imports have no declaration); ``None`` when an argument is not checked with constant shapes."""
    from engine.runtime.vmfb.input_asserts import asserted_inputs

    try:
        found = asserted_inputs(module, function)
    except Exception:  # a module the reader can list but not walk: shapes unknown, said by the caller
        return None
    return None if found is None else [Argument(a.element_type, a.shape) for a in found]


def _floating(element_type: str) -> bool:
    return element_type.startswith(("f", "bf", "cf"))  # complex: its real parts (our parser reads 1 as 1+0j)


def _literal(value: float, element_type: str) -> str:
    if _floating(element_type):
        return f"{value:g}" if value != int(value) else f"{int(value)}"
    return str(int(value))


def default_input(arg: Argument, fill: str = "zeros", seed: int = 0, folder: Path | None = None) -> str:
    """One ``--input`` value for ``arg`` filled with ``fill`` (one of ``FILLS``)."""
    if fill not in FILLS:
        raise ValueError(f"unknown fill {fill!r}; one of {', '.join(FILLS)}")
    if arg.storage:  # storage the function writes before it reads: its size is all there is to give
        return "&" + format_shape_and_type(arg.shape, arg.element_type)
    if arg.is_tensor and arg.shape and 0 in arg.shape:
        # No elements: IREE's parser refuses any value ("output data overflow: element_capacity=0").
        return format_shape_and_type(arg.shape, arg.element_type)
    if fill != "random":
        value = "1" if fill == "ones" else "0"
        return f"{format_shape_and_type(arg.shape, arg.element_type)}={value}" if arg.is_tensor else value
    rng = np.random.default_rng(seed)
    count = int(np.prod(arg.shape)) if arg.is_tensor else 1
    floating = _floating(arg.element_type)
    values = rng.uniform(-1.0, 1.0, count) if floating else rng.integers(0, 8, count)
    if not arg.is_tensor:
        return _literal(round(float(values[0]), 3), arg.element_type)
    dtype = _NUMPY_OF.get(arg.element_type)
    if count > MAX_INLINE_RANDOM and dtype is not None:
        folder = folder or scratch_dir("iree-lens-inputs-")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"random_{format_shape_and_type(arg.shape, arg.element_type)}_{seed}.npy"
        np.save(path, values.astype(dtype).reshape(arg.shape))
        return f"@{path}"
    text = " ".join(_literal(round(float(v), 3), arg.element_type) for v in values)
    return f"{format_shape_and_type(arg.shape, arg.element_type)}={text}"


def default_inputs(
    module: Any, function: str, fill: str = "zeros", folder: Path | None = None
) -> tuple[str, ...] | None:
    """Inputs for every argument of ``function``, or ``None`` when its signature does not say enough."""
    args = function_arguments(module, function)
    if args is None:
        return None
    return tuple(default_input(a, fill, seed=i, folder=folder) for i, a in enumerate(args))


def numpy_inputs(path: Path) -> tuple[str, ...]:
    """The ``--input`` values for a ``.npy`` (one input) or ``.npz`` (one per member, in order) file."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        with np.load(path, allow_pickle=False) as data:
            count = len(data.files)
        # iree-run-module's @file.npz would be one input; our engine reads every member in order.
        return (f"@{path}",) if count else ()
    return (f"@{path}",)
