"""Control flow, calls, returns, fail and the no-op/debug ops (dispatch.c L2062-2378).

Branches apply their remap list (``(src, dst)`` pairs copied in order; a ref source with the MOVE bit
is cleared) and continue after the target's block marker. Calls and returns change the call stack
through the interpreter (``thread``), which the closures receive as their third argument.
"""

from __future__ import annotations

from engine.runtime import isa
from engine.runtime.vm.handlers import CompileEnv, handler, ref, reg
from engine.runtime.vm.native import StatusCode, VmStatusError


def compile_remap(pairs) -> tuple:
    """A remap list as ``(is_ref, src, dst, move)`` tuples."""
    out = []
    for src, dst in pairs:
        if src & isa.REF_BANK_BIT:
            out.append(
                (True, src & isa.REF_INDEX_MASK, dst & isa.REF_INDEX_MASK, bool(src & isa.REF_MOVE_BIT))
            )
        else:
            out.append((False, src & 0x7FFF, dst & 0x7FFF, False))
    return tuple(out)


def apply_remap(i: list, r: list, remap: tuple) -> None:
    for is_ref, s, d, move in remap:
        if is_ref:
            v = r[s]
            if move and s != d:
                r[s] = None
            r[d] = v
        else:
            i[d] = i[s]


def _jump(target: int, pairs) -> callable:
    remap = compile_remap(pairs)
    dest = target + 1  # skip the block marker

    if not remap:

        def h(i, r, t):
            return dest

        return h
    if len(remap) == 1 and not remap[0][0]:
        _, s, d, _ = remap[0]

        def h1(i, r, t):
            i[d] = i[s]
            return dest

        return h1

    def hn(i, r, t):
        apply_remap(i, r, remap)
        return dest

    return hn


@handler("Block")
def _block(ins, env: CompileEnv):
    n = env.next_pc

    def h(i, r, t):
        return n

    return h


@handler("Branch", "Break", "Yield")
def _branch(ins, env: CompileEnv):
    target, pairs = ins.operands
    # vm.yield: IREE returns DEFERRED to the invoker, which resumes at once when nothing waits; a
    # synchronous interpreter simply continues at the target.
    return _jump(target, pairs)


@handler("CondBranch")
def _cond_branch(ins, env: CompileEnv):
    craw, t_target, t_pairs, f_target, f_pairs = ins.operands
    c = reg(craw)
    t_remap, f_remap = compile_remap(t_pairs), compile_remap(f_pairs)
    td, fd = t_target + 1, f_target + 1
    if not t_remap and not f_remap:

        def h(i, r, t):
            return td if i[c] else fd

        return h

    def hr(i, r, t):
        if i[c]:
            apply_remap(i, r, t_remap)
            return td
        apply_remap(i, r, f_remap)
        return fd

    return hr


@handler("CondBreak")
def _cond_break(ins, env: CompileEnv):
    # The runtime reads a condition, then behaves like a branch either way (the debugger hook is a TODO).
    _c, target, pairs = ins.operands
    return _jump(target, pairs)


@handler("BranchTable")
def _branch_table(ins, env: CompileEnv):
    xraw, default_target, default_pairs, _size, cases = ins.operands
    x = reg(xraw)
    default = (default_target + 1, compile_remap(default_pairs))
    table = tuple((target + 1, compile_remap(pairs)) for target, pairs in cases)
    count = len(table)

    def h(i, r, t):
        k = i[x]
        dest, remap = table[k] if k < count else default  # unsigned compare == (k < 0 || k >= n)
        if remap:
            apply_remap(i, r, remap)
        return dest

    return h


@handler("Fail")
def _fail(ins, env: CompileEnv):
    sraw, message = ins.operands
    s = reg(sraw)
    n = env.next_pc

    def h(i, r, t):
        status = i[s]
        if status:
            raise VmStatusError(status & 0x1F, message)
        return n

    return h


@handler("ImportResolved")
def _import_resolved(ins, env: CompileEnv):
    func, wraw = ins.operands
    w = reg(wraw)
    binding = env.instance.imports[func & 0x7FFFFFFF]
    n = env.next_pc

    def h(i, r, t):
        i[w] = 1 if binding.resolved else 0
        return n

    return h


@handler("Trace", "Print")
def _trace(ins, env: CompileEnv):
    _name, regs = ins.operands
    moved = tuple(
        raw & isa.REF_INDEX_MASK for raw in regs if raw & isa.REF_BANK_BIT and raw & isa.REF_MOVE_BIT
    )
    n = env.next_pc

    def h(i, r, t):
        for k in moved:
            r[k] = None
        return n

    return h


@handler("DiscardRefs")
def _discard(ins, env: CompileEnv):
    (regs,) = ins.operands
    refs = tuple(ref(raw)[0] for raw in regs)
    n = env.next_pc

    def h(i, r, t):
        for k in refs:
            r[k] = None
        return n

    return h


@handler("Return")
def _return(ins, env: CompileEnv):
    (regs,) = ins.operands

    def h(i, r, t):
        return t.do_return(i, r, regs)

    return h


@handler("Call", "CallVariadic", "CallYieldable", "CallVariadicYieldable")
def _call(ins, env: CompileEnv):
    sym = ins.opcode.symbol
    ops = ins.operands
    func = ops[0]
    segments: tuple = ()
    if sym == "Call":
        args, results = ops[1], ops[2]
        resume = env.next_pc
    elif sym == "CallVariadic":
        segments, args, results = ops[1], ops[2], ops[3]
        resume = env.next_pc
    elif sym == "CallYieldable":
        args, dest, results = ops[1], ops[2], ops[3]
        resume = dest + 1
    else:
        segments, args, dest, results = ops[1], ops[2], ops[3], ops[4]
        resume = dest + 1
    inst = env.instance
    if func & isa.IMPORT_BIT:
        binding = inst.imports[func & 0x7FFFFFFF]

        def h_import(i, r, t):
            return t.call_import(i, r, binding, segments, args, results, resume)

        return h_import
    if segments and sym in ("CallVariadic", "CallVariadicYieldable"):

        def h_bad(i, r, t):
            raise VmStatusError(
                StatusCode.FAILED_PRECONDITION, "variadic calls to internal functions are not supported"
            )

        return h_bad

    def h_internal(i, r, t):
        return t.call_bytecode(i, r, inst, func, args, results, resume)

    return h_internal
