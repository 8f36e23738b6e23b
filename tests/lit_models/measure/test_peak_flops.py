"""The peak MFU divides by, on paths only a GPU takes, checked here by name: a CUDA device name
finds its datasheet entry (NVIDIA's A100 (2021), H100 and H200 (2024) datasheets: dense bf16,
TF32 and fp32 tensor-core peaks), and a run's Lightning precision picks the matmul dtype whose
peak applies (fp16 runs at the bf16 peak, float32 at TF32's unless matmuls are "highest")."""

import pytest
import torch

from lit_models.measure.peak_flops import PEAK_FLOPS, chip, matmul_kind
from lit_models.measure.throughput import matmul_dtype


@pytest.mark.parametrize("name, entry", [
    ("NVIDIA H100 80GB HBM3", "h100 sxm"),
    ("NVIDIA H100 PCIe", "h100 pcie"),
    ("NVIDIA H100 NVL", "h100 nvl"),
    ("NVIDIA H200", "h200 sxm"),
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("Tesla V100-SXM2-16GB", None),  # no entry: no MFU rather than a wrong one
])
def test_a_cuda_device_name_finds_its_datasheet_entry(name, entry):
    assert chip(name) == entry


@pytest.mark.parametrize("precision, dtype, kind", [
    ("bf16-mixed", torch.bfloat16, "bf16"), ("bf16-true", torch.bfloat16, "bf16"),
    ("16-mixed", torch.float16, "bf16"), ("16-true", torch.float16, "bf16"),
])
def test_a_half_precision_divides_by_the_tensor_core_peak(precision, dtype, kind):
    assert matmul_dtype(precision) is dtype
    assert matmul_kind(dtype) == kind
    assert PEAK_FLOPS["h100 sxm"][kind] == 989.4e12


@pytest.mark.parametrize("matmuls, kind, peak", [("highest", "fp32", 66.9e12),
                                                  ("high", "tf32", 494.7e12)])
def test_float32_divides_by_the_peak_of_what_torch_runs(matmuls, kind, peak):
    """torch's default ("highest") runs float32 matmuls in fp32; "high" lets them use TF32."""
    assert matmul_dtype("32-true") is torch.float32
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmuls)
    try:
        assert matmul_kind(torch.float32) == kind
    finally:
        torch.set_float32_matmul_precision(previous)
    assert PEAK_FLOPS["h100 sxm"][kind] == peak
