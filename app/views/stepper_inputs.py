"""The run bar's inputs line, written the way ``iree-run-module`` takes inputs.

``--input="4x8xf32=1 2 3" --input=7 --input=@x.npy`` is the canonical form (what the line shows after a
restore); for quick typing, ``4x8xf32=1; 4x8xf32=2`` (``;`` between inputs) and plain tokens
(``4x8xf32=1 4x8xf32=2 7``) are accepted too.
"""

from __future__ import annotations

import re
import shlex

_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$", re.IGNORECASE)


def _split(text: str) -> list[str]:
    """Shell words; a line still being typed (a quote not closed yet) reads as if it were closed."""
    try:
        return shlex.split(text)
    except ValueError:
        pass
    for quote in ('"', "'"):
        try:
            return shlex.split(text + quote)
        except ValueError:
            continue
    return text.split()


def parse_inputs_line(text: str) -> tuple[str, ...]:
    """The ``--input`` values of a line (any line: one still being typed reads as far as it goes)."""
    text = text.strip()
    if not text:
        return ()
    if "--input" in text:
        tokens = _split(text)
        out: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.startswith("--input="):
                out.append(tok[len("--input=") :])
            elif tok == "--input" and i + 1 < len(tokens):
                i += 1
                out.append(tokens[i])
            elif out:  # a value with unquoted spaces: belongs to the input before it
                out[-1] += " " + tok
            else:
                out.append(tok)
            i += 1
        return tuple(out)
    if ";" in text:
        return tuple(part.strip() for part in text.split(";") if part.strip())
    out = []
    for tok in _split(text):
        # Numbers after a tensor literal are its elements (``4xf32=1 2 3 4``); otherwise a new input.
        if out and _NUMBER.match(tok) and "=" in out[-1] and not out[-1].startswith("@"):
            out[-1] += " " + tok
        else:
            out.append(tok)
    return tuple(out)


def format_inputs_line(inputs: tuple[str, ...] | list[str]) -> str:
    return " ".join(shlex.quote(f"--input={value}") for value in inputs)
