"""Tensor typing, statistics, heatmaps and comparison of dispatch tensors (engine.dispatch)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support import iree_compile

from engine.compiler.targets import target_flags
from engine.dispatch.compare import compare, error_map, load_golden
from engine.dispatch.statistics import heatmap_image, histogram, plane, tensor_stats
from engine.dispatch.tensor_types import (
    TensorType,
    binding_interfaces,
    from_storage,
    to_storage,
    type_from_name,
    view_bytes,
)
from engine.samples import sample_path


def test_types_from_iree_dispatch_names():
    # A matmul MxNxK names its operands' sizes: MxK, KxN, MxN are all found by byte count.
    name = "main_dispatch_0_matmul_2x32x16_f32"
    assert str(type_from_name(name, 2 * 16 * 4)) == "2x16xf32"
    assert str(type_from_name(name, 16 * 32 * 4)) == "16x32xf32"
    assert str(type_from_name(name, 2 * 32 * 4)) == "2x32xf32"
    assert str(type_from_name("x_softmax_8x8xf32_dispatch_tensor_store", 256)) == "8x8xf32"
    assert str(type_from_name("f_dispatch_3_elementwise_4x16_f16", 128)) == "4x16xf16"
    # A count none of the sizes make is still the right element type, flat.
    assert str(type_from_name(name, 40)) == "10xf32"
    assert type_from_name("main_dispatch_0", 64) is None
    assert type_from_name(name, 6) is None  # not a whole number of f32


def test_unknown_or_misfitting_type_stays_raw_bytes():
    data = np.arange(10, dtype=np.uint8)
    array, t = view_bytes(data, None)
    assert t.element == "u8" and array.tolist() == list(range(10))
    array, t = view_bytes(data, TensorType.parse("4xf32"))  # 16 bytes do not fit in 10
    assert t.source == "raw" and array.size == 10
    array, t = view_bytes(np.zeros(3, np.float64), TensorType.parse("2xf32"))  # longer range: prefix
    assert array.shape == (2,) and array.dtype == np.float32
    with pytest.raises(ValueError):
        TensorType.parse("4xq13")


def test_half_types_and_i1_through_ml_dtypes():
    values = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    array, t = view_bytes(values.view(np.uint8), TensorType.parse("3xbf16"))
    assert array.dtype == ml_dtypes.bfloat16 and array.astype(np.float32).tolist() == [1.5, -2.25, 3.0]
    stored = to_storage(array)
    assert stored.dtype == np.uint16
    assert from_storage(stored, "bf16").astype(np.float32).tolist() == [1.5, -2.25, 3.0]
    s = tensor_stats(array)
    assert (s.min, s.max, s.element) == (-2.25, 3.0, "bf16")
    f16, _ = view_bytes(np.array([1, 2], np.float16).view(np.uint8), TensorType.parse("2xf16"))
    assert tensor_stats(f16).mean == 1.5
    flags, _ = view_bytes(np.array([1, 0, 1, 1], np.uint8), TensorType.parse("4xi1"))
    assert tensor_stats(flags).mean == 0.75


def test_interface_of_a_real_executable_source(tmp_path):
    dump = tmp_path / "sources"
    iree_compile(
        [str(sample_path("mlp")), *target_flags("llvm-cpu"),
         f"--iree-hal-dump-executable-sources-to={dump}", "-o", str(tmp_path / "m.vmfb")],
        check=True)
    found = {}
    for f in sorted(dump.glob("*.mlir")):
        found.update(binding_interfaces(f.read_text()))
    # IREE's own export names; the matmul 2x16 . 16x32 reads its two operands and writes 2x32.
    first = found["main_dispatch_0_matmul_2x32x16_f32"]
    assert [b.access for b in first.values()] == ["read", "write"]
    assert [str(t) for t in first[0].tensors] == ["2x16xf32"]
    assert [str(t) for t in first[1].tensors] == ["2x32xf32"]


def test_statistics_match_numpy_and_count_nan_inf():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 700)).astype(np.float32)
    a[3, 4] = np.nan
    a[10, 10] = np.inf
    a[11, 11] = -np.inf
    s = tensor_stats(a, chunk=4096)  # many chunks, some with non-finite values
    finite = a[np.isfinite(a)].astype(np.float64)
    assert (s.nan, s.posinf, s.neginf, s.finite) == (1, 1, 1, a.size - 3)
    assert s.min == finite.min() and s.max == finite.max()
    assert s.mean == pytest.approx(finite.mean(), rel=1e-6, abs=1e-9)
    assert s.std == pytest.approx(finite.std(), rel=1e-5)
    assert s.health == "1 NaN, 2 Inf"
    ints = np.array([[-3, 7], [2, 2]], np.int64)
    si = tensor_stats(ints)
    assert (si.min, si.max, si.mean, si.nan) == (-3, 7, 2.0, 0)
    empty = tensor_stats(np.full(4, np.nan, np.float32))
    assert empty.min is None and empty.nan == 4


def test_plane_histogram_and_heatmap():
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    assert np.array_equal(plane(a, (1, 3), (1, 2)), a[1, :, 2, :])
    assert np.array_equal(plane(a, (3, 1), (1, 2)), a[1, :, 2, :].T)
    assert plane(np.float32(3)).shape == (1, 1)
    counts, edges = histogram(a, bins=10)
    assert counts.sum() == a.size and edges[0] == 0 and edges[-1] == a.size - 1
    big = np.zeros((3000, 50), np.float32)
    big[0, 0] = np.nan
    image, step, levels = heatmap_image(big, max_size=1000)
    assert image.shape == (1000, 50, 4) and step == (3, 1)
    assert image[0, 0].tolist() == [255, 0, 255, 255]  # non-finite is magenta


def test_compare_with_tolerances_and_golden_files(tmp_path):
    expected = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    actual = expected.copy()
    actual[2, 3] += 0.01
    assert compare(actual, expected).mismatches == 1
    c = compare(actual, expected, atol=0.001)
    assert (c.ok, c.first_mismatch) == (False, (2, 3)) and c.max_abs_error == pytest.approx(0.01, rel=1e-3)
    assert compare(actual, expected, atol=0.02).ok
    assert compare(actual, expected, rtol=0.01).ok is False  # 0.01 is 3% of |b| at [2, 3]
    assert compare(actual, expected, rtol=0.05).ok
    both_nan = np.array([np.nan, 1.0])
    assert compare(both_nan, both_nan).ok
    assert not compare(np.zeros(3), np.zeros(4)).shape_matches
    err = error_map(actual, expected)
    assert err.shape == (4, 6) and err[2, 3] == pytest.approx(0.01, rel=1e-3) and err.sum() == err[2, 3]
    np.savez(tmp_path / "g.npz", first=expected, second=np.arange(3))
    names = [n for n, _ in load_golden(tmp_path / "g.npz")]
    assert names == ["first", "second"]


def test_spirv_declares_binding_element_types(tmp_path):
    from engine.dispatch.spirv_types import module_binding_elements

    vmfb = tmp_path / "mlp_vk.vmfb"
    iree_compile(
        [str(sample_path("mlp")), *target_flags("vulkan-spirv"), "-o", str(vmfb)],
        check=True)
    found = module_binding_elements(vmfb)
    assert found["main_dispatch_1_matmul_2x4x32_f32"] == {0: "f32", 1: "f32"}
    assert module_binding_elements(sample_path("mlp")) == {}  # not a module: nothing, no error
