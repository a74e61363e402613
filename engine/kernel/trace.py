"""A recorded workgroup: its statements in execution order, each with its source location, op and values.

Plain data shared by both recorders (VMVX interpreted, llvm-cpu instrumented), the CLI and the window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Number = int | float


@dataclass(frozen=True)
class SourceLocation:
    """Where a statement came from in the executable's (or program's) MLIR: ``file:line:column``."""

    file: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class KernelStore:
    """A store the statement made: ``value`` (one number, or one per lane of a vector store) written at
    byte ``offset`` of binding ``binding``."""

    binding: int
    offset: int
    value: Number | list[Number]
    element_bytes: int


@dataclass(frozen=True)
class KernelStep:
    """One executed statement of the workgroup."""

    index: int
    location: SourceLocation | None  # None: the code carries no location for it (said as "unknown")
    op: str  # the MLIR op at that location (``math.log``), else the machine-level op (``vm.log.f32``)
    instruction: str  # the recorded instruction's own text (a VM instruction or an LLVM IR line)
    values: tuple[Number, ...]  # its result (every lane of a vector), or the stored value of a store
    store: KernelStore | None = None
    # The values' type in the code recorded (an LLVM type: "<16 x i16>" says a bf16 product is its bits, as
    # IREE's llvm-cpu code computes bf16 with integer operations); "" where the op's own type says it.
    value_type: str = ""

    @property
    def loc(self) -> str:
        return str(self.location) if self.location is not None else "unknown"

    @property
    def nonfinite(self) -> bool:
        """True when a value is NaN or Inf."""
        return any(isinstance(v, float) and not math.isfinite(v) for v in self.values)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.index, "loc": self.loc, "op": self.op,
                               "values": [json_number(v) for v in self.values]}  # fmt: skip
        if self.value_type:
            out["type"] = self.value_type
        if self.store is not None:
            value = self.store.value
            out["store"] = {
                "binding": self.store.binding,
                "offset": self.store.offset,
                "value": [json_number(v) for v in value] if isinstance(value, list) else json_number(value),
            }
        return out

    def text(self) -> str:
        """One line for people: ``step 12  file.mlir:17  math.log  -> nan``."""
        shown = ", ".join(_number_text(v) for v in self.values[:8]) + (", ..." if len(self.values) > 8 else "")
        typed = f" : {self.value_type}" if self.value_type else ""
        line = f"step {self.index:>6}  {self.loc:<32} {self.op:<24} [{shown}]{typed}"
        if self.store is not None:
            line += f"  store binding {self.store.binding} offset {self.store.offset}"
        return line


def json_number(v: Number) -> Number | str:
    """A number as JSON carries it: NaN and the infinities as the strings ``nan``, ``inf``, ``-inf``."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _number_text(v: Number) -> str:
    return repr(v) if isinstance(v, int) else f"{v:.9g}"


@dataclass(frozen=True)
class KernelTrace:
    """Every recorded statement of one workgroup of one dispatch."""

    backend: str  # "vmvx" or "llvm-cpu"
    dispatch: int  # the dispatch's ordinal in the run
    export: str
    workgroup: tuple[int, int, int]
    workgroup_count: tuple[int, int, int]
    steps: tuple[KernelStep, ...]
    source_files: dict[str, str] = field(default_factory=dict)  # location file -> path found on disk
    notes: tuple[str, ...] = ()  # what the record leaves out (a truncated trace, unmapped stores)
    complete: bool = True  # False: recording stopped at the statement asked for (--until)

    def first_nonfinite(self) -> int | None:
        """Index of the first statement with a NaN or Inf value, or None."""
        return next((s.index for s in self.steps if s.nonfinite), None)

    def first_at_line(self, line: int, file: str | None = None) -> int | None:
        """Index of the first statement at source ``line`` (of ``file`` when given), or None."""
        for s in self.steps:
            if s.location is not None and s.location.line == line and (file is None or s.location.file == file):
                return s.index
        return None

    def stores(self) -> list[KernelStep]:
        return [s for s in self.steps if s.store is not None]

    def lines_executed(self) -> dict[tuple[str, int], list[int]]:
        """Each source line and the statements executed there, in order."""
        out: dict[tuple[str, int], list[int]] = {}
        for s in self.steps:
            if s.location is not None:
                out.setdefault((s.location.file, s.location.line), []).append(s.index)
        return out


StopAt = Callable[[KernelStep], bool]  # recording may end after the first statement this is true of


def parse_workgroup(text: str) -> tuple[int, int, int]:
    """``X,Y,Z`` (``X`` or ``X,Y`` leave the rest 0) -> a workgroup id; ``ValueError`` otherwise."""
    parts = [p.strip() for p in text.split(",")]
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"bad workgroup {text!r}: expected X,Y,Z (non-negative integers)")
    values = [int(p) for p in parts] + [0] * (3 - len(parts))
    return values[0], values[1], values[2]


def check_workgroup(workgroup: Sequence[int], count: Sequence[int]) -> None:
    """``ValueError`` unless ``workgroup`` lies inside a dispatch of ``count`` workgroups."""
    if not all(0 <= w < c for w, c in zip(workgroup, count)):
        raise ValueError(
            f"no workgroup ({', '.join(map(str, workgroup))}): the dispatch has "
            f"{' x '.join(map(str, count))} workgroups"
        )
