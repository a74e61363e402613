"""Shared fixtures: the offscreen Qt platform, and the sample programs compiled once per test session."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

# Qt tests run headless; set before anything imports Qt.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The test session never reads or writes the user's own settings, saved session or recent files: every
# per-user location (QSettings' INI files follow XDG_CONFIG_HOME, the saved session XDG_STATE_HOME) points
# into a temporary folder, subprocesses included. The run makes one folder (the first process to load this
# file: pytest itself, whose parallel workers inherit its environment) and each process of the run gets its
# own home inside it, so two workers never share a saved session. The user's real locations are kept in
# LENS_TEST_REAL_* so a test can prove they stay untouched.
if "LENS_TEST_RUN_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _run_dir = Path(tempfile.mkdtemp(prefix="iree-lens-tests-"))
    atexit.register(shutil.rmtree, _run_dir, True)
    os.environ["LENS_TEST_RUN_DIR"] = str(_run_dir)
    _real_home = Path(os.path.expanduser("~"))
    os.environ["LENS_TEST_REAL_CONFIG_HOME"] = os.environ.get("XDG_CONFIG_HOME") or str(_real_home / ".config")
    os.environ["LENS_TEST_REAL_STATE_HOME"] = os.environ.get("XDG_STATE_HOME") or str(_real_home / ".local" / "state")
    # The run's compile cache (tests/support/compile_cache.py), shared by the parallel workers.
    os.environ.setdefault("LENS_TEST_COMPILE_CACHE", str(_run_dir / "compile-cache"))
    # What the product keeps in the temporary folder (compiles the window opens, rebuilt sources, kernel
    # builds...) goes into the run's folder, shared by the workers and removed with it: ten test runs had left
    # gigabytes in /tmp. pytest's own tmp_path folders stay where pytest keeps them (the last runs' failures).
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    (_run_dir / "tmp").mkdir()
    os.environ["TMPDIR"] = str(_run_dir / "tmp")
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
_process = os.environ.get("PYTEST_XDIST_WORKER", "main")
if os.environ.get("LENS_TEST_ISOLATED_HOME_OF") != _process:
    _isolated = Path(os.environ["LENS_TEST_RUN_DIR"]) / f"home-{_process}"
    _isolated.mkdir(exist_ok=True)
    for _var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        os.environ[_var] = str(_isolated / _var.lower())
    os.environ["IREE_LENS_STATE_DIR"] = str(_isolated / "iree-lens-state")
    os.environ["LENS_TEST_ISOLATED_HOME"] = str(_isolated)
    os.environ["LENS_TEST_ISOLATED_HOME_OF"] = _process

import pytest  # noqa: E402
from support import iree_compile  # noqa: E402
from support.schedule import longest_first  # noqa: E402

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.samples import KNOWN_COMPILE_FAILURES, sample_names, sample_path  # noqa: E402


class CompiledSamples:
    """Compiles sample programs with the real ``iree-compile`` on first use; caches them for the session."""

    def __init__(self, root: Path):
        self.root = root
        self._cache: dict[tuple[str, str], Path] = {}

    def path(self, sample: str, target: str) -> Path:
        key = (sample, target)
        if key in KNOWN_COMPILE_FAILURES:
            pytest.skip(f"IREE 3.13 cannot compile {sample} for {target}: {KNOWN_COMPILE_FAILURES[key]}")
        if key not in self._cache:
            # A machine without iree-compile (a GPU box that only has the runtime) runs the tests on samples
            # compiled elsewhere with the same flags: LENS_TEST_PREBUILT=DIR holds DIR/SAMPLE.TARGET.vmfb.
            prebuilt = Path(os.environ.get("LENS_TEST_PREBUILT", "")) / f"{sample}.{target}.vmfb"
            if os.environ.get("LENS_TEST_PREBUILT") and prebuilt.exists():
                self._cache[key] = prebuilt
                return prebuilt
            out = self.root / f"{sample}.{target}.vmfb"
            proc = iree_compile([str(sample_path(sample)), *TARGETS[target].flags, "-o", str(out)])
            if proc.returncode != 0:
                raise RuntimeError(f"iree-compile failed for {sample} on {target}:\n{proc.stderr[-4000:]}")
            self._cache[key] = out
        return self._cache[key]

    def all(self, targets=tuple(TARGETS)) -> list[tuple[str, str]]:
        """Every (sample, target) pair that IREE 3.13 can compile."""
        return [(s, t) for s in sample_names() for t in targets if (s, t) not in KNOWN_COMPILE_FAILURES]


@pytest.fixture(scope="session")
def compiled(tmp_path_factory) -> CompiledSamples:
    return CompiledSamples(tmp_path_factory.mktemp("compiled"))


def pytest_generate_tests(metafunc):
    # Tests that take `sample_target` run once per compilable (sample, target) pair.
    if "sample_target" in metafunc.fixturenames:
        pairs = [(s, t) for s in sample_names() for t in TARGETS if (s, t) not in KNOWN_COMPILE_FAILURES]
        metafunc.parametrize("sample_target", pairs, ids=[f"{s}-{t}" for s, t in pairs])


# -- ./scripts/test.sh --quick: the edit-test loop ---------------------------------------------------------

# A test module that names one of these compiles programs other than the bundled samples (its own, the
# session and held-out programs, the shared real models) or drives IREE Lens's compiler: the full run only.
_COMPILES_BEYOND_SAMPLES = re.compile(
    r"iree_compile\(|compile_for\(|compile_program\(|broken_build\(|broken_pair\(|compile_with_dumps\("
    r"|CompileRequest|MODELS|shared.*models|heldout"
)


def pytest_addoption(parser):
    parser.addoption(
        "--quick",
        action="store_true",
        default=False,
        help="only the tests that compile nothing beyond the bundled samples and are not marked slow or "
        "vulkan (scripts/test.sh --quick, the edit-test loop)",
    )


@cache
def _compiles_beyond_samples(module: Path) -> bool:
    return bool(_COMPILES_BEYOND_SAMPLES.search(module.read_text(encoding="utf-8")))


# -- the full run: the longest tests first --------------------------------------------------------------

# The parallel workers take tests in collection order, one at a time as each finishes one: a test of
# minutes started last keeps one worker busy long after the other has run out of work. The known-slow tests
# (tests/support/schedule.py) start first, so the short ones fill in beside them and both workers end
# together.


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--quick"):
        longest_first(items)
        return
    kept, left = [], []
    for item in items:
        full_only = (
            item.get_closest_marker("slow") is not None
            or item.get_closest_marker("vulkan") is not None
            or _compiles_beyond_samples(Path(str(item.path)))
        )
        (left if full_only else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
