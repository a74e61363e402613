"""``!vm.list`` ops (dispatch.c). Items are Python values: ints (signed, of the element width), floats,
or refs."""

from __future__ import annotations

from engine.runtime.vm import numeric as N
from engine.runtime.vm.handlers import M32, CompileEnv, handler, read_i64, ref, reg, write_i64
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import VmList, ref_type_name, type_matches

_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_FLOAT_TYPES = ("f32", "f64")


def _list(v: object) -> VmList:
    if v is None:
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, "list is null")
    if not isinstance(v, VmList):
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"not a !vm.list (got {ref_type_name(v)})")
    return v


def _wrap_signed(v: int, bits: int) -> int:
    m = (1 << bits) - 1
    v &= m
    return v - (1 << bits) if v >> (bits - 1) else v


def list_element_kind(element_type: str) -> str:
    """``value`` for i8..f64 element types, ``ref`` for refs, ``variant`` for ``!vm.opaque``/``?``."""
    t = element_type.lstrip("!")
    if t in _INT_BITS or t in _FLOAT_TYPES:
        return "value"
    if t in ("vm.opaque", "?", "vm.ref<?>", "opaque", "variant", "any"):
        return "variant"
    return "ref"


def list_store_value(lst: VmList, index: int, value: int | float, value_type: str) -> None:
    """``iree_vm_list_set_value``: converts to the element type of a typed list; variants keep the value."""
    _check_index(lst, index)
    t = lst.element_type.lstrip("!")
    kind = list_element_kind(t)
    if kind == "ref":
        raise VmStatusError(StatusCode.FAILED_PRECONDITION, "list does not store values")
    if kind == "variant":
        lst.items[index] = value if value_type not in ("f32",) else float(value)
        return
    if t in _INT_BITS:
        lst.items[index] = _wrap_signed(int(value), _INT_BITS[t]) if isinstance(value, int) else 0
    elif t == "f32":
        lst.items[index] = N.f32_round(value) if isinstance(value, float) else 0.0
    else:
        lst.items[index] = float(value) if isinstance(value, float) else 0.0


def list_load_value(lst: VmList, index: int, want: str) -> int | float:
    """``iree_vm_list_get_value_as``: ints convert between widths; float↔int conversions give 0."""
    _check_index(lst, index)
    v = lst.items[index]
    if v is None or not isinstance(v, (int, float)) or isinstance(v, bool):
        if (
            list_element_kind(lst.element_type) == "variant"
            and v is not None
            and not isinstance(v, (int, float))
        ):
            raise VmStatusError(
                StatusCode.FAILED_PRECONDITION, f"variant at index {index} is not a value type"
            )
        v = 0
    if want in _INT_BITS:
        return _wrap_signed(v, _INT_BITS[want]) if isinstance(v, int) else 0
    return float(v) if isinstance(v, float) else 0.0


def _check_index(lst: VmList, index: int) -> None:
    if index >= len(lst.items):
        raise VmStatusError(StatusCode.OUT_OF_RANGE, f"index {index} out of bounds ({len(lst.items)})")


@handler("ListAlloc")
def _list_alloc(ins, env: CompileEnv):
    type_id, craw, wraw = ins.operands
    c = reg(craw)
    w, _ = ref(wraw)
    n = env.next_pc
    element_type = env.instance.type_name(type_id)

    def h(i, r, t):
        r[w] = VmList(element_type, [], i[c])
        return n

    return h


@handler("ListReserve")
def _list_reserve(ins, env: CompileEnv):
    lraw, craw = ins.operands
    lr, _ = ref(lraw)
    c = reg(craw)
    n = env.next_pc

    def h(i, r, t):
        lst = _list(r[lr])
        lst.capacity = max(lst.capacity, i[c])
        return n

    return h


@handler("ListSize")
def _list_size(ins, env: CompileEnv):
    lraw, wraw = ins.operands
    lr, _ = ref(lraw)
    w = reg(wraw)
    n = env.next_pc

    def h(i, r, t):
        i[w] = len(_list(r[lr]).items)
        return n

    return h


def list_resize(lst: VmList, size: int) -> None:
    items = lst.items
    if size < len(items):
        del items[size:]
    else:
        t = lst.element_type.lstrip("!")
        fill = 0 if t in _INT_BITS else 0.0 if t in _FLOAT_TYPES else None
        items.extend([fill] * (size - len(items)))
    lst.capacity = max(lst.capacity, size)


@handler("ListResize")
def _list_resize(ins, env: CompileEnv):
    lraw, sraw = ins.operands
    lr, _ = ref(lraw)
    s = reg(sraw)
    n = env.next_pc

    def h(i, r, t):
        list_resize(_list(r[lr]), i[s])
        return n

    return h


_LIST_VALUE = {
    "ListGetI32": "i32",
    "ListSetI32": "i32",
    "ListGetI64": "i64",
    "ListSetI64": "i64",
    "ListGetF32": "f32",
    "ListSetF32": "f32",
    "ListGetF64": "f64",
    "ListSetF64": "f64",
}


@handler("ListGetI32", "ListGetI64", "ListGetF32", "ListGetF64")
def _list_get_value(ins, env: CompileEnv):
    want = _LIST_VALUE[ins.opcode.symbol]
    lraw, xraw, wraw = ins.operands
    lr, _ = ref(lraw)
    x, w = reg(xraw), reg(wraw)
    n = env.next_pc

    def h(i, r, t):
        v = list_load_value(_list(r[lr]), i[x], want)
        if want == "i32":
            i[w] = v & M32
        elif want == "i64":
            write_i64(i, w, v)
        elif want == "f32":
            i[w] = N.f32_bits(v)
        else:
            write_i64(i, w, N.f64_bits(v))
        return n

    return h


@handler("ListSetI32", "ListSetI64", "ListSetF32", "ListSetF64")
def _list_set_value(ins, env: CompileEnv):
    kind = _LIST_VALUE[ins.opcode.symbol]
    lraw, xraw, vraw = ins.operands
    lr, _ = ref(lraw)
    x, v_ = reg(xraw), reg(vraw)
    n = env.next_pc

    def h(i, r, t):
        if kind == "i32":
            v = N.s32(i[v_])
        elif kind == "i64":
            v = N.s64(read_i64(i, v_))
        elif kind == "f32":
            v = N.f32_of(i[v_])
        else:
            v = N.f64_of(read_i64(i, v_))
        list_store_value(_list(r[lr]), i[x], v, kind)
        return n

    return h


@handler("ListGetRef")
def _list_get_ref(ins, env: CompileEnv):
    lraw, xraw, type_id, wraw = ins.operands
    lr, _ = ref(lraw)
    x = reg(xraw)
    w, move = ref(wraw)
    n = env.next_pc
    type_name = env.instance.type_name(type_id)

    def h(i, r, t):
        lst = _list(r[lr])
        k = i[x]
        _check_index(lst, k)
        v = lst.items[k]
        if isinstance(v, (int, float)):
            raise VmStatusError(StatusCode.FAILED_PRECONDITION, f"list element {k} is not a ref")
        if move:
            lst.items[k] = None
        # A type mismatch yields null, not an error (dispatch.c L1776-1795).
        r[w] = v if v is None or type_matches(v, type_name) else None
        return n

    return h


@handler("ListSetRef")
def _list_set_ref(ins, env: CompileEnv):
    lraw, xraw, vraw = ins.operands
    lr, _ = ref(lraw)
    x = reg(xraw)
    v_, move = ref(vraw)
    n = env.next_pc

    def h(i, r, t):
        lst = _list(r[lr])
        k = i[x]
        _check_index(lst, k)
        v = r[v_]
        if (
            v is not None
            and list_element_kind(lst.element_type) == "ref"
            and not type_matches(v, lst.element_type)
        ):
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"cannot store {ref_type_name(v)} in a list of {lst.element_type}",
            )
        lst.items[k] = v
        if move:
            r[v_] = None
        return n

    return h
