"""The verdict colours and labels every view shares (dispatch lists, the inspector's Compare tab)."""

from __future__ import annotations

from app.views.verdict_style import INHERITED_COLOUR, UNKNOWN_COLOUR, verdict_colour, verdict_label
from engine.dispatch.numerics import Verdict


def test_each_verdict_has_a_distinct_colour_and_a_plain_label():
    colours = {v: verdict_colour(str(v)).name() for v in (Verdict.EXACT, Verdict.WITHIN_ROUNDING, Verdict.DIVERGED)}
    assert len(set(colours.values())) == 3
    assert verdict_label("within_rounding") == "within rounding"
    assert verdict_label("diverged", inherited=True) == "diverged (inputs differed)"
    assert verdict_colour("diverged", inherited=True) == INHERITED_COLOUR
    # A dispatch that was not compared says so; it is not shown as agreeing.
    assert verdict_label(None) == "not compared" and verdict_colour("?") == UNKNOWN_COLOUR


def test_the_legend_names_every_verdict_in_its_colour():
    from app.views.verdict_style import legend_html

    colours = {verdict_colour(str(v)).name() for v in Verdict}
    assert len(colours) == 4  # exact, within rounding, within tolerance, diverged: each its own
    text = legend_html(inherited=True)
    for v in Verdict:
        assert f'color:{verdict_colour(str(v)).name()}">■ {verdict_label(str(v))}<' in text
    assert "diverged (inputs differed)" in text and "not compared" in text


def test_untyped_bytes_that_differ_are_neither_diverged_nor_not_compared():
    """``numerics.BYTES_DIFFER`` (a diverge breakpoint's or the finder's untyped bytes that differ): its own
    label and colour, in the legend too."""
    from app.views.verdict_style import legend_html
    from engine.dispatch.numerics import BYTES_DIFFER

    assert verdict_label(BYTES_DIFFER) == "bytes differ"
    colour = verdict_colour(BYTES_DIFFER)
    assert colour not in (UNKNOWN_COLOUR, verdict_colour("diverged"))
    assert f'color:{colour.name()}">■ bytes differ<' in legend_html()
