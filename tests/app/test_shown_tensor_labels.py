"""The paused dispatch's tensor labels say only what is known: an untyped binding before its dispatch runs
may hold an earlier dispatch's results, so it is "before it runs", not "not written yet" (which read
as if its bytes were garbage); a typed output before its dispatch is "not written yet"."""

from __future__ import annotations

from dataclasses import replace
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


def test_the_compare_heatmap_keeps_its_height_under_a_long_verdict(qtbot):
    """Walk at 1366x768, a paused dispatch compared with golden data: the verdict and its metrics (six lines)
    squeezed the error heatmap to a ~60-px strip."""
    from app.views.tensor_inspector import COMPARE_HEATMAP_MIN, COMPARE_SUMMARY_LINES, InspectedTensor

    view = PausedDispatchView()
    qtbot.addWidget(view)
    view.resize(600, 420)
    view.show()
    qtbot.waitExposed(view)
    view.set_header("\n".join(["Dispatch #2 main$async_dispatch_2_matmul_like_16x3025x64_f32 (before it runs)"] * 5))
    a = np.random.default_rng(0).random((16, 64), dtype=np.float32)
    reference = a.copy()
    reference[3, 5] += 0.1
    inspector = view.inspector
    inspector.set_tensors([InspectedTensor("binding 0, read, input 0", a, "16x64xf32", reference=reference)])
    inspector.tabs.setCurrentIndex(inspector.tabs.count() - 1)
    qtbot.wait(50)
    assert inspector.compare_summary.text().startswith("diverged")
    assert len(inspector.compare_summary.text().splitlines()) > COMPARE_SUMMARY_LINES
    assert inspector.error_heatmap.height() >= COMPARE_HEATMAP_MIN
    line = inspector.compare_summary.fontMetrics().lineSpacing()
    assert inspector.compare_summary_area.height() <= (COMPARE_SUMMARY_LINES + 1) * line


def test_an_element_type_not_shown_yet_is_said_without_advice_to_find_sources(qtbot):
    """Walk, an i4 program at 1366x768: its dispatch said why it was bytes ("binding 0 holds 4xi4, an element
    type IREE Lens does not show yet") and then "To type it: open the .mlir it was compiled from", which the
    window had already done."""
    from app.views.dispatch_run_live import UNTYPED_HELP
    from engine.dispatch.typed_tensors import NOT_SHOWN_YET

    view = PausedDispatchView()
    qtbot.addWidget(view)
    info = SimpleNamespace(ordinal=0, export="nibbles_dispatch_0_elementwise_4_i4xi4xi8", when="before",
                           executable="nibbles_dispatch_0", workgroup_count=(1, 1, 1), bindings=(0, 1))  # fmt: skip
    note = f"the executable source does not type this dispatch (binding 0 holds 4xi4, {NOT_SHOWN_YET}): shown as bytes"
    tensors = [ShownTensor("binding", 0, b, 0, np.zeros(2, np.uint8), "2 bytes, untyped", TypeSource.UNTYPED,
                           "unknown", False, note) for b in (0, 1)]  # fmt: skip
    view.show_dispatch(info, tensors)
    assert "binding 0 holds 4xi4" in view.header.text() and UNTYPED_HELP not in view.header.text()
    view.show_dispatch(info, [replace(t, note="") for t in tensors])  # no sources: what would type it is said
    assert UNTYPED_HELP in view.header.text()
    # Typed by its source, an i4 tensor the session gives as its bytes is shown unpacked (1 2 3 4 from 0x21 0x43),
    # said in the header and its type; a complex one as its (re, im) pairs, named by its type; a source file is no note.
    shown = f"binding 0 holds 4xi4, {NOT_SHOWN_YET}: shown as its 2 bytes (packed, low bits first)"
    typed = [ShownTensor("input", 0, 0, 0, np.array([0x21, 0x43], np.uint8), "2xu8", TypeSource.SOURCES, "read",
                         True, shown, (), "4xi4"),
             ShownTensor("input", 1, 2, 0, np.ones((3, 2), np.float32), "3x2xf32", TypeSource.SOURCES, "read", True,
                         "binding 2 holds 3xcomplex<f32>, ...", (), "3xcomplex<f32>"),
             ShownTensor("output", 0, 1, 0, np.zeros(4, np.int8), "4xi8", TypeSource.SOURCES, "write", True,
                         "/tmp/sources/module_nibbles_dispatch_0.mlir")]  # fmt: skip
    view.show_dispatch(info, typed)
    header = view.header.text()
    assert "types from sources" in header
    assert "Binding 0, read, input 0 holds 4xi4, which IREE packs low bits first: shown unpacked" in header
    assert list(view.inspector.array) == [1, 2, 3, 4] and view.inspector.array.dtype == np.int8
    assert "4 i4" in view.inspector.summary.text()  # its statistics name the source's type, not int8's
    items = [view.inspector.tensor_list.item(k).text() for k in range(view.inspector.tensor_list.count())]
    assert "4xi4, unpacked from its 2 bytes" in items[0] and "3xcomplex<f32>, as (re, im) pairs" in items[1], items
    assert "module_nibbles_dispatch_0.mlir" not in header and UNTYPED_HELP not in header
