#!/usr/bin/env bash
# Set up (if needed) and run IREE Lens's tests: lint, the engine/Qt import contract, then pytest, once.
#   ./scripts/test.sh                  the whole suite (what CI runs), in parallel workers
#   ./scripts/test.sh --quick          the edit-test loop: no compile beyond the bundled samples (<= 3 min)
#   ./scripts/test.sh tests/test_x.py  just those tests, as named (any pytest arguments), in this process
# LENS_TEST_WORKERS=N sets the number of parallel workers (default: 2 where the machine has 2 cores or more;
# 0 runs everything in one process). tests/README.md says how the suite is organised.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh --tests
export QT_QPA_PLATFORM=offscreen
echo "== ruff"
.venv/bin/ruff check app engine tests benchmarks
echo "== import contract (the engine never imports Qt)"
.venv/bin/lint-imports
quick=()
if [[ "${1:-}" == "--quick" ]]; then
  quick=(--quick)
  shift
fi
if [[ $# -gt 0 ]]; then  # the tests named on the command line, as they are
  echo "== pytest ${quick[*]} $*"
  exec .venv/bin/python -m pytest "${quick[@]}" "$@"
fi
# One collection of every test, the application's (Qt) and the engine's. That the engine needs no Qt is
# proved by lint-imports above and by tests/test_engine_without_qt.py, which imports every engine module
# and runs the command line with PySide6 and pyqtgraph made unimportable (tests/no_qt).
# Parallel workers (pytest-xdist): most tests wait on a child process (iree-compile, a session, the
# command line, lavapipe), so two workers keep two cores busy; --dist loadgroup keeps the tests of one
# xdist_group on one worker.
cores=$(nproc 2>/dev/null || echo 1)
workers="${LENS_TEST_WORKERS:-$((cores >= 2 ? 2 : 0))}"
parallel=()
if ((workers > 0)); then
  parallel=(-n "$workers" --dist loadgroup)
fi
echo "== pytest ${quick[*]} ${parallel[*]} tests"
exec .venv/bin/python -m pytest "${quick[@]}" "${parallel[@]}" tests
