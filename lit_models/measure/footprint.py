"""What a model costs to keep and to run, the axes compression is read on: its parameters, its
size on disk and its CPU latency (DistilBERT, Sanh et al. 2019, Table 3: parameters and CPU
inference time; Michel et al. 2019, §6: the speed of a pruned BERT; dynamic int8 quantization
trades size and CPU time for a little accuracy).

- parameters: every weight the model holds, a dynamically quantized Linear's packed int8 weight
  and bias counted as its float one was (quantization changes their storage, not their number);
- size on disk: the bytes of the model's state dict as ``torch.save`` writes it (the same
  serialisation for a float, a pruned and a quantized model, so sizes compare);
- CPU latency: the median over ``repeats`` passes (after ``warmup``) of the wall time of a
  forward pass over a fixed set of evaluation batches, in milliseconds per example, on the
  process's CPU threads (recorded beside it: latency depends on them).
"""

import io
import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear


def parameter_count(model: nn.Module) -> int:
    """Weights of ``model``, a dynamically quantized Linear's counted as its float ones."""
    count = sum(p.numel() for p in model.parameters())
    for module in model.modules():
        if isinstance(module, DynamicQuantizedLinear):
            weight, bias = module._packed_params._weight_bias()
            count += weight.numel() + (0 if bias is None else bias.numel())
    return count


def size_on_disk(model: nn.Module) -> int:
    """Bytes of ``torch.save(model.state_dict())``."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes


def cpu_latency(forward: Callable[[Mapping], object], batches: Sequence[Mapping],
                repeats: int = 5, warmup: int = 1) -> float:
    """Median milliseconds per example of ``forward`` over every batch of ``batches`` (CPU
    tensors), gradients off."""
    examples = sum(len(next(iter(batch.values()))) for batch in batches)
    times = []
    with torch.inference_mode():
        for i in range(warmup + repeats):
            start = time.perf_counter()
            for batch in batches:
                forward(batch)
            if i >= warmup:
                times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times) / examples


def footprint(model: nn.Module, forward: Callable[[Mapping], object],
              batches: Sequence[Mapping], repeats: int = 5, warmup: int = 1) -> dict[str, float]:
    """parameters and size_mb (10^6 bytes) of ``model`` (the weights a task needs: encoder and
    head), latency_ms (per example) of ``forward(batch)`` on the CPU, and the CPU threads;
    ``model`` is moved to the CPU."""
    model.cpu()
    return {
        "parameters": float(parameter_count(model)),
        "size_mb": size_on_disk(model) / 1e6,
        "latency_ms": cpu_latency(forward, batches, repeats, warmup),
        "threads": float(torch.get_num_threads()),
    }
