"""MLIR lexical classes for display: one tokenizer shared by the IR viewer's painter and a QSyntaxHighlighter.

The tokenizer works on one line at a time (MLIR's block comments do not exist; strings do not span lines
in IREE's dumps), so any line can be highlighted without looking at the lines before it. That is what
lets the viewer highlight only the lines it paints.
"""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat

# Token kinds, in the order the alternatives are tried (first match at a position wins).
COMMENT, STRING, SSA, SYMBOL, BLOCK, TYPE, ATTRIBUTE, OP, KEYWORD, NUMBER = range(10)

_TOKEN_RE = re.compile(
    r"(?P<c>//.*)"
    r'|(?P<s>"(?:[^"\\]|\\.)*"?)'
    r"|(?P<v>%[\w$.\-#]+(?::\d+)?)"
    r"|(?P<y>@[\w$.\-]+|@\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<b>\^[\w$.\-]+)"
    r"|(?P<t>![\w$.\-]+|\b(?:[fiu]\d+|bf16|index|tensor|memref|vector|tuple|none|complex)\b)"
    r"|(?P<a>#[\w$.\-]+)"
    # A dialect resource's key (``dense_resource<torch_tensor_4_16_torch.float32>`` and its entry in the
    # ``dialect_resources`` block): a name with dots in it, not an op.
    r"|(?P<r>(?<=dense_resource<)[\w$.\-]+|(?<![\w$.\-])[\w$.\-]+(?=: \"0x))"
    r"|(?P<o>\b[a-z_][\w$]*(?:\.[\w$]+)+\b)"
    r"|(?P<k>\b(?:dense_resource|dialect_resources|module|func|attributes|private|public|nested|mutable|immutable|to|ins|outs|dense|true|false|loc|unit|affine_map|step|iter_args)\b)"
    r"|(?P<n>-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b|\b0x[0-9A-Fa-f]+\b)"
)
_GROUP_KIND = {"c": COMMENT, "s": STRING, "v": SSA, "y": SYMBOL, "b": BLOCK, "t": TYPE, "a": ATTRIBUTE, "r": ATTRIBUTE}
_GROUP_KIND.update({"o": OP, "k": KEYWORD, "n": NUMBER})

# A light theme close to common editors; the viewer paints on a white background.
KIND_COLORS: dict[int, str] = {
    COMMENT: "#6a737d",
    STRING: "#a31515",
    SSA: "#001080",
    SYMBOL: "#795e26",
    BLOCK: "#af00db",
    TYPE: "#267f99",
    ATTRIBUTE: "#008080",
    OP: "#0000ff",
    KEYWORD: "#af00db",
    NUMBER: "#098658",
}
KIND_BOLD = {OP}


def tokenize(line: str) -> list[tuple[int, int, int]]:
    """``(start, length, kind)`` spans of the highlighted tokens of one line, in order."""
    out = []
    for m in _TOKEN_RE.finditer(line):
        out.append((m.start(), m.end() - m.start(), _GROUP_KIND[m.lastgroup]))
    return out


# What identifiers look like, for picking the word under the mouse (go to definition).
SYMBOL_RE = re.compile(r"@[\w$.\-]+")
SSA_RE = re.compile(r"%[\w$.\-]+")


def token_at(line: str, col: int) -> str | None:
    """The ``@symbol`` or ``%value`` that covers column ``col`` of ``line``, if any.

    In a nested reference (``@exe::@variant::@entry``) it is the segment under the column.
    """
    for rx in (SYMBOL_RE, SSA_RE):
        for m in rx.finditer(line):
            if m.start() <= col < m.end():
                return m.group(0)
    return None


def char_format(kind: int) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(KIND_COLORS[kind]))
    if kind in KIND_BOLD:
        fmt.setFontWeight(QFont.Weight.DemiBold)
    if kind == COMMENT:
        fmt.setFontItalic(True)
    return fmt


class MlirHighlighter(QSyntaxHighlighter):
    """MLIR highlighting for a QTextDocument (small texts in editors; the big viewer paints itself)."""

    def __init__(self, document):
        super().__init__(document)
        self._formats = {k: char_format(k) for k in KIND_COLORS}

    def highlightBlock(self, text: str) -> None:  # noqa: N802 (Qt's name)
        for start, length, kind in tokenize(text):
            self.setFormat(start, length, self._formats[kind])
