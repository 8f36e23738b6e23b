"""What ``plmbench perf`` measures, registered by the code it measures (as architectures register
in ``lit_models/archs/``, metrics in ``lit_models/metrics/registry.py``): a workload is one step
(``STEPS``) of a model, built as each implementation runs it (ours, and a reference: transformers'
class with each attention implementation in ``ATTENTION``, or torch's own layers), with the same
config, weights and batch, so that ``bench/perf/`` times them side by side without naming an
architecture or a family.

- ``WORKLOADS``: step -> builder ``(arch, net config, batch size, length, device)`` of every
  registered Transformer architecture (``lit_models/families/transformer_perf.py``);
- ``BASELINE_WORKLOADS``: a model that is no Transformer, by its presets' ``arch`` -> step ->
  builder ``(model preset, batch size, length, device)``, registered beside its family
  (``lit_models/families/bilm_perf.py``, ``bilstm_perf.py``).

A builder returns None where its step does not apply to the architecture. Every registering
module is imported by ``lit_models/families/perf_workloads.py``, which is what ``bench/perf/``
reads. This module loads no torch, so ``plmbench perf --help`` lists the steps without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor, nn

    from lit_models.archs import Arch

#: transformers' attention implementations each reference is measured with
ATTENTION = ("sdpa", "eager")
STEPS = ("pretrain", "finetune", "inference")


@dataclass
class Implementation:
    net: nn.Module
    run: Callable[[], Tensor]  # the step's loss (training) or last hidden state (inference)
    counted: bool = True  # False: its FLOPs are ours (a kernel torch's counter cannot count)
    uncounted_flops: int = 0  # FLOPs of kernels torch's counter cannot count, counted by hand


@dataclass
class Workload:
    step: str  # one of STEPS
    train: bool
    batch: dict[str, Tensor]  # ours (transformers reads the same tensors)
    tokens: int  # non-pad tokens per step
    shape: str  # "32 x 128", for the report
    implementations: dict[str, Implementation] = field(default_factory=dict)
    #: why a transformers attention implementation could not be measured
    unavailable: dict[str, str] = field(default_factory=dict)


Builder = Callable[..., "Workload | None"]
#: step -> its workload builder for every Transformer architecture, (arch, config, batch size,
#: length, device) -> Workload (None: the step does not apply to the architecture)
WORKLOADS: dict[str, Builder] = {}
#: the workloads of models that are no Transformer, by preset ``arch``: step -> builder (model
#: preset, batch size, length, device) -> Workload
BASELINE_WORKLOADS: dict[str, dict[str, Builder]] = {}


def register_workload(step: str, model: str | None = None) -> Callable[[Builder], Builder]:
    """Register the decorated builder as ``step`` of every Transformer architecture, or, with
    ``model``, of the presets whose ``arch`` is ``model``; returns it unchanged."""
    if step not in STEPS:
        raise ValueError(f"perf step {step!r} is not one of {list(STEPS)}")
    steps = WORKLOADS if model is None else BASELINE_WORKLOADS.setdefault(model, {})

    def register(builder: Builder) -> Builder:
        if step in steps:
            raise ValueError(f"perf step {step!r} of {model or 'the architectures'} is "
                             "registered twice")
        steps[step] = builder
        return builder

    return register


def on_device(device: object, batch: dict[str, Tensor]) -> dict[str, Tensor]:
    """The batch's tensors on ``device``."""
    return {key: value.to(device) for key, value in batch.items()}


def special_ids(arch: Arch) -> dict[str, int]:
    """Role -> id of a scratch vocabulary of ``arch`` (its special tokens come first)."""
    return {role: i for i, (role, _) in enumerate(arch.tokenizer.tokens)}
