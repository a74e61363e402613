"""The module inspector: a lazily filled tree of everything in a ``.vmfb`` and a detail pane.

The tree's children are created when a node is first expanded (and long lists are split into
ranges), so a module with thousands of functions or segments opens at once. Selecting a node shows
its details: a function's disassembly (computed on the engine worker), a rodata segment's hex dump
(only visible rows are rendered) and decoded view, an executable's details.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.context import LoadedModule
from app.panels import PanelServices
from app.views.disassembly_view import DisassemblyView, ListingLine
from app.views.hex_view import HexView, monospace_font
from app.views.module_tree import DetailKind, TreeNode, function_listing, module_nodes
from app.workers import WorkError

NODE_ROLE = Qt.ItemDataRole.UserRole + 1
DISASSEMBLY_TAG = "module-view-disassembly"
DECODE_TAG = "module-view-decode"


def _text_view(parent: QWidget) -> QPlainTextEdit:
    view = QPlainTextEdit(parent)
    view.setReadOnly(True)
    view.setAcceptDrops(False)
    view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
    view.setFont(monospace_font())
    return view


INSPECTOR_KEY = "module-inspector"


class ModuleView(QWidget):
    """The module tree with its detail tabs beside it; with ``details_as_document`` the detail tabs are a
    document of the main window instead (the tree then lives in a narrow dock), brought forward and
    titled after the node whenever a node is chosen."""

    def __init__(self, services: PanelServices, parent: QWidget | None = None, details_as_document: bool = False):
        super().__init__(parent)
        self.services = services
        self.context = services.context
        self.loaded: LoadedModule | None = None
        self.details_as_document = details_as_document

        self.welcome = QLabel(
            "<h2>IREE Lens</h2><p>Drop a <b>.vmfb</b> module (or an <b>.mlir</b> source) here,<br>"
            "or use <b>File &gt; Open</b>.</p>",
            self,
        )
        self.welcome.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.welcome.setStyleSheet("color:#555;")

        # Left: filter + tree.
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter functions, imports, exports...")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("moduleTree")
        self.tree.setHeaderLabels(["Name", "Value"])
        self.tree.setUniformRowHeights(True)
        self.tree.setAcceptDrops(False)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.tree.header().resizeSection(0, 260)
        self.tree.itemExpanded.connect(self._populate)
        self.tree.currentItemChanged.connect(self._on_current_item)
        left = QWidget(self)
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.setSpacing(2)
        left_layout.addWidget(self.filter)
        left_layout.addWidget(self.tree, 1)

        # Right: tabs of detail views, chosen per node.
        self.detail = QTabWidget(self)
        self.detail.setDocumentMode(True)
        self.info = _text_view(self)
        self.disassembly = DisassemblyView(self)
        self.hex = HexView(self)
        self.decoded = _text_view(self)
        self.disassembly.pcSelected.connect(self._on_pc_selected)
        # Hidden until a node puts them in the detail tabs: with no module open they were drawn as four
        # 100x30 boxes over the module dock's corner (children of this view, not yet in any layout).
        for view in (self.info, self.disassembly, self.hex, self.decoded):
            view.hide()

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(left)
        if details_as_document:
            self.detail.setParent(None)
            self.detail.setObjectName("moduleInspector")
            self.detail.setProperty("lensKeepAlive", True)  # closing its tab hides it; a click reopens it
            self.welcome.setText("<p>No module open.</p><p>Drop a <b>.vmfb</b> or <b>.mlir</b> file here.</p>")
            self.welcome.setWordWrap(True)
            self.tree.header().resizeSection(0, 150)  # a narrow dock: the value column must show too
        else:
            self.splitter.addWidget(self.detail)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([420, 900])

        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.splitter)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)

        self._shown: TreeNode | None = None
        self.context.moduleChanged.connect(self.set_module)
        self.context.functionChanged.connect(self._on_context_function)
        self.context.pcChanged.connect(self._on_context_pc)
        if self.context.module is not None:
            self.set_module(self.context.module)

    # -- module --------------------------------------------------------------------------------

    def set_module(self, loaded: LoadedModule | None) -> None:
        self.loaded = loaded
        self.tree.clear()
        self._shown = None
        self._show_tabs([])
        if loaded is None:
            self.stack.setCurrentWidget(self.welcome)
            return
        for node in module_nodes(loaded.module, loaded.path):
            self.tree.addTopLevelItem(self._make_item(node))
        self.stack.setCurrentWidget(self.splitter)
        # Open the groups people look at first; everything below stays unbuilt until expanded.
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if self.node(item).expanded_by_default:
                item.setExpanded(True)
        first = self.tree.topLevelItem(0)
        if first is not None:
            self.tree.setCurrentItem(first)
        if self.details_as_document:  # an opened module shows its inspector at once
            name = getattr(loaded.module, "name", None) or loaded.path.stem
            self.services.open_document(self.detail, f"@{name}", INSPECTOR_KEY)

    # -- tree ----------------------------------------------------------------------------------

    def _make_item(self, node: TreeNode) -> QTreeWidgetItem:
        item = QTreeWidgetItem([node.label, node.value])
        item.setData(0, NODE_ROLE, node)
        if node.tooltip:
            item.setToolTip(0, node.tooltip)
            item.setToolTip(1, node.tooltip)
        if node.children is not None:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
        return item

    @staticmethod
    def node(item: QTreeWidgetItem) -> TreeNode:
        return item.data(0, NODE_ROLE)

    def _populate(self, item: QTreeWidgetItem) -> None:
        node = self.node(item)
        if node.children is None or item.data(0, NODE_ROLE + 1):
            return
        item.setData(0, NODE_ROLE + 1, True)
        try:
            children = node.children()
        except Exception as exc:  # noqa: BLE001 - a damaged part shows as an error node, the rest stays usable
            self.services.messages.error(f"Cannot read {node.label}: {exc}")
            children = [TreeNode(f"error: {exc}", "")]
        item.addChildren([self._make_item(c) for c in children])
        if not children:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.DontShowIndicatorWhenChildless)
        self._apply_filter(self.filter.text(), item)

    def expand_path(self, *labels: str) -> QTreeWidgetItem | None:
        """Expand the nodes whose labels start with ``labels`` in turn; returns the last one found."""
        parent: QTreeWidgetItem | None = None
        for label in labels:
            count = self.tree.topLevelItemCount() if parent is None else parent.childCount()
            found = None
            for i in range(count):
                item = self.tree.topLevelItem(i) if parent is None else parent.child(i)
                if item.text(0).startswith(label):
                    found = item
                    break
            if found is None:
                return None
            found.setExpanded(True)
            parent = found
        return parent

    def find_items(self, kind: DetailKind) -> list[QTreeWidgetItem]:
        """Items already created whose node is of ``kind`` (expand their group first)."""
        out: list[QTreeWidgetItem] = []

        def walk(item: QTreeWidgetItem) -> None:
            if self.node(item).kind == kind:
                out.append(item)
            for i in range(item.childCount()):
                walk(item.child(i))

        for i in range(self.tree.topLevelItemCount()):
            walk(self.tree.topLevelItem(i))
        return out

    def _apply_filter(self, text: str, root: QTreeWidgetItem | None = None) -> None:
        # Filters the leaves already built under the groups; groups themselves stay visible.
        text = text.strip().lower()
        items = (
            [root]
            if root is not None
            else [self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount())]
        )
        for top in items:
            for i in range(top.childCount()):
                child = top.child(i)
                if child.childCount() and self.node(child).kind == DetailKind.RANGE:
                    self._apply_filter(text, child)
                    continue
                child.setHidden(
                    bool(text) and text not in child.text(0).lower() and text not in child.text(1).lower()
                )

    # -- details -------------------------------------------------------------------------------

    def _show_tabs(self, tabs: list[tuple[QWidget, str]]) -> None:
        current = [self.detail.widget(i) for i in range(self.detail.count())]
        if current == [w for w, _ in tabs]:
            for i, (_, title) in enumerate(tabs):
                self.detail.setTabText(i, title)
            return
        while self.detail.count():
            self.detail.removeTab(0)
        for widget, title in tabs:
            self.detail.addTab(widget, title)

    def _on_current_item(
        self, item: QTreeWidgetItem | None, _previous: QTreeWidgetItem | None = None
    ) -> None:
        if item is None:
            return
        self.show_node(self.node(item))

    def show_node(self, node: TreeNode) -> None:
        self._shown = node
        details = ""
        try:
            details = node.details() if node.details else ""
        except Exception as exc:  # noqa: BLE001
            details = f"error: {exc}"
        self.info.setPlainText(details or f"{node.label}\n{node.value}")
        if node.kind == DetailKind.FUNCTION:
            self._show_tabs([(self.disassembly, "Disassembly"), (self.info, "Details")])
            self._request_listing(node)
            self.context.set_function(node.function_name)
        elif node.kind in (DetailKind.RODATA, DetailKind.EXECUTABLE):
            tabs = []
            if node.decode is not None:
                tabs.append((self.decoded, node.decode_title))
                self.decoded.setPlainText("decoding...")
                self.services.worker.submit(
                    node.decode,
                    tag=DECODE_TAG,
                    on_result=self._show_decoded,
                    on_error=self._show_decode_error,
                )
            tabs.append((self.info, "Details"))
            if node.data is not None:
                tabs.append((self.hex, "Hex"))
                try:
                    data, base = node.data()
                    self.hex.set_data(data, base)
                except Exception as exc:  # noqa: BLE001
                    self.hex.set_data(b"")
                    self.info.appendPlainText(f"\nerror reading the bytes: {exc}")
            self._show_tabs(tabs)
        else:
            self._show_tabs([(self.info, "Details")])
        if self.details_as_document and node.kind not in (DetailKind.GROUP, DetailKind.RANGE):
            title = f"@{node.function_name}" if node.kind == DetailKind.FUNCTION else node.label
            self.services.open_document(self.detail, title, INSPECTOR_KEY)

    def _request_listing(self, node: TreeNode) -> None:
        self.disassembly.set_listing(f"@{node.function_name}", [ListingLine("disassembling...")])
        module = self.loaded.module if self.loaded else None
        self.services.worker.submit(
            function_listing,
            module,
            node.payload,
            self.loaded.global_names if self.loaded else None,
            tag=DISASSEMBLY_TAG,
            on_result=lambda lines, n=node: self._show_listing(n, lines),
            on_error=self._show_listing_error,
        )

    def _show_listing(self, node: TreeNode, lines: list[ListingLine]) -> None:
        if self._shown is not node:
            return  # the user moved on
        self.disassembly.set_listing(f"@{node.function_name}", lines)
        if self.context.pc is not None:
            self.disassembly.go_to_pc(self.context.pc)

    def _show_listing_error(self, err: WorkError) -> None:
        self.disassembly.set_listing("error", [ListingLine(f"// cannot disassemble: {err.message}")])
        self.services.messages.error(f"Cannot disassemble: {err.message}", err.details)

    def _show_decoded(self, text: str) -> None:
        self.decoded.setPlainText(text)

    def _show_decode_error(self, err: WorkError) -> None:
        self.decoded.setPlainText(f"cannot decode: {err.message}")

    # -- the shared position -------------------------------------------------------------------

    def _on_pc_selected(self, pc: int | None) -> None:
        if pc is not None and self._shown is not None and self._shown.kind == DetailKind.FUNCTION:
            self.context.set_pc(pc)

    def _on_context_function(self, name: str | None) -> None:
        if name is None or (self._shown is not None and self._shown.function_name == name):
            return
        group = self.expand_path("Functions")
        if group is None:
            return
        for item in self.find_items(DetailKind.FUNCTION):
            if self.node(item).function_name == name and item.parent() is not None:
                self.tree.setCurrentItem(item)
                return

    def _on_context_pc(self, pc: int | None) -> None:
        if pc is not None and self.disassembly.isVisible():
            self.disassembly.go_to_pc(pc)
