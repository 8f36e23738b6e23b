"""How ``plmbench perf`` measures a step: the median wall time of repeated calls after warm-up
(several implementations interleaved, one call of each in turn, so a shared or throttling machine
slows all of them alike; CUDA synchronised around each call), and the bytes autograd saves for the
backward (activation memory)."""

import statistics
import time
from collections.abc import Callable

import torch


def saved_activation_bytes(step: Callable[[], torch.Tensor]) -> int:
    """Bytes of the tensors autograd saves for backward in one forward (activation memory)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Callable[[], None], device: torch.device, warmup: int, repeats: int) -> float:
    """Median seconds of one call of ``step`` after ``warmup`` calls."""
    return time_interleaved({"step": step}, device, warmup, repeats)["step"]


def time_interleaved(steps: dict[str, Callable[[], None]], device: torch.device, warmup: int,
                     repeats: int) -> dict[str, float]:
    """Median seconds of one call of each step, the steps called in turn, ``warmup`` rounds
    first."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(warmup + repeats):
        for name, step in steps.items():
            synchronize(device)
            start = time.perf_counter()
            step()
            synchronize(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def step_memory(step: Callable[[], None], device: torch.device) -> float | None:
    """MiB the CUDA allocator's peak rose above what it held before one step."""
    if device.type != "cuda":
        return None
    synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20
