"""The full run's order: which tests start first (tests/conftest.py sorts the collection by this)."""

from __future__ import annotations

# The tests that took longest in the last full run (seconds, on the 2-core machine, from the durations it
# prints at its end). The parallel workers take tests in collection order, one at a time as each finishes
# one: started last, one of these keeps a worker busy for minutes after the other has run out of work;
# started first, the short tests fill in beside it and both workers end together. Only tests whose fixtures
# are per-test are listed (moving a test away from its module's other tests would build a module-scoped
# fixture twice). A listed test that is renamed or gone only loses its place (tests/test_suite_rules.py
# checks that each entry still names a test function).
KNOWN_SLOW_SECONDS = {
    "tests/test_split.py::test_split_pytorch_models_every_test_agrees_on_vmvx[efficientvit_m0]": 99,
    # Writes EfficientViT's iree-lens sources (support.model_lens_sources), whose module the time-by-source
    # test below reads as its plain build.
    "tests/test_executable_sources.py::"
    "test_pytorch_model_every_executable_substituted_and_an_edit_matches_iree[efficientvit_m0]": 65,
    # Builds support.model_cpu_build's EfficientViT, which the LLVM IR and break-diverge tests below then read.
    "tests/test_typed_tensors.py::"
    "test_capture_with_iree_dumped_sources_equals_iree_traced_tensors[efficientvit_m0-main]": 71,
    "tests/test_by_source.py::test_pytorch_export_is_90_percent_on_torch_aten_lines[efficientvit_m0]": 18,
    "tests/test_split.py::test_split_pytorch_models_every_test_agrees_on_vmvx[squeezenet1_1]": 38,
    # Writes SqueezeNet's iree-lens sources, which the folded-weight and time-by-source tests read (listed
    # later, or not at all, so that they do not start together, one worker waiting for the other's compile).
    "tests/test_executable_sources.py::"
    "test_pytorch_model_every_executable_substituted_and_an_edit_matches_iree[squeezenet1_1]": 26,
    "tests/test_dispatch_diverge_break.py::test_break_diverge_efficientvit_across_cpu_builds_does_not_stop": 29,
    "tests/test_dispatch_diverge_numerics.py::test_squeezenet_llvm_cpu_against_vulkan_has_no_divergence": 27,
    "tests/test_typed_tensors.py::"
    "test_capture_with_iree_dumped_sources_equals_iree_traced_tensors[squeezenet1_1-main]": 23,
    "tests/test_executable_sources.py::"
    "test_squeezenet_folded_weight_sources_and_an_edit_that_changes_the_workgroup_count": 18,
    "tests/test_llvm_ir_real_models.py::test_pytorch_models_llvm_ir_parses_and_verifies[efficientvit_m0]": 20,
    "tests/test_split.py::test_split_attention_block_reproduces_on_llvm_cpu_and_vmvx": 10,
    "tests/test_llvm_ir_real_models.py::test_pytorch_models_llvm_ir_parses_and_verifies[squeezenet1_1]": 5,
    "tests/test_native_batches.py::test_squeezenet_batched_and_stepped_are_bit_identical_and_match_iree": 5,
}


def longest_first(items: list) -> None:
    """The known-slow tests (``items``: pytest's collected items, or anything with a ``nodeid``) moved to the
    front, longest first; every other test keeps its collection order (a stable sort), so each module's
    tests stay together."""
    items.sort(key=lambda item: -KNOWN_SLOW_SECONDS.get(item.nodeid, 0))
