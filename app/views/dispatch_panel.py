"""The Dispatches panel: every dispatch of the current compilation (or of the loaded module), linked
across the views.

Picking a dispatch sets ``context.set_dispatch(name)`` (IREE's name, ``main_dispatch_0``): the compile
panel moves its IR viewer to the dispatch's line. This panel shows where the dispatch appears in each
phase (a click shows that phase), its source, configuration and generated code (LLVM IR, assembly,
SPIR-V) in tabs, and its call sites in the loaded module's host code (a click moves the inspector's
disassembly there through ``context.set_function`` and ``context.set_pc``).

Everything comes from ``engine.compiler.dispatch_index``; the index is built when the compilation
changes (a text scan of a few phases), call sites when the module changes.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.dispatch_list_model import name_matches
from app.views.ir_viewer import IrViewer
from engine.compiler.dispatch_index import Dispatch, DispatchIndex, IrLocation
from engine.runtime.vmfb.call_sites import CallSite, dispatch_call_sites

_ROLE = Qt.ItemDataRole.UserRole
_ROLE_NAMES = {
    "region": "dispatch region",
    "executable": "executable",
    "export": "export",
    "dispatch": "dispatched",
    "lookup": "function lookup",
}


class DispatchPanel(QWidget):
    """List of dispatches; where the picked one appears, its code, and its call sites."""

    def __init__(self, services, parent: QWidget | None = None):
        super().__init__(parent)
        self.services = services
        self.context = services.context
        self.index: DispatchIndex | None = None
        self.sites: list[CallSite] = []  # every dispatch call of the loaded module
        self.source_lines: dict[str, str] = {}  # export -> "file.mlir:LINE op" the module records for it
        self.current: str | None = None  # name of the dispatch shown
        self.code_viewers: list[IrViewer] = []

        self.summary = QLabel("No compilation or module yet: compile a program or open a .vmfb.", self)
        self.summary.setWordWrap(True)
        self.listed = self.summary.text()  # what the summary says of the whole list (the filter adds how many it shows)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setObjectName("dispatchPanelFilter")
        self.filter_edit.setPlaceholderText("Filter by dispatch or export name (conv, *softmax*)")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self.apply_filter)
        self.dispatch_list = QTreeWidget(self)
        self.dispatch_list.setHeaderLabels(["Dispatch", "Exports", "Executable", "Calls"])
        self.dispatch_list.setRootIsDecorated(False)
        self.dispatch_list.setUniformRowHeights(True)
        self.locations = QTreeWidget(self)
        self.locations.setHeaderLabels(["Phase", "Line", "What", "Text"])
        self.locations.setRootIsDecorated(False)
        self.locations.setUniformRowHeights(True)
        self.call_sites = QListWidget(self)
        self.code_tabs = QTabWidget(self)
        self.code_tabs.setDocumentMode(True)

        # Where it appears / call sites share one tab group, so the dock stays small when docked low.
        self.detail_tabs = QTabWidget(self)
        self.detail_tabs.setDocumentMode(True)
        self.detail_tabs.addTab(self.locations, "Where it appears")
        self.detail_tabs.addTab(self.call_sites, "Call sites")
        self.locations.setToolTip("Click a line to show that phase at the dispatch in the compile panel")
        self.call_sites.setToolTip("Click a call to show it in the module's disassembly")
        for widget in (self.dispatch_list, self.locations, self.call_sites):
            widget.setMinimumHeight(40)
        left = QSplitter(Qt.Orientation.Vertical, self)
        left.addWidget(self.dispatch_list)
        left.addWidget(self.detail_tabs)
        left.setStretchFactor(0, 1)
        left.setStretchFactor(1, 2)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(self.code_tabs)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.summary)
        layout.addWidget(self.filter_edit)
        layout.addWidget(split, 1)

        self.dispatch_list.currentItemChanged.connect(self._dispatch_item_changed)
        self.locations.itemClicked.connect(self._location_clicked)
        self.locations.itemActivated.connect(self._location_clicked)
        self.call_sites.itemClicked.connect(self._call_site_clicked)
        self.call_sites.itemActivated.connect(self._call_site_clicked)
        self.context.compilationChanged.connect(self.set_compilation)
        self.context.moduleChanged.connect(self.set_module)
        self.context.dispatchChanged.connect(self._context_dispatch)
        if self.context.compilation is not None:
            self.set_compilation(self.context.compilation)
        if self.context.module is not None:
            self.set_module(self.context.module)

    # -- inputs -----------------------------------------------------------------------------------------
    def set_compilation(self, compilation) -> None:
        """Index ``compilation`` (an ``engine.compiler.Compilation``; None clears)."""
        self.index = None
        if compilation is not None:
            try:
                self.index = DispatchIndex.cached(compilation)
            except OSError as exc:  # snapshot files removed under us
                self.services.messages.error(f"dispatches: cannot read the phases: {exc}")
        self._rebuild()

    def set_module(self, loaded) -> None:
        """Find the dispatch calls of the loaded module (a ``LoadedModule``; None clears)."""
        self.sites = []
        self.source_lines = {}
        self.filter_edit.clear()  # another module's filter would hide this one's dispatches
        if loaded is not None:
            try:
                self.sites = dispatch_call_sites(loaded.module)
            except Exception as exc:  # a damaged module still opens in the inspector; say why here
                self.services.messages.error(f"dispatches: cannot read the module's host code: {exc}")
            from app.views.dispatch_list_model import source_lines_job

            try:
                self.source_lines = source_lines_job(str(loaded.path))
            except Exception:  # noqa: BLE001 - a location is a courtesy: never fail the panel for it
                self.source_lines = {}
        self._rebuild()

    # -- list -------------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return [
            self.dispatch_list.topLevelItem(i).data(0, _ROLE)
            for i in range(self.dispatch_list.topLevelItemCount())
        ]

    @property
    def compiled_index(self) -> DispatchIndex | None:
        """The compilation's dispatch index when that compilation built the open module (or no module is
        open): the compile panel keeps its last compilation when another module opens, whose dispatches
        were listed under the new module ("10 dispatches from the compilation" of attention_block beside
        small_cnn's 6 calls)."""
        module = self.context.module
        if self.index is None or not len(self.index):
            return None
        if module is not None and not module.built_by(self.context.compilation):
            return None
        return self.index

    def _rows(self) -> list[tuple[str, tuple[str, ...], str, list[CallSite]]]:
        if self.compiled_index is not None:
            rows = []
            for d in self.compiled_index:
                mine = [s for s in self.sites if s.export in d.exports]
                rows.append((d.name, d.exports, d.hal_executable or "", mine))
            return rows
        # No compilation: the module's own dispatches, one per export it looks up.
        by_export: dict[str, list[CallSite]] = {}
        for s in self.sites:
            by_export.setdefault(s.export or f"ordinal {s.ordinal}", []).append(s)
        return [(e, (e,), "", sites) for e, sites in by_export.items()]

    def _rebuild(self) -> None:
        keep = self.current or (self.context.dispatch if isinstance(self.context.dispatch, str) else None)
        self.dispatch_list.blockSignals(True)
        self.dispatch_list.clear()
        rows = self._rows()
        for name, exports, executable, sites in rows:
            item = QTreeWidgetItem(
                [name, ", ".join(exports), executable, str(len(sites)) if self.sites else ""]
            )
            item.setData(0, _ROLE, name)
            item.setToolTip(1, "\n".join(exports))
            self.dispatch_list.addTopLevelItem(item)
        for col in range(3):
            self.dispatch_list.resizeColumnToContents(col)
        self.dispatch_list.blockSignals(False)
        index = self.compiled_index
        source = "compilation" if index is not None else "module" if self.sites else None
        if source is None:
            self.summary.setText("No dispatches: compile a program or open a .vmfb that dispatches work.")
        else:
            calls = f", {len(self.sites)} dispatch calls in the loaded module" if self.sites else ""
            self.summary.setText(f"{len(rows)} dispatches from the {source}{calls}.")
        if index is not None and index.notes:
            self.summary.setText(self.summary.text() + "  " + " ".join(index.notes))
        self.listed = self.summary.text()
        self.apply_filter(self.filter_edit.text())
        self.current = None
        names = [r[0] for r in rows]
        if keep in names:
            self.select(keep, publish=False)
        else:
            self._show(None)

    def apply_filter(self, text: str) -> int:
        """Show the dispatches whose name or an export's name matches ``text`` (a part of it, or a glob, as the
        run's dispatch lists filter); the summary says how many of how many. Returns how many are shown."""
        wanted = text.strip().lower()
        count = self.dispatch_list.topLevelItemCount()
        shown = 0
        for i in range(count):
            item = self.dispatch_list.topLevelItem(i)
            names = [item.text(0).lower(), *(e.lower() for e in item.toolTip(1).split("\n") if e)]
            hidden = not any(name_matches(wanted, n) for n in names)
            item.setHidden(hidden)
            shown += not hidden
        if wanted and count:
            self.summary.setText(f"{self.listed}  Showing {shown} of {count} that match {text.strip()!r}.")
        else:
            self.summary.setText(self.listed)
        return shown

    def select(self, name: str, publish: bool = True) -> bool:
        """Pick dispatch ``name`` (IREE's name or an export name); ``publish`` sets it in the context."""
        index = self.compiled_index
        if index is not None and name not in index:
            try:
                name = index.get(name).name
            except KeyError:
                pass
        for i in range(self.dispatch_list.topLevelItemCount()):
            item = self.dispatch_list.topLevelItem(i)
            if item.data(0, _ROLE) == name:
                self.dispatch_list.blockSignals(True)
                self.dispatch_list.setCurrentItem(item)
                self.dispatch_list.blockSignals(False)
                self._show(name)
                if publish:
                    self.context.set_dispatch(name)
                return True
        return False

    def _dispatch_item_changed(self, item: QTreeWidgetItem | None, _previous=None) -> None:
        if item is not None:
            self.select(item.data(0, _ROLE))

    def _context_dispatch(self, name) -> None:
        if isinstance(name, str) and name != self.current:
            self.select(name, publish=False)

    # -- details ----------------------------------------------------------------------------------------
    def dispatch(self) -> Dispatch | None:
        index = self.compiled_index
        if self.current is None or index is None or self.current not in index:
            return None
        return index.get(self.current)

    def shown_call_sites(self) -> list[CallSite]:
        items = [self.call_sites.item(i).data(_ROLE) for i in range(self.call_sites.count())]
        return [site for site in items if site is not None]

    def _show(self, name: str | None) -> None:
        self.current = name
        self.locations.clear()
        self.call_sites.clear()
        self._clear_code()
        if name is None:
            if self.dispatch_list.topLevelItemCount():
                hint = QTreeWidgetItem(["Pick a dispatch above: where it appears in each phase, its code, its call sites"])
                hint.setFlags(Qt.ItemFlag.NoItemFlags)
                self.locations.addTopLevelItem(hint)
                hint.setFirstColumnSpanned(True)
            return
        d = self.dispatch()
        exports = set(d.exports) if d is not None else {name}
        for export in sorted(exports):
            where = self.source_lines.get(export)
            if where:  # the input program's line IREE recorded for the export (its root op)
                file_line, _, op = where.partition(" ")
                item = QTreeWidgetItem(["input program", file_line.rpartition(":")[2], "source", where])
                item.setToolTip(3, f"{export}\ncame from {file_line}" + (f": {op}" if op else ""))
                self.locations.addTopLevelItem(item)
        if d is not None:
            for loc in d.locations:
                item = QTreeWidgetItem(
                    [loc.phase, str(loc.line), _ROLE_NAMES.get(loc.role, loc.role), loc.text]
                )
                item.setData(0, _ROLE, loc)
                item.setToolTip(3, loc.text + (f"\nin @{loc.function}" if loc.function else ""))
                self.locations.addTopLevelItem(item)
            for col in range(3):
                self.locations.resizeColumnToContents(col)
            self._show_code(d)
        for site in self.sites:
            if site.export in exports or (site.export is None and name == f"ordinal {site.ordinal}"):
                item = QListWidgetItem(f"@{site.function_name} [{site.pc:08X}]  {_short(site.text)}")
                item.setData(_ROLE, site)
                item.setToolTip(site.text)
                self.call_sites.addItem(item)
        self.detail_tabs.setTabText(
            1, f"Call sites ({len(self.shown_call_sites())})" if self.sites else "Call sites"
        )
        if not self.sites:
            hint = "open this program's .vmfb to see its call sites" if self.context.module is None else ""
            if hint:
                placeholder = QListWidgetItem(hint)
                placeholder.setFlags(Qt.ItemFlag.NoItemFlags)
                self.call_sites.addItem(placeholder)

    def _clear_code(self) -> None:
        while self.code_tabs.count():
            w = self.code_tabs.widget(0)
            self.code_tabs.removeTab(0)
            w.deleteLater()
        self.code_viewers = []
        self.code_tabs.hide()  # no empty pane beside the list (a third of a 1366-px window's dock, blank)

    def _show_code(self, d: Dispatch) -> None:
        export = d.exports[0] if d.exports else d.name
        for f in d.code_files:
            viewer = IrViewer(self.code_tabs)
            try:
                text = f.text()
            except OSError as exc:
                text = f"; cannot read {f.path}: {exc}\n"
            viewer.set_text(text, f.path.name)
            viewer.setToolTip(str(f.path))
            self.code_tabs.addTab(viewer, f.label)
            self.code_viewers.append(viewer)
            line = f.symbol_line(text, export)
            if line is not None:
                viewer.go_to_line(line - 1)
        self.code_tabs.setVisible(self.code_tabs.count() > 0)

    def _location_clicked(self, item: QTreeWidgetItem) -> None:
        loc: IrLocation = item.data(0, _ROLE)
        if loc is not None:
            self.context.set_phase(loc.phase)

    def _call_site_clicked(self, item: QListWidgetItem) -> None:
        site: CallSite | None = item.data(_ROLE)
        if site is not None:
            # Function first, pc after: the inspector resets the pc when it opens a function, and moves
            # its disassembly to the context's pc once the listing is ready.
            self.context.set_function(site.function_name)
            self.context.set_pc(site.pc)


def _short(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
