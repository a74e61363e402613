"""Colours and labels of numerics' verdicts (exact / within rounding / within tolerance / diverged), one
place for every view that shows them: the dispatch lists colour rows with them, the tensor inspector's
Compare tab its summary."""

from __future__ import annotations

from PySide6.QtGui import QColor

from engine.dispatch.numerics import BYTES_DIFFER, BYTES_DIFFER_LABEL, VERDICT_LABELS, Verdict

VERDICT_COLOURS = {
    Verdict.EXACT: QColor(46, 139, 87),  # sea green
    Verdict.WITHIN_ROUNDING: QColor(70, 130, 180),  # steel blue
    Verdict.WITHIN_TOLERANCE: QColor(128, 80, 170),  # purple: an explicit rule was needed
    Verdict.DIVERGED: QColor(200, 40, 40),
}
CULPRIT_COLOUR = QColor(200, 40, 40)
INHERITED_COLOUR = QColor(210, 120, 30)  # diverged because its inputs did (after the culprit)
UNKNOWN_COLOUR = QColor(128, 128, 128)
BYTES_DIFFER_COLOUR = QColor(150, 120, 40)  # untyped bytes differ: not judged, but not "not compared" either


def verdict_colour(verdict: str | None, inherited: bool = False) -> QColor:
    """The text colour of a verdict; ``inherited`` diverged rows (inputs already differed) are orange."""
    if verdict == BYTES_DIFFER:
        return BYTES_DIFFER_COLOUR
    try:
        v = Verdict(verdict)
    except ValueError:
        return UNKNOWN_COLOUR
    if v is Verdict.DIVERGED and inherited:
        return INHERITED_COLOUR
    return VERDICT_COLOURS[v]


def verdict_label(verdict: str | None, inherited: bool = False) -> str:
    """``exact``, ``within rounding``, ``diverged`` (``diverged (inputs differed)``), ``bytes differ``
    (untyped: not judged), or ``not compared``."""
    if verdict == BYTES_DIFFER:
        return BYTES_DIFFER_LABEL
    try:
        v = Verdict(verdict)
    except ValueError:
        return "not compared"
    if v is Verdict.DIVERGED and inherited:
        return "diverged (inputs differed)"
    return VERDICT_LABELS[v]


LEGEND_ORDER = (Verdict.EXACT, Verdict.WITHIN_ROUNDING, Verdict.WITHIN_TOLERANCE, Verdict.DIVERGED)


def legend_html(inherited: bool = False) -> str:
    """One line naming each verdict in its colour (a list coloured by verdict shows it beside the rows)."""
    parts = [(verdict_colour(str(v)), verdict_label(str(v))) for v in LEGEND_ORDER]
    if inherited:
        parts.append((INHERITED_COLOUR, verdict_label("diverged", inherited=True)))
    parts.append((BYTES_DIFFER_COLOUR, BYTES_DIFFER_LABEL))
    parts.append((UNKNOWN_COLOUR, verdict_label(None)))
    return "Verdicts: " + " · ".join(f'<span style="color:{c.name()}">■ {label}</span>' for c, label in parts)
