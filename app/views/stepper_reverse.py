"""The stepper's time-travel controls: reverse stepping, the run position timeline, "when did this change?".

The session records every call (``engine.timetravel``); this module gives the stepper panel:

* the reverse actions beside the forward ones — Reverse Step Into (Ctrl+Shift+F11), Reverse Step Over
  (Ctrl+Shift+F10), Reverse Step Out (Alt+Shift+F11), Reverse Continue (Ctrl+Shift+F5) and Previous
  Dispatch (Shift+F6, the mirror of Next Dispatch's F6);
* a history bar with the run position timeline (``RunTimeline``): click or drag to travel to an instruction,
  click a dispatch tick to stop inside that dispatch (its tensors shown);
* a context menu on the registers and globals: "When did this change?" runs back to the instruction (or
  dispatch) that last wrote the value, and says what it wrote in the status line.

Every travel ends in an ordinary ``Stopped`` event, so every panel (registers, call stack, globals,
disassembly, the paused dispatch's tensors) shows the moment travelled to, as after a forward step.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QPoint, Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.action_strip import ActionStrip
from app.views.run_timeline import RunTimeline
from app.views.stepper_state import GLOBAL_PLACE_ROLE
from engine.session.change_text import holds_bytes, last_write_text
from engine.session.protocol import (
    Answer,
    BreakpointKind,
    History,
    LastChange,
    Stopped,
    Watch,
    WatchBinding,
    WatchGlobal,
    WatchGlobalContents,
    WatchGlobalRef,
    WatchRegister,
    WatchRegisterContents,
)

if TYPE_CHECKING:
    from app.views.stepper_panel import StepperPanel

_RWDATA = re.compile(r"^\.rwdata\[(\d+)\]$")
_REFS = re.compile(r"^\.refs\[(\d+)\]$")


class ReverseControls(QObject):
    def __init__(self, panel: StepperPanel):
        super().__init__(panel)
        self.panel = panel
        b = panel.bridge
        self.bridge = b
        self.note: str | None = None  # said with the next stop (the answer of "when did this change?")
        self._retrying = False  # a Previous Dispatch waits for a fresh history answer
        self._asked: tuple[Watch, str] | None = None  # the last "when did this change?" and its words
        a = panel.make_action
        self.reverse_continue_action = a(
            "◀ Rev Continue", "Ctrl+Shift+F5", b.reverse_continue, reverse_continue_tip(b.breakpoints)
        )
        self.reverse_step_over_action = a(
            "↶ Rev Over", "Ctrl+Shift+F10", b.reverse_step_over, "Step back one instruction of this function, over calls"
        )
        self.reverse_step_into_action = a(
            "↑ Rev Into", "Ctrl+Shift+F11", b.reverse_step_into, "Step back one instruction (into calls)"
        )
        self.reverse_step_out_action = a(
            "⇡ Rev Out", "Alt+Shift+F11", b.reverse_step_out, "Run back to the call that entered this function"
        )
        self.previous_dispatch_action = a(
            "⇠ Prev Dispatch", "Shift+F6", self.previous_dispatch, "Go back to the previous dispatch (stops in it)"
        )
        self.actions = (
            self.reverse_continue_action,
            self.reverse_step_over_action,
            self.reverse_step_into_action,
            self.reverse_step_out_action,
            self.previous_dispatch_action,
        )

        # The history bar: reverse actions, the timeline, where the run is.
        self.bar = QWidget(panel)
        self.bar.setObjectName("stepperHistoryBar")
        self.toolbar = ActionStrip(self.bar)  # wraps rather than hiding actions in a narrow dock
        self.toolbar.setObjectName("stepperReverseToolbar")
        for action in self.actions:
            self.toolbar.addAction(action)
        self.timeline = RunTimeline(self.bar)
        self.timeline.positionRequested.connect(lambda p: self.bridge.travel_to(position=p))
        self.timeline.dispatchRequested.connect(lambda k: self.bridge.travel_to(dispatch=k))
        self.position_label = QLabel(self.bar)
        self.position_label.setObjectName("stepperPosition")
        self.position_label.setStyleSheet("color:#444;")
        # Rows: the reverse actions under the forward ones, the status line (the whole stop message, wrapped),
        # then the timeline.
        column = QVBoxLayout(self.bar)
        column.setContentsMargins(0, 0, 4, 0)
        column.setSpacing(0)
        column.addWidget(self.toolbar)
        status = panel.status_label
        status.setWordWrap(True)
        status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        status.setStyleSheet("padding-left:4px;")
        column.addWidget(status)
        strip = QHBoxLayout()
        strip.setContentsMargins(0, 0, 0, 0)
        strip.addWidget(self.timeline, 1)
        strip.addWidget(self.position_label)
        column.addLayout(strip)

        for view in (panel.registers, panel.globals_view):
            view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            view.customContextMenuRequested.connect(lambda pos, v=view: self._context_menu(v, pos))
        b.historyChanged.connect(self._on_history)
        b.answered.connect(self._on_answer)
        b.breakpointsChanged.connect(
            lambda bps: self.reverse_continue_action.setToolTip(f"{reverse_continue_tip(bps)} (Ctrl+Shift+F5)")
        )
        self.update_enabled()
        self._on_history(b.history)

    # -- commands -------------------------------------------------------------------------------------

    def previous_dispatch(self) -> None:
        if not self.bridge.can_reverse:
            self._say("Previous Dispatch needs a recorded run: run the function (paused, or finished) first")
            return
        if self.bridge.previous_dispatch():
            return
        if not self._retrying:
            # The history may not have caught up with the last stop or end yet: ask, and try again with it.
            self._retrying = True
            self.bridge.refresh_history()
            return
        self._retrying = False
        self._say("No earlier dispatch in the recorded history")

    def _say(self, text: str) -> None:
        self.panel.status_label.setText(text)
        workbench = getattr(self.panel, "workbench", None)
        if workbench is not None:
            workbench.say(text)

    def watch_of(self, view: QTreeWidget, item: QTreeWidgetItem | None) -> Watch | None:
        """What "when did this change?" watches for a register or global row (None for other rows)."""
        if item is None or item.parent() is None:
            return None
        if view is self.panel.registers:
            bank = "i" if view.indexOfTopLevelItem(item.parent()) == 0 else "r"
            depth = self.panel.selected_frame
            if depth is None:
                return None
            return WatchRegister(depth, bank, item.parent().indexOfChild(item))
        module = getattr(self.panel.vmfb, "name", None)
        if module is None:
            return None
        place = item.data(0, GLOBAL_PLACE_ROLE)  # a row named by the compilation
        if place is not None:
            if place[0] == "ref":
                return WatchGlobalRef(module, place[1])
            return WatchGlobal(module, place[1], place[2], place[3])
        name = item.text(0)
        if m := _RWDATA.match(name):
            return WatchGlobal(module, int(m.group(1)), 4)
        if m := _REFS.match(name):
            return WatchGlobalRef(module, int(m.group(1)))
        return None

    def contents_watch_of(
        self, view: QTreeWidget, item: QTreeWidgetItem | None
    ) -> WatchGlobalContents | WatchRegisterContents | None:
        """For a global or ref register row that holds a buffer: its bytes (a buffer written in place, or filled
        by a copy, keeps its ref, so "when did the ref change?" does not answer what wrote them)."""
        watch = self.watch_of(view, item)
        if view is self.panel.registers:
            if not isinstance(watch, WatchRegister) or watch.bank != "r" or item is None:
                return None
            return WatchRegisterContents(watch.depth, watch.index) if holds_bytes(item.text(1)) else None
        refs = getattr(getattr(view, "value", None), "refs", ())
        if not isinstance(watch, WatchGlobalRef) or not 0 <= watch.index < len(refs) or item is None:
            return None
        # A named row the session could read as bytes (an inline build's !vm.buffer storage too), else a HAL buffer.
        readable = item.data(0, Qt.ItemDataRole.UserRole) is not None or str(refs[watch.index]).startswith("!hal.buffer")
        return WatchGlobalContents(watch.module, watch.index) if readable else None

    def watch_text(self, watch: Watch, name: str = "") -> str:
        """``watch`` in the window's words: a register with its frame as the Call Stack numbers and names it
        (innermost first, #0), not its depth from the call's entry ("frame 1" was the Call Stack's #0); a
        global by its row's ``name`` (``@state``) when given."""
        stop = self.panel.workbench.state.stop
        frames = stop.location.frames if stop is not None else ()
        if isinstance(watch, WatchRegister) and 0 <= watch.depth < len(frames):
            frame = frames[watch.depth]
            return f"%{watch.bank}{watch.index} of #{len(frames) - 1 - watch.depth} {frame.module}.{frame.function}"
        if name and isinstance(watch, WatchGlobalContents) and watch.length < 0:
            return f"the contents of {name}"
        if isinstance(watch, WatchRegisterContents) and watch.element < 0:
            register = self.watch_text(WatchRegister(watch.depth, "r", watch.register))
            return f"the contents of {register}"
        return name or watch.describe()

    def when_changed(self, watch: Watch, name: str = "") -> None:
        """Ask when ``watch`` (a row called ``name``) last changed; the answer travels there (``_on_answer``)."""
        if not self.bridge.can_reverse:
            self.panel.status_label.setText("When did this change? needs a recorded run (paused or finished)")
            return
        self._asked = (watch, self.watch_text(watch, name))  # named as it was asked (the answer moves the stop)
        self.panel.status_label.setText(f"Searching the history for the last change of {self._asked[1]}…")
        self.bridge.when_changed(watch)

    def _context_menu(self, view: QTreeWidget, pos: QPoint) -> None:
        menu = self.watch_menu(view, view.itemAt(pos))
        if menu is not None:
            menu.popup(view.viewport().mapToGlobal(pos))

    def watch_menu(self, view: QTreeWidget, item: QTreeWidgetItem | None) -> QMenu | None:
        """The "When did … change?" menu of a register or global row (None for other rows)."""
        watch = self.watch_of(view, item)
        if watch is None or item is None:
            return None
        menu = QMenu(view)
        stop = self.panel.workbench.state.stop
        name = "" if view is self.panel.registers else item.text(0)
        in_dispatch = stop is not None and stop.location.dispatch_info is not None
        # The history is searched from the VM's instructions; a run parked inside a dispatch is mid-instruction.
        why = "step or continue out of the dispatch first" if in_dispatch else "run back to the last write"
        contents = self.contents_watch_of(view, item)
        for w in (watch, contents) if contents is not None else (watch,):
            what = self.watch_text(w, name)
            if w is watch and contents is not None:
                what += " (the ref it holds)" if view is self.panel.registers else " (the buffer it holds)"
            action = menu.addAction(f"When did {what} change?  ({why})")
            action.setEnabled(self.bridge.can_reverse and not in_dispatch)
            action.triggered.connect(lambda _=False, w=w: self.when_changed(w, name))
        return menu

    # -- events ---------------------------------------------------------------------------------------

    def update_enabled(self) -> None:
        can = self.bridge.can_reverse
        for action in self.actions:
            action.setEnabled(can)
        self.timeline.setEnabled(can)

    def _on_history(self, history: History | None) -> None:
        if self._retrying:
            if self.bridge.previous_dispatch():
                self._retrying = False
            else:
                self.previous_dispatch()
        inside = None
        stop = self.panel.workbench.state.stop
        info = stop.location.dispatch_info if stop is not None else None
        mark = None
        if history is not None and history.position is None and stop is not None:
            mark = next((d for d in history.dispatches if info and d.ordinal == info.ordinal), None)
            inside = mark.position if mark is not None and mark.exact else None
        self.timeline.set_history(history, inside)
        if history is None:
            self.position_label.setText("no history")
            return
        position = history.position
        # Positions count VM instructions, not dispatches: hundreds of dispatches share the instruction that
        # submits their command buffer ("@ 42 (recorded 0–42) · 962 dispatches" read as a puzzle).
        instruction = position
        if position is not None:
            where = f"instr. {position:,}"
        else:  # parked inside a dispatch: its instruction is known once located (a fast run ran it)
            name = f"dispatch #{info.ordinal}" if info is not None else "a dispatch"
            instruction = inside
            where = f"in {name}" + (f", instr. {inside:,}" if inside is not None else "")
        recorded = f"{history.earliest:,}–{history.latest:,}"
        span = "" if not history.latest else f" of {recorded}" if instruction is not None else f" (instr. {recorded} recorded)"
        count = len(history.dispatches)
        self.position_label.setText(f"{where}{span} · {count:,} dispatch{'es' if count != 1 else ''}")
        self.position_label.setToolTip(
            "Where the run is in its recorded history (instr.: VM instructions, of the span recorded); a command "
            "buffer's dispatches all run inside the one instruction that submits it"
        )

    def _on_answer(self, answer: Answer) -> None:
        if not isinstance(answer, LastChange) or isinstance(answer.query.watch, WatchBinding):
            return  # a paused dispatch's element: the dispatch list answers it, and the run stays there
        asked = self._asked
        what = asked[1] if asked is not None and asked[0] == answer.query.watch else answer.query.watch.describe()
        change = answer.change
        if change is None:
            earliest = self.bridge.history.earliest if self.bridge.history is not None else 0
            self.panel.status_label.setText(f"{what} did not change in the recorded history (since instruction {earliest:,})")
            return
        self.note = last_write_text(what, change, format_value)
        self.panel.services.messages.info(self.note)
        self.bridge.travel_to(position=int(change.position))

    def describe_stop(self, event: Stopped, text: str) -> str:
        """The status line of a stop: the stepper's description, the position, and a pending note."""
        position = event.detail.position
        if position is not None:
            text += f"  @ {position:,}"
            # The needle moves with the stop; the span and the dispatches follow with the history answer.
            self.timeline.position = int(position)
            self.timeline.preview = None
            self.timeline.update()
        if event.reason == "history-start":
            text = f"At the start of the recorded history  @ {position:,}" if position is not None else text
            if not _stops_reverse_continue(self.bridge.breakpoints):
                text += " (no breakpoints set: Reverse Continue runs back to the start, as gdb's reverse-continue)"
        if self.note:
            text = f"{text} — {self.note}"
            self.note = None
        return text


def _stops_reverse_continue(breakpoints) -> bool:
    """Whether any of these breakpoints can stop a Reverse Continue (a diverge breakpoint cannot: it judges
    a run forward against its reference)."""
    return any(str(bp.kind) != BreakpointKind.DIVERGE for bp in breakpoints)


def reverse_continue_tip(breakpoints) -> str:
    """Reverse Continue's tooltip: where it goes with the breakpoints set now (gdb's reverse-continue)."""
    if _stops_reverse_continue(breakpoints):
        return "Run backwards to the previous breakpoint hit (dispatch, NaN, instruction...), or the start of the history"
    return "Run backwards to the start of the recorded history (no breakpoints are set; as gdb's reverse-continue)"


def format_value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return str(value - (1 << 32) if 0x80000000 <= value < (1 << 32) else value)
    return str(value)
