"""Every file reader, fed a few hundred damaged inputs each under a time and memory limit, ends in a
result or its one typed error."""

from __future__ import annotations

import pytest
from lens_fuzz.bounded import Limits, run_cases
from lens_fuzz.mutate import reader_cases
from lens_fuzz.readers import READERS, seed_corpus
from support import record_replay

CASES = {
    "vmfb": 300,
    "vke1": 300,
    "elf": 300,
    "input": 300,
    "npy": 300,
    "timing": 300,
    "diagnostics": 200,
    "session": 200,
    "trace": 200,
    "bundle": 200,
    "replay": 300,
}
LIMITS = Limits(seconds=20.0, memory_bytes=1 << 30)
# Failures found in readers of other areas, reported to their owners; strict, so a fix shows up here.
KNOWN_FAILURES: dict[str, str] = {}


@pytest.fixture(scope="module")
def corpus(compiled, tmp_path_factory):
    paths = [
        compiled.path(s, t) for s, t in (("mlp", "llvm-cpu"), ("softmax", "vulkan-spirv"), ("matmul", "vmvx"))
    ]
    replay = record_replay(paths[0], "main", ["2x16xf32=0.5"], tmp_path_factory.mktemp("fuzz") / "mlp.ireereplay")
    return seed_corpus(paths, [replay])


def test_every_reader_is_fuzzed():
    assert set(CASES) == set(READERS)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[n], strict=True))
        if n in KNOWN_FAILURES
        else n
        for n in sorted(READERS)
    ],
)
def test_damaged_inputs_end_in_a_result_or_a_typed_error(corpus, name, tmp_path):
    assert corpus[name], f"no seed inputs for {name}"
    result = run_cases(
        READERS[name], reader_cases(corpus[name], CASES[name], seed=1234), limits=LIMITS, corpus_dir=tmp_path
    )
    assert not result.failures, f"{len(result.failures)} inputs failed the {name} reader:\n" + "\n".join(
        f"{f.kind} ({f.mutation}): {f.command}\n{f.detail}" for f in result.failures[:3]
    )
    assert result.parsed + result.rejected == result.cases == CASES[name]
    if READERS[name].allowed:
        assert result.rejected > 0  # the mutations do reach the error paths
