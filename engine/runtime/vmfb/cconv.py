"""VM calling-convention strings (``0rIrrr_r``): parsing and the type names IREE prints for them."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import VmfbFormatError

# cconv character -> type name as iree-dump-module prints it.
TYPE_NAMES = {"i": "i32", "I": "i64", "f": "f32", "F": "f64", "r": "!vm.ref<?>"}


@dataclass(frozen=True)
class CallingConvention:
    """A parsed cconv: each argument/result is a cconv character or a span ``C...D`` (kept as text)."""

    text: str
    arguments: tuple[str, ...]
    results: tuple[str, ...]

    @property
    def is_variadic(self) -> bool:
        return any(a.startswith("C") for a in self.arguments)

    def argument_types(self) -> list[str]:
        return [_type_name(a) for a in self.arguments]

    def result_types(self) -> list[str]:
        return [_type_name(r) for r in self.results]

    def describe(self) -> str:
        """``(!vm.ref<?>, i64) -> (i32)`` as iree-dump-module writes it."""
        return f"({', '.join(self.argument_types())}) -> ({', '.join(self.result_types())})"


def _type_name(frag: str) -> str:
    if frag.startswith("C"):
        return f"tuple<{', '.join(TYPE_NAMES[c] for c in frag[1:-1])}>..."
    return TYPE_NAMES[frag]


def _split(part: str, text: str) -> tuple[str, ...]:
    if part in ("", "v"):
        return ()
    out: list[str] = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "C":
            j = part.find("D", i)
            if j < 0 or any(ch not in TYPE_NAMES for ch in part[i + 1 : j]):
                raise VmfbFormatError(f"calling convention {text!r} has an unterminated or bad span")
            out.append(part[i : j + 1])
            i = j + 1
        elif c in TYPE_NAMES:
            out.append(c)
            i += 1
        else:
            raise VmfbFormatError(f"calling convention {text!r} has an unknown type {c!r}")
    return tuple(out)


def parse_cconv(text: str | None) -> CallingConvention:
    """Parse ``0<args>_<results>``; an empty/absent string means ``() -> ()``."""
    if not text:
        return CallingConvention(text or "", (), ())
    if text[0] != "0":
        raise VmfbFormatError(f"calling convention {text!r} has unsupported version {text[0]!r}")
    args, _, results = text[1:].partition("_")
    return CallingConvention(text, _split(args, text), _split(results, text))
