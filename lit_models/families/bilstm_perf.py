"""``plmbench perf model=bilstm-*``'s workloads (registered in
``lit_models/measure/perf_registry.py``): the GLUE baselines' BiLSTM (Wang et al. 2019, §5;
``lit_models/nets/bilstm.py``) timed on its training step (``finetune``: a pair classifier, as on
MRPC / STS-B / RTE, over learned word embeddings of the preset's width, attention as the preset
says) and its forward (``inference``), against its FLOP bound.

Its LSTMs are ``torch.nn.LSTM`` over packed sequences (oneDNN / cuDNN kernels), for which torch's
FLOP counter has no formula: their FLOPs are counted here by hand, over the real words only (a
packed sequence skips the padding), and added to what the counter counts (embeddings, attention,
classifier). Per word, layer and direction an LSTM's gates cost 2 x 4H x (I + H) FLOPs forward
(the input and recurrent matmuls; elementwise work is not counted, as for the Transformers), and
its backward twice that. ELMo inputs (frozen, their states computed once per sentence:
``lit_models/core/feature_cache.py``) cost nothing per step after the first epoch and are left out.
"""

import random
from collections.abc import Callable

import torch
from torch import Tensor, nn

from datamodules.errors import PlmbenchError
from lit_models.families.bilstm import BiLSTMModel, bilstm_config
from lit_models.families.bilstm_inputs import WordVectorsInput
from lit_models.measure.perf_registry import Implementation, Workload, register_workload
from lit_models.nets.bilstm import BiLSTMClassifier


def lstm_flops(words: int, input_dim: int, hidden: int, layers: int, train: bool) -> int:
    """Matmul FLOPs of a bidirectional ``layers``-layer LSTM over ``words`` real words."""
    per_word = 0
    for layer in range(layers):
        inputs = input_dim if layer == 0 else 2 * hidden
        per_word += 2 * (2 * 4 * hidden * (inputs + hidden))  # two directions
    return words * per_word * (3 if train else 1)


def pair_batch(batch: int, length: int, vocab: int) -> dict[str, Tensor]:
    """Pairs of sentences of ``length`` words down to a quarter of it (one row full length), as
    ``datamodules/word_inputs.py`` batches them: ``vocab_ids``, ``word_mask`` and their ``_b``."""
    rng = random.Random(4)
    out = {}
    for suffix in ("", "_b"):
        lengths = [length] + [rng.randint(max(1, length // 4), length) for _ in range(batch - 1)]
        mask = torch.arange(length)[None] < torch.tensor(lengths)[:, None]
        ids = torch.randint(4, vocab, (batch, length), generator=torch.Generator().manual_seed(
            len(suffix)))
        out[f"vocab_ids{suffix}"], out[f"word_mask{suffix}"] = ids * mask, mask
    out["labels"] = torch.randint(0, 2, (batch,), generator=torch.Generator().manual_seed(2))
    return out


def _model(model_cfg, batch_size: int, length: int, device: torch.device):
    if model_cfg.get("max_words") and length > model_cfg["max_words"]:
        raise PlmbenchError(f"--seq-len {length}: {model_cfg['name']} reads at most "
                            f"{model_cfg['max_words']} words a sentence; pass --seq-len "
                            f"{model_cfg['max_words']} or less")
    inputs = model_cfg["inputs"]
    vocab, width = inputs["max_vocab"], inputs["embedding_dim"]
    config = bilstm_config(model_cfg, width, num_labels=2, pairs=True)
    table = torch.randn(vocab, width, generator=torch.Generator().manual_seed(0))
    net = BiLSTMModel(nn.ModuleList([WordVectorsInput(table, trainable=True)]),
                      BiLSTMClassifier(config)).to(device)
    batch = {k: v.to(device) for k, v in pair_batch(batch_size, length, vocab).items()}
    words = int(batch["word_mask"].sum() + batch["word_mask_b"].sum())
    return net, batch, words


def _flops(net: BiLSTMModel, batch: dict[str, Tensor], train: bool) -> int:
    """The LSTMs' FLOPs (the sentence encoder's over both sentences; the attention variant's
    modelling LSTM over both again)."""
    c = net.config
    words = int(batch["word_mask"].sum() + batch["word_mask_b"].sum())
    flops = lstm_flops(words, c.input_dim, c.hidden_size, c.num_layers, train)
    if c.attention:
        flops += lstm_flops(words, 4 * c.hidden_size, c.hidden_size, 1, train)
    return flops


def bilstm_step(step: str) -> Callable[..., Workload]:
    train = step == "finetune"

    def build(model_cfg, batch_size: int, length: int, device: torch.device) -> Workload:
        net, batch, words = _model(model_cfg, batch_size, length, device)
        workload = Workload(step, train, batch, words, f"{batch_size} pairs x {length}")

        def run() -> Tensor:
            scores = net(batch)
            return nn.functional.cross_entropy(scores, batch["labels"]) if train else scores

        workload.implementations["plmbench"] = Implementation(
            net, run, uncounted_flops=_flops(net, batch, train))
        return workload
    return build


for _step in ("finetune", "inference"):
    register_workload(_step, model="bilstm")(bilstm_step(_step))
