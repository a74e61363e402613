#!/usr/bin/env bash
# Set up (if needed) and run the whole IREE Lens test suite: lint, the engine/Qt import contract, pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh --tests
export QT_QPA_PLATFORM=offscreen
echo "== ruff"
.venv/bin/ruff check app engine tests benchmarks
echo "== import contract (the engine never imports Qt)"
.venv/bin/lint-imports
if [[ $# -gt 0 ]]; then  # the tests named on the command line, as they are
  echo "== pytest $*"
  exec .venv/bin/python -m pytest "$@"
fi
# The engine's tests run with PySide6 and pyqtgraph made unimportable (tests/no_qt): the engine must not
# need Qt, and this proves it on every run. The application's tests run with Qt.
echo "== pytest: the application (tests/app)"
.venv/bin/python -m pytest tests/app
echo "== pytest: the engine, with PySide6 and pyqtgraph blocked"
PYTHONPATH=tests/no_qt .venv/bin/python -m pytest -p no:pytest-qt -W "ignore::pytest.PytestConfigWarning" \
  tests --ignore=tests/app
