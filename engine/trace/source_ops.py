"""Which source ops each dispatch holds, read from IREE's ``flow`` phase printed with its locations.

IREE keeps every op's location through compilation: the linalg ops of a dispatch carry the location of
the frontend op they came from (``loc("model.mlir":39:10)``, a ``callsite``/``fused`` location holding a
Python ``file.py:line`` where the frontend kept it). ``iree-compile --compile-to=flow
--mlir-print-debuginfo`` prints them (``flow_with_locations``); ``dispatch_source_ops`` reads, for each
dispatch function, its compute ops with their locations and their work.

The work of an op (the rule a fused dispatch's time is split by) is the size of its loop nest: the product
of its iteration bounds, read from its indexing maps and the shapes of its operands (a convolution's
output points times its window and input channels; an elementwise op's output points). That is its
multiply-add count up to the few arithmetic ops per point, so a conv and the ReLU fused after it share
the dispatch's time about as their FLOPs do. Ops whose maps are not printed (named ops) count their
output points times the reduced dimension where it is known (``matmul``, ``batch_matmul``: the left
operand's last dimension), else the largest operand.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from engine.compiler.task import TaskState
from engine.errors import CompileCancelled, CompileError

CANCEL_POLL_S = 0.25  # how often a flow compile looks whether it was cancelled

# Ops that do a dispatch's work; linalg.fill and tensor.empty only initialise what the root op fills.
_COMPUTE_OP = re.compile(r"^\s*(?:%[\w#:, %]+=\s*)?((?:linalg|iree_linalg_ext)\.[\w.]+)")
_SKIPPED_OPS = frozenset({"linalg.fill", "linalg.yield", "linalg.index", "iree_linalg_ext.yield"})
_CONTRACTIONS = frozenset(
    {"linalg.matmul", "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat", "linalg.dot"}
)
_FUNC = re.compile(r"^(\s*)func\.func (?:public |private )?@([\w$.\-]+)\(")
_FILE_LOC = re.compile(r'"([^"]+)":(\d+):(\d+)')
# A name location, ``"jit(f)/jit(main)/dot_general"(...)``: a quoted name followed by the location it names.
_NAME_LOC = re.compile(r'"([^"]+)"\(')
_LOC_ALIAS_DEF = re.compile(r"^(#loc\d*)\s*=\s*(loc\(.*\))\s*$")
_TENSOR = re.compile(r"tensor<(.*)>")
_MAPS = re.compile(r"affine_map<\(([^)]*)\)\s*->\s*\(([^)]*)\)>")


@dataclass(frozen=True)
class SourceOp:
    """One compute op of a dispatch and where it came from.

    ``loc`` is ``FILE:LINE`` of the input program (the IR the frontend wrote); ``python`` the Python
    ``FILE:LINE`` where the location held one; ``work`` the op's loop-nest size (see the module's rule);
    ``name`` the frontend's own name for the op where its location carried one (JAX names every op by its
    path in the traced program: ``jit(predict)/jit(main)/dot_general``).
    """

    loc: str
    work: float | None  # None: a dynamic shape (unknown until the run)
    ir_op: str  # the linalg op it became, e.g. linalg.generic
    python: str | None = None
    reduces: bool = False  # it has a reduction loop (a contraction: one multiply-add per point)
    name: str | None = None

    @property
    def flops(self) -> float | None:
        """Floating-point operations, about: two per point of a contraction (multiply, add), one otherwise."""
        if self.work is None:
            return None
        return 2.0 * self.work if self.reduces else self.work


def flow_with_locations(source: str | Path, flags: list[str], timeout_s: float = 600.0,
                        task: TaskState | None = None) -> str:  # fmt: skip
    """The ``flow`` phase of ``source`` compiled with ``flags``, printed with every op's location.

    Kept in the temporary folder by the program's path, size, modification time and the flags, so a second
    profile of the same program reads it back (EfficientViT-M0's takes ~40 s on a loaded 2-core machine).
    ``task`` cancelled: the compile is killed (``CompileCancelled``)."""
    import hashlib

    from engine.compiler.job import iree_compile_path

    try:
        stat = Path(source).stat()
        # The locations name the program as it was passed (a relative name against the working folder).
        named = str(source) if Path(source).is_absolute() else f"{os.getcwd()}|{source}"
        key = hashlib.sha1(repr((named, stat.st_size, stat.st_mtime_ns, tuple(flags),
                                 iree_compile_path())).encode()).hexdigest()  # fmt: skip
    except OSError as e:
        raise CompileError(f"cannot read {source}: {e}") from None
    from engine.temp_caches import cache_root, mark_used

    cache = cache_root("iree-lens-flow-locations") / f"{key}.mlir"
    try:
        text = cache.read_text()
        mark_used(cache)
        return text
    except OSError:
        pass  # not compiled yet
    text = _compile_flow(source, flags, timeout_s, iree_compile_path(), task)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.part")
        partial.write_text(text)
        partial.replace(cache)  # whole or not at all: another process may read it meanwhile
    except OSError:
        pass  # a cache is a courtesy
    return text


def _compile_flow(source: str | Path, flags: list[str], timeout_s: float, compiler: str,
                  task: TaskState | None = None) -> str:  # fmt: skip
    cmd = [compiler, str(source), *flags, "--compile-to=flow", "--mlir-print-debuginfo",
           "--mlir-print-op-on-diagnostic=false", "-o", "-"]  # fmt: skip
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:  # no iree-compile here
        raise CompileError(f"cannot run iree-compile for {source}: {e}") from None
    deadline = time.monotonic() + timeout_s
    with proc:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=CANCEL_POLL_S)
                break
            except subprocess.TimeoutExpired:
                if task is not None and task.cancelled:
                    proc.kill()
                    proc.communicate()
                    raise CompileCancelled(f"iree-compile --compile-to=flow of {source} cancelled") from None
                if time.monotonic() > deadline:
                    proc.kill()
                    proc.communicate()
                    raise CompileError(f"iree-compile --compile-to=flow of {source} ran past {timeout_s:g} s") from None
    if proc.returncode != 0:
        last = (stderr.strip().splitlines() or ["(no message)"])[-1]
        raise CompileError(f"iree-compile --compile-to=flow of {source} failed: {last}")
    return stdout


def dispatch_source_ops(text: str) -> dict[str, tuple[SourceOp, ...]]:
    """Dispatch function name (IREE's export name) -> its compute ops with known locations, in order."""
    lines = text.splitlines()
    aliases = _loc_aliases(lines)
    out: dict[str, tuple[SourceOp, ...]] = {}
    i = 0
    while i < len(lines):
        m = _FUNC.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, name = m.group(1), m.group(2)
        end = i + 1
        while end < len(lines) and not (
            lines[end].startswith(indent + "}") and not lines[end].startswith(indent + "} ->")
        ):
            end += 1
        out[name] = tuple(_ops_in(lines[i + 1 : end], aliases))
        i = end + 1
    return out


_DISPATCH_SITE = re.compile(r"\bflow\.dispatch @[\w$.\-]+::@([\w$.\-]+)[(\[]")


def dispatch_sites(text: str) -> dict[str, tuple[str | None, ...]]:
    """Export name -> the input-program ``FILE:LINE`` of each ``flow.dispatch`` of it, in the flow phase's
    order (None where a site has no program location). IREE deduplicates executables: one export dispatched
    from several places (SqueezeNet's repeated fire modules, the q/k/v projections of an attention) keeps
    the ops' locations of one of them, while each ``flow.dispatch`` keeps its own."""
    aliases = _loc_aliases(text.splitlines())
    sites: dict[str, list[str | None]] = {}
    for line in text.splitlines():
        m = _DISPATCH_SITE.search(line)
        if m is None:
            continue
        loc_text = _last_loc(line, aliases)
        where = _file_lines(loc_text) if loc_text else []
        sites.setdefault(m.group(1), []).append(next((w for w in where if ".py:" not in w), None))
    return {export: tuple(locs) for export, locs in sites.items()}


def _ops_in(body: list[str], aliases: dict[str, str]):
    i = 0
    while i < len(body):
        m = _COMPUTE_OP.match(body[i])
        if m is None or m.group(1) in _SKIPPED_OPS:
            i += 1
            continue
        # The op's location is on its last line: after its region's closing brace when it has one.
        depth = body[i].count("{") - body[i].count("}")
        last = i
        while depth > 0 and last + 1 < len(body):
            last += 1
            depth += body[last].count("{") - body[last].count("}")
        loc_text = _last_loc(body[last], aliases)
        where = _file_lines(loc_text) if loc_text else []
        program = next((w for w in where if not w.endswith(".py") and ".py:" not in w), None)
        python = next((w for w in where if ".py:" in w), None)
        if program is not None or python is not None:
            reduces = '"reduction"' in body[i] or m.group(1) in _CONTRACTIONS
            work = op_work(m.group(1), body[i])
            named = _NAME_LOC.search(loc_text or "")
            yield SourceOp(program or python, None if work is None else float(work), m.group(1), python, reduces,
                           named.group(1) if named else None)  # fmt: skip
        i = last + 1


def _loc_aliases(lines: list[str]) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for line in lines:
        m = _LOC_ALIAS_DEF.match(line)
        if m:
            aliases[m.group(1)] = m.group(2)
    return aliases


def _last_loc(line: str, aliases: dict[str, str]) -> str | None:
    at = line.rfind(" loc(")
    if at < 0:
        return None
    text = line[at + 1 :]
    # Expand aliases (#loc3 = loc(...)) a few levels deep: fused and callsite locations refer to others.
    for _ in range(4):
        if "#loc" not in text:
            break
        text = re.sub(r"#loc\d*", lambda a: aliases.get(a.group(0), ""), text)
    return text


def _file_lines(loc_text: str) -> list[str]:
    return [f"{path}:{line}" for path, line, _ in _FILE_LOC.findall(loc_text)]


def op_work(op: str, first_line: str) -> int | None:
    """The loop-nest size of the op whose first printed line is ``first_line`` (at least 1); None where an
    operand has a dynamic dimension (its size is the run's, not the program's)."""
    types = _operand_types(first_line)
    if any(_TENSOR.fullmatch(t.strip()) and "?" in t.split(",")[0] for t in types):
        return None
    operands = [_dims(t) for t in types]  # ins then outs, scalars as None
    known = [t for t in operands if t is not None]
    maps = _MAPS.findall(first_line)
    if maps and len(maps) == len(operands):
        bounds: dict[str, int] = {}
        # Maps are in ins/outs order, as the operands are; a bare dK result gives dK's bound.
        for (_, results), shape in zip(maps, operands):
            if shape is None:
                continue
            for expr, size in zip((r.strip() for r in results.split(",")), shape):
                if re.fullmatch(r"d\d+", expr):
                    bounds[expr] = size
        if bounds:
            return max(1, _product(bounds.values()))
    if not known:
        return 1
    output = known[-1]
    if op in ("linalg.matmul", "linalg.batch_matmul") and len(known) >= 2 and known[0]:
        return max(1, _product(output) * known[0][-1])
    return max(1, max(_product(t) for t in known))


def _dims(type_text: str) -> list[int] | None:
    m = _TENSOR.fullmatch(type_text.strip())
    if m is None:
        return None  # a scalar operand
    parts = m.group(1).split(",")[0].split("x")[:-1]  # the last part is the element type
    try:
        return [int(p) for p in parts]
    except ValueError:
        return None  # a dynamic dimension: unknown here


def _operand_types(first_line: str) -> list[str]:
    """The types of an op's ``ins(... : T, ...)`` then ``outs(... : T, ...)`` operands."""
    types: list[str] = []
    for key in (" ins(", " outs("):
        at = first_line.find(key)
        if at < 0:
            continue
        depth, start, colon = 0, at + len(key), None
        for j in range(start, len(first_line)):
            c = first_line[j]
            if c in "(<[{":
                depth += 1
            elif c in ")>]}":
                if depth == 0:
                    if colon is not None:
                        types += _split_top(first_line[colon + 1 : j])
                    break
                depth -= 1
            elif c == ":" and depth == 0 and colon is None:
                colon = j
    return types


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for j, c in enumerate(text):
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:j].strip())
            start = j + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _product(values) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n
