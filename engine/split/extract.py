"""A dispatch as a standalone tensor program: the body of a ``flow.executable``'s function, as IREE's flow
phase holds it (before codegen), made into one public ``func.func @main`` whose arguments are the
dispatch's tensor operands and whose results are its results.

The rewrite, on IREE's own MLIR Python API (``iree.compiler.ir``):

* each ``iree_tensor_ext.dispatch.tensor.load`` becomes the argument itself (a whole load) or a
  ``tensor.extract_slice`` of it;
* each ``iree_tensor_ext.dispatch.tensor.store`` becomes part of a result: a whole store into a write-only
  binding is the result; partial stores are ``tensor.insert_slice``s, in program order, into the tied
  operand (a ``readwrite`` binding: what the dispatch did not write keeps the operand's values) or into a
  ``tensor.empty`` (a write-only binding stored in pieces);
* a scalar (``index``) operand is derived where the host says what it is: the dynamic dimension of a
  tensor operand (``tensor.dim``), a constant of the host function, or a dimension of a result (the
  captured shape, given when the test is built); anything else is refused with the reason;
* ``iree_tensor_ext.dispatch.workload.ordinal`` and ``flow.dispatch.tie_shape`` are dropped (they only
  name a workload operand and a binding's dynamic sizes).

Weights folded into the dispatch (``dense_resource``) travel along: the printer writes the blobs the
function refers to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.errors import LensError

_LOAD = "iree_tensor_ext.dispatch.tensor.load"
_STORE = "iree_tensor_ext.dispatch.tensor.store"
_ORDINAL = "iree_tensor_ext.dispatch.workload.ordinal"
_TIE_SHAPE = "flow.dispatch.tie_shape"
_DYNAMIC = -(2**63)  # MLIR's ShapedType::kDynamic in static_offsets/sizes/strides


class SplitError(LensError):
    """A dispatch cannot be made a standalone test (the reason names what is missing)."""


@dataclass(frozen=True)
class ScalarSource:
    """Where a scalar operand's value comes from in the standalone test: ``dim`` of tensor operand
    ``operand`` (its position among the dispatch's operands) at dimension ``dim``; ``result_dim`` of result
    ``operand`` at ``dim`` (known from the captured outputs); or ``constant`` ``value``."""

    kind: str
    operand: int = 0
    dim: int = 0
    value: int | float = 0


@dataclass
class DispatchSignature:
    """How one ``flow.dispatch`` site maps onto its executable function's arguments."""

    entry: str  # ``executable::export``
    export: str
    operand_types: list[str]  # the host operands' types (tensor or scalar), in order
    tensor_operands: list[int]  # positions of the tensor operands (the test's arguments)
    tied: list[int]  # per result: the operand it is tied to, or -1
    scalars: dict[int, ScalarSource] = field(default_factory=dict)  # operand position -> its source
    unknown_scalars: dict[int, str] = field(default_factory=dict)  # operand position -> why unknown
    loc: str | None = None  # source location of the dispatch's root op, when the snapshot carries it


def _ir():
    from iree.compiler import ir  # heavy import, only when tests are written

    return ir


def _is_tensor(type_text: str) -> bool:
    return type_text.startswith("tensor<")


def _segments(op, count: int) -> list[list]:
    """``op``'s operands split by its ``operandSegmentSizes``."""
    ir = _ir()
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    out, at = [], 0
    for size in sizes[:count] if count else sizes:
        out.append(operands[at : at + size])
        at += size
    return out


def _dynamic_positions(type_) -> list[int]:
    ir = _ir()
    shaped = ir.ShapedType(type_)
    return [i for i in range(shaped.rank) if shaped.is_dynamic_dim(i)]


def dispatch_signatures(module) -> dict[str, DispatchSignature]:
    """Every ``flow.dispatch`` of the host functions and initializers, by entry point (the first site of
    each)."""
    ir = _ir()
    found: dict[str, DispatchSignature] = {}

    def visit(op):
        if op.name == "flow.dispatch":
            entry = str(ir.ArrayAttr(op.attributes["entry_points"])[0])
            key = entry.lstrip("@").replace("::@", "::")
            if key not in found:
                found[key] = _signature(op, key)
        return ir.WalkResult.ADVANCE

    for top in module.body.operations:
        # The initializers' dispatches too: with const-eval off, a kernel may run only there.
        if top.operation.name in ("util.func", "func.func", "util.initializer"):
            top.operation.walk(visit)
    return found


def instrument_dispatches(module) -> int:
    """Trace points around every ``flow.dispatch`` of ``module``'s host functions and initializers, as IREE's
    ``--iree-flow-trace-dispatch-tensors`` writes them (``flow.tensor.trace "exe::export inputs"`` with the
    tensor operands before, ``... outputs"`` with the results after), but at any depth: IREE's pass leaves
    the dispatches inside a loop (``scf.for``) without any. Returns how many dispatches were instrumented."""
    ir = _ir()
    from iree.compiler.dialects import flow

    dispatches = []

    def visit(op):
        if op.name == "flow.dispatch":
            dispatches.append(op)
        return ir.WalkResult.ADVANCE

    for top in module.body.operations:
        if top.operation.name in ("util.func", "func.func", "util.initializer"):
            top.operation.walk(visit)
    for op in dispatches:
        with op.context, op.location:
            entry = str(ir.ArrayAttr(op.attributes["entry_points"])[0])
            key = entry.lstrip("@").replace("::@", "::")
            _, arguments, argument_dims, result_dims = _segments(op, 4)
            tied_attr = op.attributes["tied_operands"] if "tied_operands" in op.attributes else None
            tied = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(tied_attr)] if tied_attr is not None else []
            tied += [-1] * (len(op.results) - len(tied))
            dims_of: dict[int, list] = {}  # operand position -> its dynamic dims
            at = 0
            values = []
            for i, v in enumerate(arguments):
                if not _is_tensor(str(v.type)):
                    continue
                count = len(_dynamic_positions(v.type))
                dims_of[i] = list(argument_dims[at : at + count])
                at += count
                values.append(v)
            if values:  # an empty trace prints as text iree-compile cannot parse: the split begins it at its outputs
                flow.TensorTraceOp(f"{key} inputs", values, [d for i in sorted(dims_of) for d in dims_of[i]],
                                   ip=ir.InsertionPoint(op))  # fmt: skip
            outputs, output_dims, at = [], [], 0
            for r, result in enumerate(op.results):
                if not _is_tensor(str(result.type)):
                    continue
                if tied[r] >= 0:
                    output_dims += dims_of.get(tied[r], [])
                else:
                    count = len(_dynamic_positions(result.type))
                    output_dims += list(result_dims[at : at + count])
                    at += count
                outputs.append(result)
            after = flow.TensorTraceOp(f"{key} outputs", outputs, output_dims, ip=ir.InsertionPoint(op))
            after.operation.move_after(op)
    return len(dispatches)


def _signature(op, key: str) -> DispatchSignature:
    ir = _ir()
    workload, arguments, argument_dims, result_dims = _segments(op, 4)
    tied_attr = op.attributes["tied_operands"] if "tied_operands" in op.attributes else None
    tied = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(tied_attr)] if tied_attr is not None else []
    tied += [-1] * (len(op.results) - len(tied))
    types = [str(v.type) for v in arguments]
    sig = DispatchSignature(
        entry=key,
        export=key.split("::")[-1],
        operand_types=types,
        tensor_operands=[i for i, t in enumerate(types) if _is_tensor(t)],
        tied=tied,
        loc=_source_location(op.location),
    )
    # Which operand each dynamic dimension value belongs to.
    dim_of: list[tuple[object, ScalarSource]] = []
    at = 0
    for i, v in enumerate(arguments):
        if not _is_tensor(types[i]):
            continue
        for d in _dynamic_positions(v.type):
            dim_of.append((argument_dims[at], ScalarSource("dim", sig.tensor_operands.index(i), d)))
            at += 1
    at = 0
    for r, result in enumerate(op.results):
        if tied[r] >= 0 or not str(result.type).startswith("tensor<"):
            continue
        for d in _dynamic_positions(result.type):
            if at < len(result_dims):
                dim_of.append((result_dims[at], ScalarSource("result_dim", r, d)))
            at += 1
    for i, v in enumerate(arguments):
        if _is_tensor(types[i]):
            continue
        source = next((s for value, s in dim_of if value == v), None)
        if source is None:
            source = _constant_source(v)
        if source is None:
            sig.unknown_scalars[i] = f"operand {i} ({types[i]}) is computed by the host, not a dimension or constant"
        else:
            sig.scalars[i] = source
    return sig


def _constant_source(value) -> ScalarSource | None:
    ir = _ir()
    owner = value.owner
    if not isinstance(owner, ir.OpView) and not isinstance(owner, ir.Operation):
        return None
    name = owner.name if isinstance(owner, ir.Operation) else owner.operation.name
    if name != "arith.constant":
        return None
    attr = owner.attributes["value"]
    try:
        return ScalarSource("constant", value=ir.IntegerAttr(attr).value)
    except ValueError:
        pass
    try:
        return ScalarSource("constant", value=ir.FloatAttr(attr).value)
    except ValueError:
        return None


def _source_location(location) -> str | None:
    """``file:line`` of the first file location inside ``location`` (fused and named ones unwrapped)."""
    text = str(location)
    found = re.search(r'"([^"]+)":(\d+)(?::(\d+))?', text)
    return f"{found.group(1)}:{found.group(2)}" if found else None


def executable_functions(module) -> dict[str, object]:
    """``executable::export`` -> the ``func.func`` inside each ``flow.executable`` of ``module``."""
    ir = _ir()
    found: dict[str, object] = {}
    for top in module.body.operations:
        if top.operation.name != "flow.executable":
            continue
        exe = ir.StringAttr(top.operation.attributes["sym_name"]).value
        for inner in top.operation.regions[0].blocks[0].operations:
            if inner.operation.name != "builtin.module":
                continue
            for fn in inner.operation.regions[0].blocks[0].operations:
                if fn.operation.name == "func.func":
                    name = ir.StringAttr(fn.operation.attributes["sym_name"]).value
                    found[f"{exe}::{name}"] = fn.operation
    return found


@dataclass(frozen=True)
class StandaloneTest:
    text: str  # the MLIR module holding ``main``
    arguments: list[str]  # main's argument types
    results: list[str]  # main's result types


def _array(op, name: str) -> list[int]:
    ir = _ir()
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def standalone_test(
    function, sig: DispatchSignature, result_shapes: list[tuple[int, ...]] | None = None
) -> StandaloneTest:
    """The test module of one dispatch: ``function`` (an executable's ``func.func``) cloned into a new module
    and rewritten (see the module doc). ``result_shapes`` (captured) size dynamic results the host derives."""
    if sig.unknown_scalars:
        raise SplitError("; ".join(sig.unknown_scalars.values()))
    ir = _ir()
    ctx = function.context
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        fn = function.clone(ip=ir.InsertionPoint(module.body))
        block = fn.regions[0].blocks[0]
        args = list(block.arguments)
        result_args = _result_arguments(sig, len(args))
        ops = list(block.operations)
        ret = ops[-1]
        # Tensor operands become tensor arguments; scalar operands, values derived at the top of the function.
        for i in sig.tensor_operands:
            args[i].set_type(ir.Type.parse(sig.operand_types[i]))
        _derive_scalars(ir, sig, args, ops[0], result_shapes)
        _drop_workload_markers(fn)
        stores = _load_tensors_and_find_stores(ir, fn, args)
        results = _return_stored_results(ir, sig, ret, result_args, args, stores, result_shapes)
        _drop_non_tensor_arguments(sig, block, args)
        arg_types = [ir.Type.parse(sig.operand_types[i]) for i in sig.tensor_operands]
        result_types = [v.type for v in results]
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, result_types))
        fn.attributes["sym_name"] = ir.StringAttr.get("main")
        if "sym_visibility" in fn.attributes:
            del fn.attributes["sym_visibility"]
        if not module.operation.verify():
            raise SplitError(f"{sig.entry}: the standalone function does not verify")
        text = module.operation.get_asm(enable_debug_info=False)
    return StandaloneTest(text, [str(t) for t in arg_types], [str(t) for t in result_types])


def _result_arguments(sig: DispatchSignature, n_args: int) -> list[int]:
    """The function argument each result is stored into: its tied operand, else the next output argument."""
    n_operands = len(sig.operand_types)
    if n_args != n_operands + sum(1 for t in sig.tied if t < 0):
        raise SplitError(
            f"{sig.entry}: {n_args} function arguments for {n_operands} operands and {len(sig.tied)} results"
        )
    result_args, next_out = [], n_operands
    for t in sig.tied:
        if t >= 0:
            result_args.append(t)
        else:
            result_args.append(next_out)
            next_out += 1
    return result_args


def _derive_scalars(
    ir, sig: DispatchSignature, args: list, first, result_shapes: list[tuple[int, ...]] | None
) -> None:
    """Replace each scalar operand by its value made before ``first``: a tensor argument's dimension, a
    captured result's dimension or a constant."""
    index = ir.IndexType.get()
    scalar_values = {}
    for i, source in sig.scalars.items():
        with ir.InsertionPoint(first):
            scalar_type = ir.Type.parse(sig.operand_types[i])
            if source.kind == "dim":
                position = _constant(ir, index, source.dim)
                value = ir.Operation.create(
                    "tensor.dim", results=[index], operands=[args[sig.tensor_operands[source.operand]], position]
                ).result
            else:
                if source.kind == "result_dim":
                    if result_shapes is None:
                        raise SplitError(f"{sig.entry}: result {source.operand}'s shape is needed")
                    number = int(result_shapes[source.operand][source.dim])
                else:
                    number = source.value
                value = _constant(ir, scalar_type, number)
            if str(scalar_type) != "index" and source.kind == "dim":
                value = ir.Operation.create("arith.index_cast", results=[scalar_type], operands=[value]).result
        scalar_values[i] = value
    for i, value in scalar_values.items():
        args[i].replace_all_uses_with(value)


def _drop_workload_markers(fn) -> None:
    """Workload ordinals only name their operand; a tie_shape only says its binding's dynamic sizes."""
    for op in _all_ops(fn):
        if op.name in (_ORDINAL, _TIE_SHAPE):
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()


def _load_tensors_and_find_stores(ir, fn, args: list) -> dict[int, list]:
    """Rewrite each binding load as a use of its tensor argument; the stores by the argument they write."""
    stores: dict[int, list] = {}
    for op in _all_ops(fn):
        if op.name == _LOAD:
            _replace_load(ir, op, args)
        elif op.name == _STORE:
            target = _arg_number(args, op.operands[1])
            stores.setdefault(target, []).append(op)
    return stores


def _return_stored_results(
    ir,
    sig: DispatchSignature,
    ret,
    result_args: list[int],
    args: list,
    stores: dict[int, list],
    result_shapes: list[tuple[int, ...]] | None,
) -> list:
    """Return what the stores wrote, in result order, instead of storing it; the stores are erased."""
    results = []
    with ir.InsertionPoint(ret):
        for r, target in enumerate(result_args):
            results.append(_result_value(ir, sig, r, target, args, stores.get(target, []), result_shapes))
    for target_stores in stores.values():
        for op in target_stores:
            op.erase()
    with ir.InsertionPoint(ret):
        ir.Operation.create("func.return", operands=results)
    ret.erase()
    return results


def _drop_non_tensor_arguments(sig: DispatchSignature, block, args: list) -> None:
    """Drop the arguments that are not tensor operands (scalars, write-only outputs), last first."""
    keep = set(sig.tensor_operands)
    for i in reversed(range(len(args))):
        if i not in keep:
            if list(args[i].uses):
                raise SplitError(f"{sig.entry}: argument {i} is still used after the rewrite")
            block.erase_argument(i)


def _all_ops(fn) -> list:
    ir = _ir()
    found = []

    def visit(op):
        found.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    return found


def _constant(ir, type_, number):
    text = str(type_)
    if text == "index" or (text.startswith("i") and text[1:].isdigit()):
        attr = ir.IntegerAttr.get(type_, int(number))
    else:
        attr = ir.FloatAttr.get(type_, float(number))
    return ir.Operation.create("arith.constant", results=[type_], attributes={"value": attr}).result


def _arg_number(args, value) -> int:
    for i, a in enumerate(args):
        if a == value:
            return i
    raise SplitError("a dispatch tensor load or store does not use a function argument directly")


def _slice_operands(op, first_segment: int):
    """(offsets, sizes, strides) dynamic operand lists of a load/store, whose segments start at
    ``first_segment``."""
    segments = _segments(op, 0)
    return segments[first_segment], segments[first_segment + 1], segments[first_segment + 2]


def _is_whole(op, tensor_type, offsets, sizes, strides) -> bool:
    ir = _ir()
    static_offsets, static_sizes, static_strides = (
        _array(op, "static_offsets"), _array(op, "static_sizes"), _array(op, "static_strides")
    )
    shaped = ir.ShapedType(tensor_type)
    if offsets or strides or any(o != 0 for o in static_offsets) or any(s != 1 for s in static_strides):
        return False
    if sizes or _DYNAMIC in static_sizes:
        return False  # dynamic sizes: kept as a slice (a whole one folds away when compiled)
    return static_sizes == [shaped.get_dim_size(i) for i in range(shaped.rank)]


def _replace_load(ir, op, args) -> None:
    source = op.operands[0]
    i = _arg_number(args, source)
    tensor_type = args[i].type
    # load operands: source, source_dims, offsets, sizes, strides
    offsets, sizes, strides = _slice_operands(op, 2)
    result = op.results[0]
    if _is_whole(op, tensor_type, offsets, sizes, strides) and result.type == tensor_type:
        result.replace_all_uses_with(args[i])
    else:
        with ir.InsertionPoint(op):
            new = _slice_op(ir, "tensor.extract_slice", [result.type], [args[i]], op, offsets, sizes, strides)
        result.replace_all_uses_with(new.results[0])
    op.erase()


def _slice_op(ir, name, result_types, leading, op, offsets, sizes, strides):
    attributes = {
        "static_offsets": op.attributes["static_offsets"],
        "static_sizes": op.attributes["static_sizes"],
        "static_strides": op.attributes["static_strides"],
        "operandSegmentSizes": ir.DenseI32ArrayAttr.get(
            [1] * len(leading) + [len(offsets), len(sizes), len(strides)]
        ),
    }
    return ir.Operation.create(
        name, results=result_types, operands=[*leading, *offsets, *sizes, *strides], attributes=attributes
    )


def _result_value(ir, sig, r, target, args, stores, result_shapes):
    """Result ``r`` (stored into argument ``target``) as a tensor value, built before the return."""
    if sig.tied[r] >= 0:
        base = args[target]  # a readwrite binding: unwritten elements keep the operand's values
        tensor_type = args[target].type
    else:
        tensor_type = ir.Type.parse(
            str(args[target].type).split(":", 1)[1].rsplit(">", 1)[0]
            if "dispatch.tensor<" in str(args[target].type) else str(args[target].type)
        )
        base = None
    if not stores:
        if base is None:
            raise SplitError(f"{sig.entry}: result {r} is never stored")
        return base
    if base is None and len(stores) == 1:
        # One store into a write-only binding defines all of it (else the output would be partly undefined):
        # from offset zero, unit strides, the stored value is the result.
        store = stores[0]
        offsets, sizes, strides = _slice_operands(store, 3)
        value = store.operands[0]
        from_origin = not offsets and not strides and all(o == 0 for o in _array(store, "static_offsets"))
        unit = all(s == 1 for s in _array(store, "static_strides"))
        if from_origin and unit and ir.ShapedType(value.type).rank == ir.ShapedType(tensor_type).rank:
            if value.type == tensor_type:
                return value
            return ir.Operation.create("tensor.cast", results=[tensor_type], operands=[value]).result
    if base is None:
        shaped = ir.ShapedType(tensor_type)
        dynamic = []
        for d in range(shaped.rank):
            if shaped.is_dynamic_dim(d):
                if result_shapes is None:
                    raise SplitError(f"{sig.entry}: result {r} has dynamic dimensions stored in pieces")
                dynamic.append(_constant(ir, ir.IndexType.get(), int(result_shapes[r][d])))
        base = ir.Operation.create("tensor.empty", results=[tensor_type], operands=dynamic).result
    for store in stores:
        # store operands: value, target, target_dims, offsets, sizes, strides
        offsets, sizes, strides = _slice_operands(store, 3)
        base = _slice_op(
            ir, "tensor.insert_slice", [tensor_type], [store.operands[0], base], store, offsets, sizes, strides
        ).results[0]
    return base
