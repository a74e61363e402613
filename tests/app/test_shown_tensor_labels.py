"""The paused dispatch's tensor labels say only what is known: an untyped binding before its dispatch runs
may hold an earlier dispatch's results, so it is "before it runs", not "not written yet" (which read
as if its bytes were garbage); a typed output before its dispatch is "not written yet"."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from app.views.dispatch_run_live import PausedDispatchView, ShownTensor
from app.views.tensor_inspector import list_item_text
from engine.session.protocol import TypeSource


def shown(role: str, source: str, access: str, written: bool) -> ShownTensor:
    return ShownTensor(role, 0, 2, 0, np.zeros(4, np.uint8), "4 bytes, untyped", source, access, written)


def test_before_a_dispatch_only_a_typed_output_is_not_written_yet():
    assert shown("binding", TypeSource.UNTYPED, "unknown", False).label == (
        "binding 2, access unknown, before it runs")
    assert shown("output", TypeSource.SOURCES, "write", False).label == "binding 2, write, output 0, not written yet"
    assert shown("input", TypeSource.SOURCES, "read", True).label == "binding 2, read, input 0"
    assert shown("binding", TypeSource.UNTYPED, "unknown", True).label == "binding 2, access unknown"


def test_the_tensor_list_says_the_state_beside_the_type_and_not_what_the_header_says():
    untyped = shown("binding", TypeSource.UNTYPED, "unknown", False)
    assert untyped.list_label == "binding 2, access unknown" and untyped.list_state == ""  # header: "(before it runs)"
    output = shown("output", TypeSource.SOURCES, "write", False)
    assert output.list_label == "binding 2, write, output 0" and output.list_state == "not written yet"
    assert list_item_text(output.list_label, "4xi8", output.list_state) == "binding 2, write, output 0\n4xi8, not written yet"


def test_an_untyped_dispatchs_bindings_are_two_lines_each_in_a_1366_window(qtbot):
    """Walk, small_cnn at 1366x768 stopped before a dispatch: each untyped binding took three or four lines of a
    ~160-px list ("binding 0, access / unknown, before it runs / 3072 bytes, untyped"), the slice controls
    holding the rest of the ~600-px document."""
    view = PausedDispatchView()
    qtbot.addWidget(view)
    view.resize(600, 470)  # the paused dispatch's document in a 1366x768 window
    view.show()
    qtbot.waitExposed(view)
    tensors = [
        ShownTensor("binding", 0, b, 0, np.zeros(n, np.uint8), f"{n} bytes, untyped", TypeSource.UNTYPED, "unknown", False)
        for b, n in ((0, 3072), (1, 15296))
    ]  # fmt: skip
    info = SimpleNamespace(ordinal=0, export="small_cnn$async_dispatch_0_slow_memcpy", when="before",
                           executable="small_cnn$async_dispatch_0", workgroup_count=(1, 1, 1), bindings=(0, 1))  # fmt: skip
    view.show_dispatch(info, tensors)
    qtbot.wait(50)
    listing = view.inspector.tensor_list
    assert [listing.item(i).text() for i in range(2)] == [
        "binding 0, access unknown\n3072 bytes, untyped", "binding 1, access unknown\n15296 bytes, untyped"]
    line = listing.fontMetrics().lineSpacing()
    heights = [listing.visualItemRect(listing.item(i)).height() for i in range(2)]
    assert all(h < 3 * line for h in heights), (heights, line, view.inspector.splitter.sizes())
    assert "(before it runs)" in view.header.text()  # said once, for every binding
    assert listing.item(0).toolTip().startswith("binding 0, access unknown, before it runs")
