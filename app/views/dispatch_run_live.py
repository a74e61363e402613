"""The dispatches of the window's debug run, live: a list (ordinal, name, workgroups, tensor health) that
fills as the run reports dispatches, and, when the run stops at a dispatch (a dispatch breakpoint, NaN,
Next Dispatch), a document "Dispatch #N name" with the tensor inspector on its inputs and outputs.

Everything comes through the window's one ``SessionBridge``: ``dispatchStopped`` asks the session for the
paused dispatch's tensors (``ReadTensors``); the session types them, once, from the best source there is
(``engine.dispatch.typed_tensors``: the executables' sources, else exactly the bound bytes) and this view
only shows what it answers, with where each type came from. The list is the run's recorded history
(``History.dispatches``, asked after every stop and at the end of the run: every dispatch that ran), with the
dispatches reported running (at most every ``PROGRESS_INTERVAL``) and those stopped at added as they come;
a dispatch known only from the history shows "-" where it has no workgroups or tensors read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import shiboken6
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.dispatch_list_model import ColumnFitter, event_verdicts
from app.views.dispatch_run_list import DispatchRunModel
from app.views.tensor_inspector import InspectedTensor, TensorInspector
from app.views.verdict_style import legend_html
from engine.dispatch.bundle import DispatchEntry
from engine.dispatch.debug_capture import health_of
from engine.dispatch.tensor_types import from_storage, packed_type, unpacked_values
from engine.dispatch.typed_tensors import NOT_SHOWN_YET
from engine.session.change_text import origin_text
from engine.session.protocol import DispatchTensor, LastChange, ReadTensors, Tensors, TypeSource, WatchBinding

# What would type an untyped dispatch (said with it, never a promise that it will be typed).
UNTYPED_HELP = (
    "To type it: open the .mlir it was compiled from (same flags), or put the executables' sources beside the "
    ".vmfb (a folder iree-lens --sources takes)."
)


def _sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter, unless its first word is a name (``t96.mlir rebuilt
    for ...`` keeps its file name as it is), and a full stop."""
    text = text.strip()
    if not text:
        return text
    first = text.split()[0]
    if first.isalpha():
        text = text[:1].upper() + text[1:]
    return text.rstrip(".") + "."
HEADER_LINES = 5  # the paused dispatch's header, at most (scrolled beyond)
UNREAD = "-"  # health of a dispatch whose tensors were not read (seen running, not stopped at)


@dataclass(frozen=True)
class ShownTensor:
    """A tensor of the paused dispatch as the session typed it (a ``DispatchTensor``, its array read)."""

    role: str  # input | output | binding (untyped, before the dispatch ran)
    position: int
    binding: int
    offset: int
    array: np.ndarray = field(repr=False)
    type_text: str
    source: str  # sources | runtime | untyped
    access: str
    written: bool
    note: str = ""
    # Byte ranges no dispatch defined before (an in-place tensor's leftovers: DispatchTensor.undefined);
    # None: not known.
    undefined: tuple[tuple[int, int], ...] | None = ()
    declared: str = ""  # the source's type where ``array`` is another view of its bytes (i4 as its bytes)
    global_name: str = ""  # the module global whose buffer holds it (``@state``): DispatchTensor.global_name

    def inspected(self) -> InspectedTensor:
        """The tensor as the inspector shows it: a packed type (``64x32xi4``) unpacked from its bytes, one value
        a cell; complex as its (re, im) pairs, named by the source's type; an encoded tensor as its binding's
        bytes, said so; else the array as typed."""
        array, type_text, element = self.array, self.type_text, ""
        values = unpacked_values(self.array, self.declared) if self.declared else None
        if values is not None:
            array, type_text = values, f"{self.declared}, unpacked from its {self.array.nbytes} bytes"
            element = self.declared.split(",")[0].rpartition("x")[2]
        elif "complex<" in self.declared:
            type_text = f"{self.declared}, as (re, im) pairs"
        elif self.declared and self.array.dtype == np.uint8:  # an encoded tensor (data tiling), its layout unknown
            type_text = f"{self.declared}: {self.array.nbytes} bytes of its binding, in the layout its encoding chose"
        elif self.declared:  # an encoded tensor as the kernel lays it out (its tiles)
            type_text = f"{self.declared}, as {self.type_text}: the layout its encoding chose"
        return InspectedTensor(self.label, array, type_text, list_label=self.list_label, list_state=self.list_state,
                               element=element)

    @property
    def undefined_text(self) -> str:
        if self.undefined is None:
            return ("which bytes earlier dispatches defined is unknown: one ran before the executables' sources were "
                    "there (known from the next run)")
        count = sum(e - s for s, e in self.undefined)
        return f"{count} bytes never written before this dispatch: undefined" if count else ""

    @property
    def undefined_short(self) -> str:
        """The tensor list's few words for it ("2560 B undefined"): the header says what it means, once."""
        if self.undefined is None:
            return "defined bytes unknown"
        count = sum(e - s for s, e in self.undefined)
        return f"{count} B undefined" if count else ""

    @property
    def binding_text(self) -> str:
        """One vocabulary for every binding: its number (and offset), the access the dispatch declares, then
        its role in the dispatch's operands when the sources say it ("binding 3, write, output 0"); an
        untyped binding has no known role, and is never called an input or output by guess."""
        where = f"binding {self.binding}" + (f" @{self.offset}" if self.offset else "")
        role = f", {self.role} {self.position}" if self.source != TypeSource.UNTYPED else ""
        access = self.access if self.access and self.access != "unknown" else "access unknown"
        return f"{where}, {access}{role}"

    @property
    def state(self) -> str:
        """What the bytes are at the stop: an output before its dispatch ran holds what the memory held then
        ("not written yet"); an untyped binding's bytes may be an earlier dispatch's results, so they are only
        said to be as they were before this dispatch ("before it runs"); "" once the dispatch ran."""
        if self.written:
            return ""
        return "not written yet" if self.source != TypeSource.UNTYPED and self.role == "output" else "before it runs"

    @property
    def label(self) -> str:
        """The binding, its state and what of it is undefined: "binding 3, write, output 0, not written yet"."""
        state = f", {self.state}" if self.state else ""
        undefined = self.undefined_text
        held = f", in global {self.global_name}" if self.global_name else ""
        return f"{self.binding_text}{state}{held}" + (f" — {undefined}" if undefined else "")

    @property
    def list_label(self) -> str:
        """The label as the tensor list shows it: without the state, which goes beside the type (its second
        line) where it tells the tensors apart ("not written yet": an output among inputs), and is left out
        where the view's header says it for all of them ("(before it runs)"). Two lines in a 1366-px
        window; the whole label was three or four, an untyped model's bindings a screen of wrapped text.
        What of it is undefined in a few words: the header says what that means, once for all tensors."""
        undefined = self.undefined_short
        return self.binding_text + (f" — {undefined}" if undefined else "")

    @property
    def list_state(self) -> str:
        """Beside the type: "not written yet" (an output among inputs), and the global that holds it: the
        program's own by name ("in @state"); one the compiler made (a pool of hoisted constants,
        ``@__constant_tensor_...``, whose long name said little in a narrow list) as "in a global", named in
        full by the label above the tensor."""
        parts = [self.state] if self.state == "not written yet" else []
        if self.global_name:
            parts.append("in a global" if self.global_name.startswith(("@__", ".refs")) else f"in {self.global_name}")
        return ", ".join(parts)

    @classmethod
    def from_protocol(cls, t: DispatchTensor) -> ShownTensor:
        array = from_storage(t.tensor.to_numpy(), t.tensor.element_type)
        if t.type_source == TypeSource.UNTYPED:
            type_text = f"{array.size} bytes, untyped"
        else:
            type_text = "x".join([*(str(d) for d in array.shape), t.tensor.element_type])
        return cls(t.role, t.position, t.index, t.offset, array, type_text, t.type_source, t.access, t.written,
                   t.type_note, t.undefined, t.declared, t.global_name)  # fmt: skip


def _undefined_lines(tensors: list[ShownTensor]) -> list[str]:
    """The header's one line on undefined bytes, for all the tensors: a line per in-place tensor ("input 1:
    4096 bytes never written before this dispatch: undefined", again under each in the list) was wordy."""
    unknown = [t for t in tensors if t.undefined is None]
    counted = [(t, sum(e - s for s, e in t.undefined)) for t in tensors if t.undefined]
    parts = [f"{t.role} {t.position} ({count} bytes)" for t, count in counted if count]
    lines = [f"Never written before this dispatch, so undefined: {'; '.join(parts)}"] if parts else []
    if unknown:
        lines.append(_sentence(unknown[0].undefined_text))
    return lines


class PausedDispatchView(QWidget):
    """One paused dispatch: a header (ordinal, names, workgroups, where the types came from) over the
    tensor inspector of its inputs and outputs; Step Into Workgroup… asks to step one of its workgroups."""

    stepIntoRequested = Signal(object)  # app.views.kernel_step.SelectedElement | None
    # (WatchBinding, what it is in words): where did an element's bytes before the dispatch come from?
    whereFromRequested = Signal(object, str)
    producerRequested = Signal(int)  # go to the dispatch that wrote the element asked about (parked after it)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.info = None
        self.tensors: list[ShownTensor] = []
        self.lines: list[str] = []  # the header's description of the dispatch as it was at the stop
        self.left: str | None = None  # how the run has moved on since this stop (None: it is paused here)
        self.header = QLabel(self)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.step_into_button = QPushButton("Step Into Workgroup…", self)
        self.step_into_button.setObjectName("stepIntoWorkgroup")
        self.step_into_button.setToolTip(
            "Step one workgroup of this dispatch statement by statement (llvm-cpu and VMVX builds); proposes the "
            "workgroup that wrote the element selected below"
        )
        self.step_into_button.clicked.connect(lambda: self.stepIntoRequested.emit(self.selected_element()))
        # Where an element came from, once asked: a way there (hidden until an answer names a dispatch).
        self.producer_button = QPushButton(self)
        self.producer_button.setObjectName("goToProducer")
        self.producer_button.setVisible(False)
        self.producer_button.clicked.connect(lambda: self.producerRequested.emit(self.producer[1]))
        self.producer: tuple[tuple[int, str], int] | None = None  # ((this dispatch, when), the one that wrote it)
        self.inspector = TensorInspector(self)
        self.inspector.ask_about_elements(self._where_from_question)
        self.inspector.elementQuestioned.connect(self._ask_where_from)
        # At most five lines tall, scrolled beyond: why a dispatch is untyped can take nine lines at 1366x768,
        # which pushed the tensors down to a strip.
        self.header_area = QScrollArea(self)
        self.header_area.setWidget(self.header)
        self.header_area.setWidgetResizable(True)
        self.header_area.setFrameShape(QFrame.Shape.NoFrame)
        self.header_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.header_max = self.header.fontMetrics().lineSpacing() * HEADER_LINES + 6
        self.header_area.installEventFilter(self)  # its height follows its text at its width (_fit_header)
        top = QHBoxLayout()
        top.addWidget(self.header_area, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.step_into_button)
        buttons.addWidget(self.producer_button)
        buttons.addStretch(1)
        top.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.inspector, 1)

    def set_header(self, text: str) -> None:
        self.header.setText(text)
        self._fit_header()

    def _fit_header(self) -> None:
        """The header area as tall as its text at its width, up to ``HEADER_LINES`` (no empty band below)."""
        width = self.header_area.viewport().width()
        needed = self.header.heightForWidth(width) if width > 0 else self.header.sizeHint().height()
        self.header_area.setFixedHeight(min(max(needed, 0) + 2, self.header_max))

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.header_area and event.type() == QEvent.Type.Resize:
            self._fit_header()
        return False

    def show_pending(self, info) -> None:
        """The run stopped at ``info``; its tensors are being read: the view names this dispatch at once and
        shows nothing of the one before (stepper, status bar and document agree from the stop on)."""
        self.info, self.tensors, self.left = info, [], None
        self._forget_producer(info)
        self.lines = [f"Dispatch #{info.ordinal} {info.export} ({info.when} it runs) — reading its tensors…"]
        self.set_header(self.lines[0])
        self.inspector.set_tensors([])

    def selected_element(self):
        """The element selected in the inspector's table, as bytes of a binding (None when none is, or its
        tensor is untyped bytes)."""
        from app.views.kernel_step import SelectedElement

        row = self.inspector.tensor_list.currentRow()
        index = self.inspector.selected_element()
        if index is None or not 0 <= row < len(self.tensors):
            return None
        t = self.tensors[row]
        array = self.inspector.array
        if t.source == TypeSource.UNTYPED or array.shape != t.array.shape:
            return None  # bytes, or retyped by the user: which element is meant is not known
        flat = int(np.ravel_multi_index(index, array.shape)) if index else 0
        size = array.dtype.itemsize
        return SelectedElement(t.binding, t.offset + flat * size, size, f"{t.role} {t.position} {list(index)}")

    def _where_from_question(self, index: tuple[int, ...]) -> str:
        """The table's question of an element whose bytes are as they were before the dispatch ran (an
        input, or any binding before it ran): "" for an output it wrote (the answer would be itself)."""
        t = self._current_tensor()
        if t is None or self.left is not None or (t.role == "output" and t.written):
            return ""
        if self.inspector.element_place(index) is None:
            return ""  # unpacked from packed bytes: the element is not a run of bytes to watch
        return f"Where did {t.binding_text} [{', '.join(str(i) for i in index)}] come from?  (what wrote it before)"

    def _current_tensor(self) -> ShownTensor | None:
        row = self.inspector.tensor_list.currentRow()
        return self.tensors[row] if 0 <= row < len(self.tensors) else None

    def _ask_where_from(self, index: tuple[int, ...]) -> None:
        t = self._current_tensor()
        place = self.inspector.element_place(index)
        if t is None or place is None:
            return
        offset, length, element = place
        what = f"{t.binding_text} [{', '.join(str(i) for i in index)}] of dispatch #{self.info.ordinal}"
        self.whereFromRequested.emit(WatchBinding(t.binding, t.offset + offset, length, element), what)

    def show_producer(self, ordinal: int, what: str) -> None:
        """Offer a way to dispatch ``ordinal``, which wrote ``what`` (an element of this stop's tensors)."""
        if self.info is None:
            return
        self.producer = ((self.info.ordinal, str(self.info.when)), ordinal)
        self.producer_button.setText(f"Go to #{ordinal}")
        self.producer_button.setToolTip(f"Go back to dispatch #{ordinal}, which wrote {what}, parked after it ran")
        self.producer_button.setVisible(True)

    def _forget_producer(self, info) -> None:
        """Another stop: the way to the last answer's dispatch is not this one's (the same stop, parked there
        again after the search, keeps it)."""
        if self.producer is not None and self.producer[0] != (info.ordinal, str(info.when)):
            self.producer = None
            self.producer_button.setVisible(False)

    def show_left(self, how: str) -> None:
        """The run is no longer paused at this dispatch (``how``: "finished", "is running"...): the header says
        so first, so the tensors below (kept as they were at the stop, for inspection) are never taken for the
        current ones."""
        if self.info is None or self.left == how:
            return
        self.left = how
        notice = (
            f"The run {how}: it is no longer paused at dispatch #{self.info.ordinal}. Below is what this dispatch "
            f"held at that stop ({self.info.when} it ran)."
        )
        self.set_header("\n".join([notice, *self.lines]))

    def show_dispatch(self, info, tensors: list[ShownTensor], note: str = "") -> None:
        self.info, self.tensors, self.left = info, tensors, None
        self._forget_producer(info)
        wg = "x".join(str(w) for w in info.workgroup_count)
        sources = sorted({t.source for t in tensors})
        # Why bytes are untyped; a packed tensor is unpacked here (the session's note says it is bytes there).
        notes = sorted({t.note for t in tensors if t.note and t.source == TypeSource.UNTYPED})
        packed = [t for t in tensors if packed_type(t.declared) is not None]
        untyped = sources == [TypeSource.UNTYPED]
        typed = "untyped (each binding's bytes as bound)" if untyped else f"types from {', '.join(sources) or '-'}"
        # The dispatch on the first line; why it is untyped and what would type it, then notes, below.
        lines = [
            f"Dispatch #{info.ordinal} {info.export} ({info.when} it runs) — executable {info.executable}, "
            f"workgroups {wg}, {len(info.bindings)} bindings; {typed}",
            *(_sentence(n) for n in notes),
            *(f"{t.binding_text.capitalize()} holds {t.declared}, which IREE packs low bits first: shown unpacked, "
              "one value a cell." for t in packed),
            *([UNTYPED_HELP] if untyped and not any(NOT_SHOWN_YET in n for n in notes) else []),
            *([_sentence(note)] if note else []),
            *_undefined_lines(tensors),
        ]
        self.lines = lines
        self.set_header("\n".join(lines))
        self.inspector.set_tensors([t.inspected() for t in tensors])


class RunDispatchesPanel(QWidget):
    """The run's dispatch list (a document panel); owns the paused-dispatch documents it opens."""

    tensorsShown = Signal(object)  # DispatchInfo: the paused dispatch's tensors are on show
    kernelViewOpened = Signal(object)  # app.views.kernel_view.KernelView: a workgroup stepped into

    def __init__(self, services, parent: QWidget | None = None):
        super().__init__(parent)
        self.services = services
        self.bridge = getattr(services, "session_bridge", None)
        self.title = QLabel("Run a function in the VM Stepper: its dispatches are listed here as they run.", self)
        self.title.setWordWrap(True)
        self.model = DispatchRunModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)  # more rows in view
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # keeps the _dispatch_N and the shape
        self.fitter = ColumnFitter(self.table, self.model)
        # What the row colours mean once a diverge breakpoint judged the run: never colour alone.
        self.legend = QLabel(legend_html(), self)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setVisible(False)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.legend)
        self.setMinimumSize(1, 1)
        self.paused_view: PausedDispatchView | None = None
        self._where_from: tuple[WatchBinding, str] | None = None  # the element asked about, in words
        self._rows: dict[int, int] = {}  # ordinal -> row
        if self.bridge is not None:
            self.bridge.dispatchStopped.connect(self._on_dispatch_stopped)
            self.bridge.sourcesSettled.connect(self._on_sources_settled)
            self.bridge.answered.connect(self._on_answer)
            self.bridge.progressed.connect(self._on_progress)
            self.bridge.stateChanged.connect(self._on_state)
            self.bridge.historyChanged.connect(self._on_history)
            self.bridge.finished.connect(lambda _e: self._set_title("finished"))
            self.bridge.failed.connect(self._on_failed)
            self.bridge.stopped.connect(self._on_verdicts)
            self.bridge.finished.connect(self._on_verdicts)
        self.workbench = getattr(services, "workbench", None)
        self._run = self.workbench.state.run if self.workbench is not None else 0  # the run listed
        if self.workbench is not None:
            self.workbench.moduleReset.connect(lambda _m: self.clear())
            self.workbench.stateChanged.connect(self._on_run_state)
        self._last_state = None

    # -- the list

    def clear(self) -> None:
        self._rows.clear()
        self.model.set_entries([])
        self._set_verdicts({})
        self.title.setText("Run a function in the VM Stepper: its dispatches are listed here as they run.")

    def _on_state(self, state: str) -> None:
        # A new call starts a new list (the window's run state says which runs are new calls: travelling in a
        # finished run's history also runs from idle); resuming from a stop keeps it.
        if self.workbench is None and state == "running" and self._last_state == "idle":
            self.clear()
        self._last_state = state

    def _on_run_state(self, state) -> None:
        if state.run != self._run:
            self._run = state.run
            self.clear()
        self._mark_if_left(state)

    def _mark_if_left(self, state) -> None:
        """The paused dispatch's document says so once the run is no longer paused at its dispatch (it runs,
        finished, failed, or stopped elsewhere), instead of still reading "(before it runs)"."""
        view = self.paused_view
        if state is None or view is None or not shiboken6.isValid(view) or view.info is None:
            return
        paused = state.paused
        if paused is not None and int(paused.ordinal) == int(view.info.ordinal) and paused.when == view.info.when:
            return
        view.show_left(_how_the_run_moved_on(state))

    def _on_history(self, history) -> None:
        """Every dispatch the run recorded: those not listed yet join the list in ordinal order (what a
        progress report or a stop told of a row, its workgroups and health, is kept)."""
        if history is None or not history.dispatches:
            return
        known = {e.ordinal: e for e in self.model.entries}
        entries = [
            known.get(m.ordinal) or DispatchEntry(m.ordinal, m.name, None, None, health=UNREAD)
            for m in history.dispatches
        ]
        listed = {e.ordinal for e in entries}
        entries += [e for e in self.model.entries if e.ordinal not in listed]
        entries.sort(key=lambda e: e.ordinal)
        if [e.ordinal for e in entries] != [e.ordinal for e in self.model.entries]:
            self.model.set_entries(entries)
            self._rows = {e.ordinal: i for i, e in enumerate(entries)}
        state = "running" if self.bridge is None else str(self.bridge.state)
        self._set_title({"idle": "finished", "stopped": "paused"}.get(state, state))

    def _on_failed(self, _failed) -> None:
        if self.workbench is not None and self.workbench.state.outcome == "failed":
            self._set_title("the run failed")

    def _note(self, info, health: str | None = None) -> None:
        row = self._rows.get(info.ordinal)
        if row is None:
            entry = DispatchEntry(
                info.ordinal, info.export, info.executable, list(info.workgroup_count), health=health or UNREAD
            )
            self._rows[info.ordinal] = len(self.model.entries)
            self.model.append(entry)
        elif health is not None:
            self.model.entries[row].health = health
            index = self.model.index(row, 5)  # the Health column
            self.model.dataChanged.emit(index, index)
        self._set_title("running" if self.bridge is None or self.bridge.state == "running" else "paused")

    def _on_verdicts(self, event) -> None:
        marks = event_verdicts(event, self.model.verdicts)  # a diverge breakpoint's stop, or the end it watched
        if marks is not None:
            self._set_verdicts(marks)

    def _set_verdicts(self, marks) -> None:
        self.model.set_verdicts(marks)
        self.legend.setVisible(bool(marks))

    def _set_title(self, what: str) -> None:
        self.title.setText(f"{len(self.model.entries)} dispatches ({what})")

    def _on_progress(self, progress) -> None:
        info = progress.location.dispatch_info
        if info is not None:
            self._note(info)

    def _on_dispatch_stopped(self, info) -> None:
        self._note(info)
        view = self.paused_view
        tabs = _tab_widget(view) if view is not None and shiboken6.isValid(view) else None
        if tabs is not None:
            view.show_pending(info)
            _name_tab(tabs, view, info)
        self.bridge.evaluate(ReadTensors())

    def _on_sources_settled(self) -> None:
        """The rebuild of the sources ended: the stop on show, read untyped while it ran, is read again (typed
        now, or why not, in place of "rebuilding..."). Its answer only updates that view (``_on_refreshed``)."""
        view = self.paused_view
        if view is not None and shiboken6.isValid(view) and view.info is not None and view.left is None:
            self.bridge.evaluate(ReadTensors(refresh=True))

    # -- the paused dispatch

    def _ask_where_from(self, watch: WatchBinding, what: str) -> None:
        """Ask the session where the element's bytes came from (it goes back and parks here again)."""
        if self.bridge is None or not self.bridge.can_reverse:
            self._tell("Where did this come from? needs a recorded run, paused at this dispatch")
            return
        self._where_from = (watch, what)
        self._tell(f"Searching the history for what wrote {what}…")
        self.bridge.when_changed(watch)

    def _on_where_from(self, answer: LastChange) -> None:
        asked = self._where_from
        if asked is None or asked[0] != answer.query.watch:
            return
        what, change = asked[1], answer.change
        self._tell(origin_text(what, change))
        view = self.paused_view
        if change is not None and change.made_by is not None and view is not None and shiboken6.isValid(view):
            view.show_producer(change.made_by, what)

    def _on_answer(self, answer) -> None:
        if isinstance(answer, LastChange) and isinstance(answer.query.watch, WatchBinding):
            self._on_where_from(answer)
            return
        if isinstance(answer, Tensors) and answer.query.refresh:
            self._on_refreshed(answer)
            return
        if not isinstance(answer, Tensors) or answer.info is None:
            return
        info = answer.info
        tensors = [ShownTensor.from_protocol(t) for t in answer.tensors]
        typed_outputs = [t.array for t in tensors if t.role == "output" and t.source != TypeSource.UNTYPED]
        ran = info.when == "after" and any(t.role == "output" for t in tensors)
        self._note(info, health_of(typed_outputs) if ran and typed_outputs else UNREAD)
        self.show_paused(info, tensors)
        if self.workbench is not None:  # an answer that came after the run moved on
            self._mark_if_left(self.workbench.state)
        self.tensorsShown.emit(info)

    def _on_refreshed(self, answer: Tensors) -> None:
        """A stop read again: it updates the view that shows that same stop, if it is still open and the run
        still paused there; otherwise the answer came after the run moved on (or the tab was closed) and is
        dropped: a refresh never opens a tab nor brings one to the front."""
        view, info = self.paused_view, answer.info
        if info is None or view is None or not shiboken6.isValid(view) or _tab_widget(view) is None:
            return
        if view.info is None or view.left is not None:
            return
        if int(view.info.ordinal) != int(info.ordinal) or view.info.when != info.when:
            return
        tensors = [ShownTensor.from_protocol(t) for t in answer.tensors]
        row = view.inspector.tensor_list.currentRow()
        view.show_dispatch(info, tensors)
        if 0 < row < len(tensors):  # the tensor the user was looking at stays chosen
            view.inspector.tensor_list.setCurrentRow(row)
        self.tensorsShown.emit(info)

    def show_paused(self, info, tensors: list[ShownTensor]) -> PausedDispatchView:
        """Show the paused dispatch in its document (one tab, reused and renamed for each stop; a closed
        tab is deleted by the window, so each stop offers a fresh view and gets the open one back)."""
        view = self.paused_view
        tabs = _tab_widget(view) if view is not None and shiboken6.isValid(view) else None
        if tabs is not None and tabs.currentWidget() is not view:
            # Open but behind another document (the editor the user works in): update it, do not jump.
            view.show_dispatch(info, tensors)
            _name_tab(tabs, view, info)
            return view
        fresh = PausedDispatchView()
        view = self.services.open_document(fresh, tab_title(info), "paused-dispatch")  # the open one, if any
        tabs = _tab_widget(view)
        if tabs is not None:
            _name_tab(tabs, view, info)
        view.show_dispatch(info, tensors)
        if view is fresh:  # wired once: a reused tab wired again at each stop answered each click once per stop
            view.stepIntoRequested.connect(self.step_into)
            view.whereFromRequested.connect(self._ask_where_from)
            view.producerRequested.connect(lambda k: self.bridge.travel_to(dispatch=k, when="after", park=True))
            view.inspector.saved.connect(self._said_saved)
        self.paused_view = view
        return view

    def _tell(self, text: str) -> None:
        """A line for the status bar and the log."""
        if self.workbench is not None:
            self.workbench.say(text)
        else:
            self.services.messages.info(text)

    def _said_saved(self, path: str) -> None:
        """Where a tensor of the paused dispatch was saved, said in the status bar and the log."""
        view = self.paused_view
        current = view.inspector.current if view is not None else None
        what = current.label.split(" — ")[0] if current is not None else "the tensor"
        of = f" of dispatch #{view.info.ordinal}" if view is not None and view.info is not None else ""
        self._tell(f"Saved {what}{of} to {path}")

    # -- stepping into a workgroup

    def step_into(self, element=None):
        """Offer the workgroup picker for the paused dispatch (None, saying why, when there is none)."""
        from app.views.kernel_step import (
            KernelRequest,
            WorkgroupPicker,
            capture_and_find_writer,
            program_of,
            steppable,
        )

        view = self.paused_view
        workbench = getattr(self.services, "workbench", None)
        state = workbench.state if workbench is not None else None
        if view is None or view.info is None or state is None or state.module is None or not state.function:
            self.services.messages.error("Step Into Workgroup: no paused dispatch of an open module")
            return None
        info = view.info
        request = KernelRequest(str(state.module.path), state.function, tuple(state.inputs), info.ordinal,
                                tuple(info.workgroup_count), element,
                                tuple(getattr(self.bridge, "parameters", ())))  # fmt: skip
        picker = WorkgroupPicker(request, self)
        picker.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.picker = picker
        self._captured = None
        if not steppable(state.module.module):
            formats = ", ".join(sorted({e.format for e in state.module.module.executables})) or "none"
            program = program_of(str(state.module.path), state.module.source)
            build = picker.refuse_format(formats, program)
            if build is not None:
                build.clicked.connect(lambda: self._build_for_cpu(program, picker))
            picker.show()
            return picker
        picker.chosen.connect(lambda wg: self._record(request, wg))
        picker.buttons.setEnabled(False)  # until the dispatch is captured again

        def found(result) -> None:
            self._captured = result[0]
            if shiboken6.isValid(picker):
                picker.buttons.setEnabled(True)
                picker.set_writer(result[1])

        def failed(error) -> None:
            self.services.messages.error(f"Step Into Workgroup: {error.message}")
            if shiboken6.isValid(picker):
                picker.note.setText(error.message)

        self.services.worker.submit(capture_and_find_writer, request, tag="kernel-capture", on_result=found,
                                    on_error=failed)  # fmt: skip
        picker.show()
        return picker

    def _build_for_cpu(self, program, picker) -> None:
        """Build the program for llvm-cpu on the engine worker and open the build (the user runs it to the
        dispatch again: a new module is a clean start)."""
        from app.views.kernel_step import build_for_cpu

        picker.note.setText(f"Building {program.name} for llvm-cpu…")

        def built(path: str) -> None:
            if shiboken6.isValid(picker):
                picker.close()
            self.services.open_file(path)

        def failed(error) -> None:
            self.services.messages.error(f"Step Into Workgroup: {error.message}")
            if shiboken6.isValid(picker):
                picker.note.setText(error.message)

        self.services.worker.submit(build_for_cpu, program, tag="kernel-build", on_result=built, on_error=failed)

    def _record(self, request, workgroup) -> None:
        from app.views.kernel_step import record

        wg = ",".join(map(str, workgroup))
        # The kernel's IR may need a compile (its executable's source: a second; the whole program rebuilt:
        # minutes on a large model): said at once, not left to a bare progress bar.
        self._tell(f"Stepping into workgroup ({wg}) of dispatch #{request.dispatch}: recording it (its kernel's "
                   "LLVM IR is compiled first when none is kept: seconds, or minutes if the program is rebuilt)…")  # fmt: skip

        def opened(trace) -> None:
            self.kernel_view = self.open_kernel_view(trace, request.element)
            self._tell(f"Workgroup ({wg}) of dispatch #{trace.dispatch}: {len(trace.steps)} statements recorded")

        self.services.worker.submit(
            record, request, self._captured, workgroup, tag="kernel-record", on_result=opened,
            on_error=lambda e: self.services.messages.error(f"Step Into Workgroup: {e.message}"),
        )  # fmt: skip

    def open_kernel_view(self, trace, element=None):
        from app.views.kernel_view import KernelView

        view = KernelView(trace)
        if element is not None:
            view.follow_store(element.binding, element.offset)
        wg = ",".join(map(str, trace.workgroup))
        view = self.services.open_document(view, f"Workgroup ({wg}) of #{trace.dispatch}", f"kernel:{trace.dispatch}:{wg}")
        self.kernelViewOpened.emit(view)
        return view


def tab_title(info) -> str:
    """The paused dispatch's tab: its ordinal first, so a tab cut to a few characters (six documents in a
    1366-px window showed "Dispatch…") still says which dispatch it is; the header says "Dispatch #N" in full."""
    return f"#{info.ordinal} {info.export}"


def _name_tab(tabs: QTabWidget, view: QWidget, info) -> None:
    """Title and tooltip alike, as every document tab (the tooltip is the whole title of an elided tab)."""
    index = tabs.indexOf(view)
    tabs.setTabText(index, tab_title(info))
    tabs.setTabToolTip(index, tab_title(info))


def _how_the_run_moved_on(state) -> str:
    """How the run left its paused dispatch, from the window's run state (``app.workbench.WorkbenchState``)."""
    if state.run_state == "running":
        return "is running"
    if state.run_state == "stopped":
        where = state.paused
        return "stopped elsewhere" if where is None else f"is now paused at dispatch #{where.ordinal} ({where.when} it runs)"
    return {
        "finished": "finished",
        "failed": "failed",
        "crashed": "crashed",
        "stopped": "was stopped",
    }.get(state.outcome, "ended")


def _tab_widget(widget: QWidget) -> QTabWidget | None:
    parent = widget.parent()
    while parent is not None and not isinstance(parent, QTabWidget):
        parent = parent.parent()
    return parent if parent is not None and parent.indexOf(widget) >= 0 else None


def run_dispatches_panel(services) -> RunDispatchesPanel:
    return RunDispatchesPanel(services)
