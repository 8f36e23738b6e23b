"""``plmbench perf model=elmo-*``'s workloads (registered in
``lit_models/measure/perf_registry.py``):
ELMo's biLM (Peters et al. 2018; ``lit_models/families/bilm.py``) against the same biLM whose
LSTMs are ``torch.nn.LSTM`` (cuDNN on GPU) with the same weights and no clipping ("torch
nn.LSTM"; transformers has no ELMo). ``pretrain``: the forward and backward LM loss over a batch
of spelled sentences, softmax over the preset's vocabulary; ``inference``: its layers. Its FLOPs
are ours (torch's counter has no formula for the fused LSTM).
"""

import copy
import random
import string
from collections.abc import Callable

import torch
from torch import Tensor

from datamodules.bilm import collate_sentences
from datamodules.words import BOS, EOS
from lit_models.families.bilm import elmo_config
from lit_models.measure.perf_registry import Implementation, Workload, on_device, register_workload
from lit_models.nets.elmo import ElmoLanguageModel
from lit_models.nets.lstm import TorchLSTM


def spelled_batch(batch: int, length: int, vocab_size: int) -> dict[str, Tensor]:
    """Sentences of random words (3 to 10 letters) between <S> and </S>, of ``length`` words down
    to a quarter of it, batched as ``datamodules/bilm.py`` batches them: ``input_ids`` (softmax
    targets), ``char_ids`` [B, T, 50], ``attention_mask``."""
    rng = random.Random(4)
    examples = []
    for row in range(batch):
        size = length if row == 0 else rng.randint(max(3, length // 4), length)
        words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10)))
                 for _ in range(size - 2)]
        examples.append({"input_ids": [rng.randrange(4, vocab_size) for _ in range(size)],
                         "words": " ".join([BOS, *words, EOS])})
    return collate_sentences(examples, pad_id=0)


def _elmo_pair(model_cfg, batch_size: int, length: int, device: torch.device):
    """Our biLM of the preset's sizes, a spelled batch, and the biLM with torch.nn.LSTMs."""
    ours = ElmoLanguageModel(elmo_config(model_cfg, model_cfg["vocab_size"], 0)).to(device)
    reference = copy.deepcopy(ours)
    for layers in (reference.encoder.forward_layers, reference.encoder.backward_layers):
        for index, layer in enumerate(layers):
            layers[index] = TorchLSTM(layer)
    batch = on_device(device, spelled_batch(batch_size, length, model_cfg["vocab_size"]))
    return ours, reference, batch


@register_workload("pretrain", model="elmo")
def elmo_pretrain(model_cfg, batch_size: int, length: int, device: torch.device) -> Workload:
    ours, reference, batch = _elmo_pair(model_cfg, batch_size, length, device)
    mask = batch["attention_mask"].bool()
    workload = Workload("pretrain", True, batch, int(mask.sum()), f"{batch_size} x {length}")

    def loss(net: ElmoLanguageModel) -> Callable[[], Tensor]:
        def run() -> Tensor:
            out = net.losses(batch["char_ids"], batch["input_ids"], mask)
            return (out["forward_nll"] + out["backward_nll"]) / (2 * out["predictions"])
        return run

    workload.implementations["plmbench"] = Implementation(ours, loss(ours))
    workload.implementations["torch nn.LSTM"] = Implementation(reference, loss(reference),
                                                               counted=False)
    return workload


@register_workload("inference", model="elmo")
def elmo_inference(model_cfg, batch_size: int, length: int, device: torch.device) -> Workload:
    ours, reference, batch = _elmo_pair(model_cfg, batch_size, length, device)
    mask = batch["attention_mask"].bool()
    workload = Workload("inference", False, batch, int(mask.sum()), f"{batch_size} x {length}")
    for name, net in (("plmbench", ours), ("torch nn.LSTM", reference)):
        workload.implementations[name] = Implementation(
            net, lambda net=net: net.encoder(batch["char_ids"], mask).layers,
            counted=name == "plmbench")
    return workload
