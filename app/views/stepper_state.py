"""The stepper's state views: registers (i32 bank with i64/f32 readings, ref bank), call stack, globals.

Values come from the session's typed answers (``Stopped.detail.registers``, ``Registers``, ``Globals``); a register that
changed since the previous stop is shown in red, as debuggers do.
"""

from __future__ import annotations

import struct

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QTreeWidget, QTreeWidgetItem, QWidget

from app.views.hex_view import monospace_font
from engine.runtime.vmfb.global_names import PRIMITIVE_SIZES
from engine.session.protocol import FrameInfo, Globals, RegisterFile

CHANGED = QBrush(QColor("#c62828"))


def s32(word: int) -> int:
    word &= 0xFFFFFFFF
    return word - (1 << 32) if word & 0x80000000 else word


def s64(lo: int, hi: int) -> int:
    v = (lo & 0xFFFFFFFF) | ((hi & 0xFFFFFFFF) << 32)
    return v - (1 << 64) if v & (1 << 63) else v


def f32_of(word: int) -> float:
    return struct.unpack("<f", struct.pack("<I", word & 0xFFFFFFFF))[0]


def f64_of(lo: int, hi: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", (lo & 0xFFFFFFFF) | ((hi & 0xFFFFFFFF) << 32)))[0]


class RegistersView(QTreeWidget):
    """Two banks: ``i32`` (signed, hex, f32, and the i64/f64 of each even pair) and ``ref`` (descriptions)."""

    COLUMNS = ["Register", "i32", "hex", "f32", "i64 (pair)", "f64 (pair)"]

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("stepperRegisters")
        self.setHeaderLabels(self.COLUMNS)
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        self.setFont(monospace_font())
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._previous = RegisterFile()
        self.registers = RegisterFile()

    def set_registers(self, registers: RegisterFile | None, compare: bool = True) -> None:
        registers = registers or RegisterFile()
        before = self._previous if compare else RegisterFile()
        self.registers = registers
        self.clear()
        words = [int(w) for w in registers.i32]
        refs = [str(r) for r in registers.ref]
        old_words = before.i32
        old_refs = before.ref
        # A bank's row spans the columns and a ref's description spans the values (column 1 keeps it alone for
        # value_text): the columns are sized by the i32 words, so "i32", "hex" and "f32" stay in sight in a
        # 1366-px window's ~210-px pane (a ref's "1x3x16x16xf32..." made the i32 column 190 px wide).
        i32_bank = QTreeWidgetItem(self, [f"i32 bank ({len(words)})"])
        i32_bank.setFirstColumnSpanned(True)
        for i, w in enumerate(words):
            row = [f"%i{i}", str(s32(w)), f"0x{w & 0xFFFFFFFF:08x}", f"{f32_of(w):.7g}", "", ""]
            if i % 2 == 0 and i + 1 < len(words):
                row[4] = f"%i{i}:{i + 1} = {s64(w, words[i + 1])}"
                row[5] = f"{f64_of(w, words[i + 1]):.10g}"
            item = QTreeWidgetItem(i32_bank, row)
            item.setToolTip(
                1, f"%i{i}: i32 {s32(w)}, u32 {w & 0xFFFFFFFF}, f32 {f32_of(w)!r}, hex 0x{w & 0xFFFFFFFF:08x}"
            )
            if i < len(old_words) and int(old_words[i]) != w:
                for c in range(len(row)):
                    item.setForeground(c, CHANGED)
        ref_bank = QTreeWidgetItem(self, [f"ref bank ({len(refs)})"])
        ref_bank.setFirstColumnSpanned(True)
        for i, r in enumerate(refs):
            item = QTreeWidgetItem(ref_bank, [f"%r{i} = {r}", r])
            item.setFirstColumnSpanned(True)
            item.setToolTip(0, r)
            if i < len(old_refs) and old_refs[i] != r:
                item.setForeground(0, CHANGED)
                item.setForeground(1, CHANGED)
        self.expandAll()
        self._fit_columns(i32_bank)
        self._previous = registers

    def _fit_columns(self, bank: QTreeWidgetItem) -> None:
        """Each column as wide as its header and the i32 words' texts (never the spanned rows' texts)."""
        metrics = self.fontMetrics()
        titles = self.header().fontMetrics()
        pad = 2 * metrics.averageCharWidth()
        for c, title in enumerate(self.COLUMNS):
            texts = [bank.child(i).text(c) for i in range(bank.childCount())]
            words = max((metrics.horizontalAdvance(t) for t in texts), default=0)
            # A register's name sits two indentations in: its bank's level and the root's expand arrows.
            width = max(words + (2 * self.indentation() if c == 0 else 0), titles.horizontalAdvance(title))
            self.setColumnWidth(c, width + pad)

    def value_text(self, bank: str, index: int, column: int = 1) -> str:
        top = self.topLevelItem(0 if bank == "i32" else 1)
        return top.child(index).text(column) if top is not None and index < top.childCount() else ""


class CallStackView(QTreeWidget):
    """The frames of the stopped call, innermost first; selecting one emits its index (outermost = 0)."""

    frameSelected = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("stepperCallStack")
        self.setHeaderLabels(["#", "Function", "pc", "Instruction"])
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(True)
        self.setFont(monospace_font())
        self.frames: tuple[FrameInfo, ...] = ()
        self.itemClicked.connect(self._on_clicked)
        self.currentItemChanged.connect(lambda item, _: item is not None and self._on_clicked(item))

    def set_frames(self, frames: tuple[FrameInfo, ...], dispatch: str | None = None) -> None:
        self.blockSignals(True)
        self.clear()
        self.frames = tuple(frames)
        n = len(frames)
        for depth, frame in enumerate(reversed(frames)):
            index = n - 1 - depth
            item = QTreeWidgetItem(
                self, [str(depth), f"{frame.module}.{frame.function}", f"{frame.pc:#06x}", frame.instruction]
            )
            item.setData(0, Qt.ItemDataRole.UserRole, index)
        if dispatch:
            QTreeWidgetItem(self, ["", f"in dispatch {dispatch}", "", ""])
        if n:
            self.setCurrentItem(self.topLevelItem(0))
        for c in range(3):
            self.resizeColumnToContents(c)
        self.blockSignals(False)

    def select_frame(self, index: int) -> None:
        """Select the frame at ``index`` (0 = outermost), as a click would."""
        row = len(self.frames) - 1 - index
        item = self.topLevelItem(row)
        if item is not None:
            self.setCurrentItem(item)
            self._on_clicked(item)

    def _on_clicked(self, item: QTreeWidgetItem) -> None:
        index = item.data(0, Qt.ItemDataRole.UserRole)
        if index is not None:
            self.frameSelected.emit(int(index))


MAX_NAME_WIDTH = 170  # px: the Globals tab's name column at most
# A named global row's place: ("ref", ordinal) or ("bytes", .rwdata offset, size).
GLOBAL_PLACE_ROLE = Qt.ItemDataRole.UserRole + 1


class GlobalsView(QTreeWidget):
    """Module globals: by the names the compilation gave them when its VM phase is known (a buffer's row
    opens its bytes when activated: double-click or Enter), then the ``rwdata`` bytes (as i32 words, hex)
    and the ``refs``."""

    bufferRequested = Signal(int)  # the ordinal of a ref global holding a buffer, to inspect

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("stepperGlobals")
        self.setHeaderLabels(["Global", "Value", "hex"])
        self.setUniformRowHeights(True)
        self.setFont(monospace_font())
        self.value: Globals | None = None
        self._previous: dict[str, str] = {}  # name -> value at the last answer: what changed is drawn red
        self.itemActivated.connect(self._on_activated)

    def forget_module(self) -> None:
        """Another module: nothing of the last one's globals, nor its values to compare with. (Not named
        ``reset``: Qt's item views call that one themselves, from ``clear``.)"""
        self.clear()
        self.value = None
        self._previous = {}

    def set_globals(self, value: Globals) -> None:
        self.value = value
        self.clear()
        data = bytes(value.rwdata)
        if value.variables:
            self._add_named(value, data)
        elif value.names_note:
            note = QTreeWidgetItem(self, [value.names_note])
            note.setFirstColumnSpanned(True)
            note.setForeground(0, QBrush(QColor(110, 110, 110)))
            note.setToolTip(0, value.names_note)
        rw = QTreeWidgetItem(self, [f".rwdata ({len(data)} bytes)"])
        for off in range(0, len(data) - len(data) % 4, 4):
            (word,) = struct.unpack_from("<I", data, off)
            QTreeWidgetItem(rw, [f".rwdata[{off}]", str(s32(word)), f"0x{word:08x}"])
        refs = value.refs
        rf = QTreeWidgetItem(self, [f".refs ({len(refs)})"])
        for i, r in enumerate(refs):
            QTreeWidgetItem(rf, [f".refs[{i}]", str(r), ""])
        self.expandAll()
        if value.variables:  # named: the ordinal lists are the same globals again, folded away
            rw.setExpanded(False)
            rf.setExpanded(False)
        for c in range(3):
            self.resizeColumnToContents(c)
        # The compiler's long names (@__device_0_executable_0_...) would push the values out of a narrow
        # dock: the name column is capped and elided (its tooltip has it whole).
        self.setColumnWidth(0, min(self.columnWidth(0), MAX_NAME_WIDTH))

    def _add_named(self, value: Globals, data: bytes) -> None:
        """The named rows, red where a value differs from the last answer's (then remembered)."""
        self._add_named_rows(value, data)
        self._previous = {v.name: v.value for v in value.variables}

    def _add_named_rows(self, value: Globals, data: bytes) -> None:
        named = QTreeWidgetItem(self, [f"by name ({len(value.variables)})"])
        named.setToolTip(0, value.names_note)
        for v in value.variables:
            if v.kind == "ref":
                where, hex_text = f".refs[{v.index}]", ""
                shown = v.value
                if v.byte_length is not None:
                    kind = f", {v.tensor_type}" if v.tensor_type else ""
                    shown = f"{v.value}, {v.byte_length} bytes{kind} (double-click or Enter: inspect)"
            else:
                size = PRIMITIVE_SIZES[v.kind]
                where = f".rwdata[{v.index}] {v.kind}"
                shown = v.value
                hex_text = "0x" + data[v.index : v.index + size][::-1].hex()
            item = QTreeWidgetItem(named, [f"@{v.name}", shown, hex_text])
            item.setToolTip(0, f"@{v.name}: {where}")
            if self._previous.get(v.name, v.value) != v.value:  # changed since the last stop or call
                for c in range(3):
                    item.setForeground(c, CHANGED)
                item.setToolTip(1, f"was {self._previous[v.name]}")
            # What "When did this change?" watches: the ref, or the global's bytes.
            place = ("ref", v.index) if v.kind == "ref" else ("bytes", v.index, PRIMITIVE_SIZES[v.kind], v.kind)
            item.setData(0, GLOBAL_PLACE_ROLE, place)
            if v.kind == "ref" and v.byte_length is not None:
                item.setData(0, Qt.ItemDataRole.UserRole, v.index)

    def _on_activated(self, item: QTreeWidgetItem) -> None:
        ordinal = item.data(0, Qt.ItemDataRole.UserRole)
        if ordinal is not None:
            self.bufferRequested.emit(int(ordinal))
