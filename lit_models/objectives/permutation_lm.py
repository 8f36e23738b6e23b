"""Permutation language modelling with partial prediction: XLNet's pretraining.

Yang et al. 2019, "XLNet", §2.2, Eq. 3: maximise E_z [sum_t log p(x_{z_t} | x_{z<t})] over
factorisation orders z sampled uniformly from the permutations of the sequence's positions; the
sequence itself keeps its order (positions are encoded as usual), only the attention mask
follows z. §2.3 partial prediction, Eq. 5: only the last tokens of z, z_{>c}, are predicted,
|z| / (|z| - c) = K (K = 6 or 7 in the paper's experiments).

Per sequence of n text tokens (plus the <sep> <cls> XLNet appends), here:

- the targets are a uniformly random set of ``num_predict(n, K)`` = max(1, floor(n / K)) text
  tokens (none for n < 2, so a target always has context); <sep> and <cls> are never targets;
- z is a uniformly random order of the other tokens followed by a uniformly random order of the
  targets, i.e. a uniform permutation conditioned on the targets being its last num_predict;
- ``perm_mask[i, j] = 0`` (i may attend to j) iff j comes strictly before i in z, else 1; pads
  are seen by no one. This is the query stream's mask; the content stream also sees its own
  token (the net adds the diagonal), as in §2.3 (Eq. 4). The released code instead lets the
  non-targets see each other bidirectionally; here z orders them too, as the paper defines it;
- ``target_mapping[m]`` is one-hot at the m-th target in z's order, ``labels[m]`` its token;
  rows past a sequence's num_predict are all zero with label -100 (ignored).

Masks are built in the collate (CPU workers), from an example's ``mask_seed`` when it has one
(eval) or afresh each time (training). The loss is the cross-entropy of the query stream's
vocabulary logits at the targets only. Segment recurrence across batches (§2.4) is not used
here: each block is predicted without a memory.
"""

from collections.abc import Mapping
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import IGNORE_INDEX, pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer
from lit_models.archs import Model
from lit_models.objectives.base import ExampleRandomness, PretrainingObjective, perplexity
from lit_models.objectives.denoising import sentence_blocks

#: XLNet's segment id of its trailing <cls>
CLS_SEGMENT = 2


def num_predict(n: int, k: float) -> int:
    """Targets of a sequence of ``n`` text tokens: max(1, floor(n / K)), 0 when n < 2."""
    return 0 if n < 2 else max(1, int(n // k))


def factorisation(length: int, candidates: list[int], count: int, rng) -> list[int]:
    """An order z of positions 0 .. length-1 whose last ``count`` are random ``candidates``."""
    targets = rng.sample(candidates, count)
    chosen = set(targets)
    context = [i for i in range(length) if i not in chosen]
    rng.shuffle(context)
    rng.shuffle(targets)
    return context + targets


def permutation_masks(order: list[int], count: int, padded_length: int, max_predict: int
                      ) -> tuple[Tensor, Tensor]:
    """(perm_mask [T, T] bool, True = may not attend; target_mapping [max_predict, T] float)
    of an order z over the first len(order) positions, its last ``count`` the targets (module
    docstring)."""
    n = len(order)
    rank = torch.full((padded_length,), padded_length)  # pads: after everything, seen by none
    rank[torch.tensor(order)] = torch.arange(n)
    perm_mask = rank[None, :] >= rank[:, None]
    perm_mask[:, n:] = True
    target_mapping = torch.zeros(max_predict, padded_length)
    if count:
        target_mapping[torch.arange(count), torch.tensor(order[n - count:])] = 1
    return perm_mask, target_mapping


class PermutationCollator(ExampleRandomness):
    """Pads blocks as "text <sep> <cls>" (segment ids 0 .. 0 2) and samples each one's
    factorisation order, permutation mask, target mapping and labels."""

    def __init__(self, tokenizer: TextTokenizer, k: float, seed: int = 0) -> None:
        super().__init__(seed)
        special = tokenizer.special
        self.sep, self.cls, self.pad = special.sep, special.cls, special.pad
        self.k = k

    def __call__(self, examples: list[dict]) -> dict[str, Tensor]:
        rows, orders = [], []
        for example in examples:
            text = [t for sentence in example["sentences"] for t in sentence]
            n = len(text)
            count = num_predict(n, self.k)
            orders.append((factorisation(n + 2, list(range(n)), count, self.rng(example)),
                           count))
            rows.append({"input_ids": [*text, self.sep, self.cls],
                         "token_type_ids": [0] * (n + 1) + [CLS_SEGMENT]})
        batch = pad_collate(rows, self.pad)
        T = batch["input_ids"].shape[1]
        most = max(1, max(count for _, count in orders))
        masks = [permutation_masks(order, count, T, most) for order, count in orders]
        batch["perm_mask"] = torch.stack([perm for perm, _ in masks])
        batch["target_mapping"] = torch.stack([mapping for _, mapping in masks])
        labels = batch["input_ids"].gather(1, batch["target_mapping"].argmax(-1))
        has_target = batch["target_mapping"].sum(-1) > 0
        batch["labels"] = labels.masked_fill(~has_target, IGNORE_INDEX)
        return batch


def permutation_lm_loss(net: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """Mean negative log-likelihood of the targets under the query stream; vocabulary logits
    only at the targets (Design contract 2)."""
    hidden = net(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                 token_type_ids=batch["token_type_ids"], perm_mask=batch["perm_mask"],
                 target_mapping=batch["target_mapping"]).last_hidden_state
    selected = batch["labels"] != IGNORE_INDEX
    logits = net.logits(hidden[selected])
    if logits.shape[0] == 0:  # no targets: a zero that keeps the graph, not NaN
        return logits.sum()
    return F.cross_entropy(logits, batch["labels"][selected])


class PermutationLM(PretrainingObjective):
    """XLNet's pretraining (``objective=plm``): permutation LM with partial prediction."""

    eval_metrics = ("plm_loss",)

    def __init__(self, name: str = "plm", partial_prediction_k: float = 6.0) -> None:
        if partial_prediction_k < 1:
            raise PlmbenchError(f"partial_prediction_k={partial_prediction_k} must be >= 1 (1: "
                                "predict every token); XLNet uses 6 or 7")
        self.name, self.k = name, partial_prediction_k

    def heads(self) -> frozenset[str]:
        return frozenset({"plm"})

    def check(self, model: Model) -> None:
        super().check(model)
        tokenizer = model.tokenizer
        if tokenizer.special.sep is None or tokenizer.special.cls is None:
            raise PlmbenchError("permutation LM inputs end with the tokenizer's sep and cls "
                                "tokens; name them in its tokenizer_config.json")

    def make_examples(self, max_length: int, tokenizer: TextTokenizer):
        return partial(sentence_blocks, max_tokens=max_length - 2)

    def collator(self, tokenizer: TextTokenizer, seed: int) -> PermutationCollator:
        return PermutationCollator(tokenizer, self.k, seed)

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {"plm_loss": permutation_lm_loss(net, batch)}

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        return {"plm_loss": (permutation_lm_loss(net, batch), predicted)}

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        return {**means, "perplexity": perplexity(means["plm_loss"])}
