#!/usr/bin/env bash
# Set up (if needed) and run the whole IREE Lens test suite: lint, the engine/Qt import contract, pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
export QT_QPA_PLATFORM=offscreen
echo "== ruff"
.venv/bin/ruff check app engine tests benchmarks
echo "== import contract (the engine never imports Qt)"
.venv/bin/lint-imports
echo "== pytest"
.venv/bin/python -m pytest "$@"
