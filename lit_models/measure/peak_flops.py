"""Peak FLOP/s of a device: what model FLOP utilisation (MFU, Chowdhery et al. 2022, "PaLM",
Appendix B) divides the achieved model FLOP/s by.

GPUs: the dense (no structured sparsity) tensor-core peaks of NVIDIA's datasheets, for bf16 (and
fp16) and for fp32 matmuls, the latter as TF32 unless ``torch.get_float32_matmul_precision()`` is
"highest" (then the plain fp32 peak). CPUs have no datasheet figure to trust across machines:
``cpu_matmul_peak`` measures the FLOP/s of large float32 matmuls on the threads torch uses.
"""

import time
from functools import cache

import torch

#: chip -> dtype -> dense peak FLOP/s (NVIDIA datasheets: A100 (2021), H100 and H200 (2024))
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "a100": {"bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "h100 sxm": {"bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
    "h100 pcie": {"bf16": 756e12, "tf32": 378e12, "fp32": 51.2e12},
    "h100 nvl": {"bf16": 835.5e12, "tf32": 417.5e12, "fp32": 60e12},
    "h200 sxm": {"bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
    "h200 nvl": {"bf16": 835.5e12, "tf32": 417.5e12, "fp32": 60e12},
}


def chip(device_name: str) -> str | None:
    """The ``PEAK_FLOPS`` entry of a CUDA device name ("NVIDIA H100 80GB HBM3" -> "h100 sxm")."""
    name = device_name.lower()
    for family in ("h200", "h100"):
        if family in name:
            form = "nvl" if "nvl" in name else "pcie" if "pcie" in name else "sxm"
            return f"{family} {form}"
    return "a100" if "a100" in name else None


def matmul_kind(dtype: torch.dtype) -> str:
    """bf16 / fp16 -> "bf16" (same peak); float32 -> "tf32" or "fp32" as torch runs it."""
    if dtype in (torch.bfloat16, torch.float16):
        return "bf16"
    return "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def device_peak_flops(device: torch.device, dtype: torch.dtype) -> float | None:
    """Dense peak FLOP/s of a CUDA ``device`` for ``dtype`` matmuls; None where unknown (CPUs:
    ``cpu_matmul_peak``)."""
    if device.type != "cuda":
        return None
    peaks = PEAK_FLOPS.get(chip(torch.cuda.get_device_name(device)) or "")
    return None if peaks is None else peaks[matmul_kind(dtype)]


@cache
def cpu_matmul_peak(threads: int, dtype: torch.dtype = torch.float32, size: int = 1024,
                    seconds: float = 0.5) -> float:
    """Measured FLOP/s of [size x size] @ [size x size] ``dtype`` matmuls on ``threads`` threads:
    the best of repeated timings over about ``seconds``."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
        a @ b  # warm-up: allocations, thread pool
        best, spent = float("inf"), 0.0
        while spent < seconds:
            start = time.perf_counter()
            a @ b
            elapsed = time.perf_counter() - start
            best, spent = min(best, elapsed), spent + elapsed
        return 2 * size**3 / best
    finally:
        torch.set_num_threads(previous)
