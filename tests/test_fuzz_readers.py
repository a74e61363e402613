"""Every file reader, fed a few hundred damaged inputs each, ends in a result or its one typed error."""

from __future__ import annotations

import pytest

from engine.fuzz_readers import READERS, fuzz, seed_corpus

CASES = {"vmfb": 300, "vke1": 400, "elf": 300, "npy": 400, "timing": 400, "diagnostics": 200, "session": 300}


@pytest.fixture(scope="module")
def corpus(compiled):
    paths = [
        compiled.path(s, t) for s, t in (("mlp", "llvm-cpu"), ("softmax", "vulkan-spirv"), ("matmul", "vmvx"))
    ]
    return seed_corpus(paths)


@pytest.mark.parametrize("name", sorted(READERS))
def test_damaged_inputs_end_in_a_result_or_a_typed_error(corpus, name):
    assert corpus[name], f"no seed inputs for {name}"
    result = fuzz(READERS[name], corpus[name], CASES[name], seed=1234)
    assert not result.failures, f"{len(result.failures)} inputs crashed the {name} reader:\n" + "\n".join(
        f"{what}\n{tb}" for what, tb in result.failures[:3]
    )
    assert result.parsed + result.rejected == result.cases
    if READERS[name].allowed:
        assert result.rejected > 0  # the mutations do reach the error paths
