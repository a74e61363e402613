"""The suite's own rules (tests/README.md), read from its source: shared helpers live in tests/support/, so
no test module imports another; no assertion is made true whatever it checks (``assert x or True``)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MODULES = sorted(p for p in TESTS.rglob("test_*.py") if "support" not in p.parts)


def _imported_modules(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_the_walk_finds_the_test_modules():
    assert len(MODULES) > 100 and TESTS / "test_suite_rules.py" in MODULES


def test_no_test_module_imports_another():
    found = {
        str(p.relative_to(TESTS)): bad
        for p in MODULES
        if (bad := [m for m in _imported_modules(ast.parse(p.read_text())) if m.split(".")[-1].startswith("test_")
                    or m.startswith("tests.")])
    }  # fmt: skip
    assert not found, f"import shared helpers from tests/support/ instead: {found}"


def _always_true(node: ast.AST) -> bool:
    return isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and any(
        isinstance(v, ast.Constant) and bool(v.value) for v in node.values
    )


def test_no_assertion_holds_whatever_it_checks():
    found = [
        f"{p.relative_to(TESTS)}:{node.lineno}"
        for p in MODULES
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Assert) and _always_true(node.test)
    ]
    assert not found, found


def test_the_rule_checks_see_what_they_forbid():
    # The checks above would pass on an empty walk; here each one is shown a module that breaks its rule.
    bad = ast.parse("from test_other import helper\nimport tests.support\nassert x < 0 or True\n")
    assert _imported_modules(bad) == ["test_other", "tests.support"]
    assert [n for n in ast.walk(bad) if isinstance(n, ast.Assert) and _always_true(n.test)]


def test_each_known_slow_test_names_a_test_and_is_started_first():
    from types import SimpleNamespace

    from support.schedule import KNOWN_SLOW_SECONDS, longest_first

    root = TESTS.parent
    for nodeid in KNOWN_SLOW_SECONDS:
        path, _, name = nodeid.partition("::")
        function, _, params = name.partition("[")
        text = (root / path).read_text()
        assert f"def {function}(" in text, nodeid
        assert all(f'"{p}"' in text for p in params.rstrip("]").split("-") if p), nodeid
    slowest = max(KNOWN_SLOW_SECONDS, key=KNOWN_SLOW_SECONDS.get)
    items = [SimpleNamespace(nodeid=n) for n in ("tests/test_a.py::x", "tests/test_a.py::y", slowest)]
    longest_first(items)
    assert [i.nodeid for i in items] == [slowest, "tests/test_a.py::x", "tests/test_a.py::y"]


def test_engine_tests_run_with_automatic_garbage_collection():
    """The window's tests collect cycles on the GUI thread only (tests/app/conftest.py, as the app does),
    module by module: an engine test after them runs with Python's own collector, not with none (no event
    loop fires the GUI's timer here)."""
    import gc

    assert gc.isenabled()
