"""The main window's centre is document tabs: open, re-activate by key, close, move; panels reach it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QTabWidget
from support.app import save_screenshot


def test_open_document_adds_a_closable_movable_tab(main_window):
    docs = main_window.documents
    assert isinstance(docs, QTabWidget) and docs.tabsClosable() and docs.isMovable()
    assert main_window.centralWidget().isAncestorOf(docs)
    before = docs.count()
    label = QLabel("listing of @main")
    shown = main_window.services.open_document(label, "@main", key="fn:main")
    assert shown is label
    assert docs.count() == before + 1 and docs.currentWidget() is label
    assert docs.tabText(docs.currentIndex()) == "@main"


def test_same_key_reactivates_the_open_document(qtbot, main_window):
    docs = main_window.documents
    first = main_window.services.open_document(QLabel("a"), "@f", key="fn:f")
    other = main_window.services.open_document(QLabel("b"), "@g", key="fn:g")
    assert docs.currentWidget() is other
    count = docs.count()
    again = main_window.services.open_document(QLabel("a twin"), "@f (again)", key="fn:f")
    assert again is first and docs.count() == count
    assert docs.currentWidget() is first and docs.tabText(docs.currentIndex()) == "@f (again)"
    # Without a key, every call opens its own tab.
    main_window.services.open_document(QLabel("x"), "x")
    main_window.services.open_document(QLabel("y"), "x")
    assert docs.count() == count + 2


def test_close_request_closes_the_tab_and_the_key_can_reopen(qtbot, main_window):
    docs = main_window.documents
    label = main_window.services.open_document(QLabel("a"), "@f", key="fn:f")
    docs.tabCloseRequested.emit(docs.indexOf(label))
    assert docs.document("fn:f") is None and docs.indexOf(label) < 0
    fresh = QLabel("new")
    assert main_window.services.open_document(fresh, "@f", key="fn:f") is fresh


def test_kept_documents_survive_closing_and_come_back(qtbot, main_window, compiled):
    docs = main_window.documents
    # The start page is a kept document: its tab closes, View > Start Page brings the same widget back.
    assert docs.currentWidget() is main_window.start_page
    docs.tabCloseRequested.emit(docs.indexOf(main_window.start_page))
    assert docs.indexOf(main_window.start_page) < 0
    main_window.show_start_page()
    assert docs.currentWidget() is main_window.start_page
    # The module inspector opens when a tree node is chosen, and again after its tab was closed.
    main_window.open_file(compiled.path("multi_function", "llvm-cpu"))
    qtbot.waitUntil(lambda: main_window.context.module is not None, timeout=10000)
    inspector = main_window.module_view.detail
    qtbot.waitUntil(lambda: docs.indexOf(inspector) >= 0, timeout=5000)
    docs.tabCloseRequested.emit(docs.indexOf(inspector))
    assert docs.indexOf(inspector) < 0
    group = main_window.module_view.expand_path("Functions")
    main_window.module_view.tree.setCurrentItem(group.child(0))
    assert docs.indexOf(inspector) >= 0 and docs.currentWidget() is inspector
    assert docs.tabText(docs.currentIndex()).startswith("@")


def test_start_page_lists_samples_and_recent_files(qtbot, main_window, compiled):
    from engine.samples import sample_names

    page = main_window.start_page
    listed = [page.samples.item(i).text() for i in range(page.samples.count())]
    assert listed == [f"{n}.mlir" for n in sample_names()] and "mlp.mlir" in listed
    vmfb = compiled.path("multi_function", "llvm-cpu")
    main_window.open_file(vmfb)
    qtbot.waitUntil(lambda: main_window.context.module is not None, timeout=10000)
    assert page.recent.item(0).text() == vmfb.name
    # Activating a sample opens it: the .mlir is compiled and its phases open as a document.
    main_window.show_start_page()
    item = page.samples.findItems("elementwise.mlir", Qt.MatchFlag.MatchExactly)[0]
    page.samples.itemActivated.emit(item)
    qtbot.waitUntil(lambda: any(t.startswith("Phases — elementwise") for t in main_window.documents.titles()), timeout=120000)
    assert main_window.context.module.source.name == "elementwise.mlir"


def _whole_tabs_only(docs) -> list[str]:
    """The tabs the bar shows in part only (cut by its edge or by Qt's scroll buttons), as 'title left..right'."""
    from PySide6.QtWidgets import QToolButton

    bar = docs.tabBar()
    right = bar.width()
    for button in bar.findChildren(QToolButton):  # Qt's scroll buttons, when they show
        if button.isVisible():
            right = min(right, button.geometry().left())
    cut = []
    for i in range(docs.count()):
        rect = bar.tabRect(i)
        if not bar.isTabVisible(i) or rect.right() < 0 or rect.left() >= right:
            continue  # not shown at all
        if rect.left() < 0 or rect.right() >= right or rect.width() < bar.minimumTabSizeHint(i).width():
            cut.append(f"{docs.title(i)} {rect.left()}..{rect.right()}")
    return cut


def test_many_documents_show_whole_readable_tabs(qtbot, main_window):
    """At 1366x768 after Step Into Workgroup… the bar held seven documents in ~600 px: QTabBar scrolled by
    pixels to show the new tab and left the first one cut at the left edge, its title gone and only its
    close button showing. The bar shows whole tabs of readable width around the current one; the others are
    reached by the corner's arrows and its list."""
    window = main_window
    window.resize(1366, 768)
    window.apply_default_sizes()
    qtbot.wait(50)
    docs = window.documents
    titles = ["Compile & Phases", "Executable Editor", "@module", "Phases — mlp.mlir",
              "#0 main_dispatch_0_matmul_2x32x16_f32", "Workgroup (0,0,0) of #0"]  # fmt: skip
    for title in titles:
        window.services.open_document(QLabel(title), title, key=title)
        qtbot.wait(10)
        assert _whole_tabs_only(docs) == [], (title, docs.width())
    current = docs.currentIndex()
    assert docs.title(current) == titles[-1] and docs.isTabVisible(current)
    hidden = [i for i in range(docs.count()) if not docs.isTabVisible(i)]
    assert hidden and docs.overflow.isVisible()  # ~600 px cannot hold 7+ tabs of 7em
    # The first document: ◂ walks back to it, the bar follows, every tab still whole.
    while docs.currentIndex() > 0:
        docs.previous_button.click()
        assert docs.isTabVisible(docs.currentIndex()) and _whole_tabs_only(docs) == []
    menu = docs.list_button.menu()
    menu.aboutToShow.emit()
    assert [a.text().replace("&&", "&") for a in menu.actions()] == docs.titles()  # "&&": a plain "&" in a menu
    assert "Compile && Phases" in [a.text() for a in menu.actions()]
    menu.actions()[-1].trigger()
    assert docs.currentIndex() == docs.count() - 1 and _whole_tabs_only(docs) == []
    save_screenshot(docs, "documents_overflow_corner")
    # Wide enough for all: every tab shows and the corner goes.
    window.resize(1920, 1080)
    window.apply_default_sizes()
    qtbot.wait(50)
    window.resizeDocks([window.docks["stepper"]], [300], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: all(docs.isTabVisible(i) for i in range(docs.count())) or docs.width() < 1000)
    assert _whole_tabs_only(docs) == []
    save_screenshot(docs, "documents_all_tabs_1920")
