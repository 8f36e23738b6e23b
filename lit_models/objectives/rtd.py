"""Replaced token detection: ELECTRA's generator + discriminator objective.

Clark et al. 2020, "ELECTRA", §2 (Eq. 1 and the combined loss): a set of positions m is selected
(15%) and masked; the generator G, a masked language model, predicts the original tokens there
(L_MLM); each selected token is replaced by a sample x^_i ~ p_G(x_i | x^masked), with no gradient
through the sampling; the discriminator D labels every token of the corrupted input x^corrupt
original or replaced, and a sampled token equal to the original counts as original (L_Disc, a
binary cross-entropy over all tokens). The loss is L_MLM + lambda L_Disc, lambda = 50 (§2,
Table 6). The selected positions are masked 85% of the time and otherwise left as they are
(the released ``pretrain_helpers.mask``: no random tokens, the generator sees originals instead).

The net is ``ElectraForPreTraining`` (``lit_models/nets/electra.py``) or DeBERTa-v3's
``DebertaV3ForPreTraining`` (``lit_models/nets/deberta_rtd.py``: He et al. 2023, §2, the same
loss, the token embeddings shared gradient-disentangled, §3.3): ``net.generator`` with its
``mlm_head``, and the discriminator ``net`` with its ``rtd_head``. Selection and padding are
MLM's (``MLMCollator``); vocabulary logits are computed at the selected positions only.
"""

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import (
    IGNORE_INDEX,
    at_positions,
    encoder_inputs,
    label_positions,
    token_mask,
)
from datamodules.errors import PlmbenchError
from lit_models.archs import Model
from lit_models.objectives.base import perplexity
from lit_models.objectives.flops import EncoderShape, encoder_forward_flops, mlm_head_forward_flops
from lit_models.objectives.mlm import MaskedLM


def replace_tokens(input_ids: Tensor, labels: Tensor, logits: Tensor,
                   generator: torch.Generator | None = None, positions: Tensor | None = None
                   ) -> tuple[Tensor, Tensor]:
    """The discriminator's input and labels from the generator's ``logits`` [N, V] at the N
    selected positions (``labels`` != IGNORE_INDEX, which hold the original tokens; their flat
    indices ``positions``, the collate's ``label_positions``, or found here).

    Returns (x^corrupt: the original tokens with each selected one replaced by a sample of
    softmax(logits), is_replaced: bool [B, T], True only where the sample differs from the
    original). Sampling is outside the graph: no gradient reaches the generator through it.
    """
    if positions is None:
        positions = label_positions({"labels": labels})
    originals = torch.where(labels != IGNORE_INDEX, labels, input_ids)
    with torch.no_grad():  # a draw from softmax(logits): argmax of log p - log E, E ~ Exp(1)
        # (the exponential race, equivalent to Gumbel-max), as torch.multinomial would draw it
        # but without its host-device synchronisation
        race = torch.empty(logits.shape, device=logits.device).exponential_(generator=generator)
        samples = (logits.detach().float() - race.log()).argmax(-1)
    corrupted = originals.flatten().index_copy(0, positions, samples).view_as(originals)
    return corrupted, corrupted != originals


def token_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` [B, T] over the real tokens (``mask``, bool [B, T])."""
    weights = mask.to(values.dtype)
    return (values * weights).sum() / weights.sum()


class ReplacedTokenDetection(MaskedLM):
    """ELECTRA's pretraining objective: L = L_MLM(G) + ``rtd_weight`` L_Disc(D) (§2).

    Training reports ``mlm_loss`` (the generator's) and ``rtd_loss`` (lambda L_Disc, the term
    minimised). Eval: the generator's MLM loss per selected token (and its perplexity), the
    discriminator's BCE per token ``disc_loss``, its accuracy ``disc_accuracy`` and the share of
    tokens that were actually replaced, ``replaced_rate``.
    """

    eval_metrics = ("mlm_loss", "disc_loss", "disc_accuracy", "replaced_rate")

    def __init__(self, name: str = "rtd", rtd_weight: float = 50.0, **masking) -> None:
        super().__init__(name, nsp=False, **masking)
        if rtd_weight < 0:
            raise PlmbenchError(f"rtd_weight={rtd_weight} must be >= 0; ELECTRA uses 50")
        self.rtd_weight = rtd_weight
        self.generator_shape: EncoderShape | None = None

    def heads(self) -> frozenset[str]:
        return frozenset({"rtd"})

    def check(self, model: Model) -> None:
        super().check(model)
        self.generator_shape = EncoderShape.of(model.net.generator.config)

    def _forward(self, net: nn.Module, batch: Mapping[str, Tensor],
                 sampler: torch.Generator | None = None) -> dict[str, Tensor]:
        inputs = encoder_inputs(batch)
        labels, positions = batch["labels"], label_positions(batch)
        hidden = net.generator(**inputs).last_hidden_state
        logits = net.generator.mlm_head(at_positions(hidden, positions))
        mlm_loss = (F.cross_entropy(logits, at_positions(labels, positions)) if logits.shape[0]
                    else logits.sum())  # nothing selected: a zero that keeps the graph
        corrupted, replaced = replace_tokens(inputs["input_ids"], labels, logits, sampler,
                                             positions)
        disc_logits = net.rtd_head(net(**{**inputs, "input_ids": corrupted}).last_hidden_state)
        real = token_mask(batch)
        disc_loss = token_mean(F.binary_cross_entropy_with_logits(
            disc_logits, replaced.to(disc_logits.dtype), reduction="none"), real)
        return {"mlm_loss": mlm_loss, "disc_loss": disc_loss,
                "disc_accuracy": token_mean(((disc_logits > 0) == replaced).float(), real),
                "replaced_rate": token_mean(replaced.float(), real)}

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        out = self._forward(net, batch)
        return {"mlm_loss": out["mlm_loss"], "rtd_loss": self.rtd_weight * out["disc_loss"]}

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        device = batch["input_ids"].device
        sampler = torch.Generator(device).manual_seed(0)  # the same replacements every eval
        out = self._forward(net, batch, sampler)
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        tokens = token_mask(batch).sum()
        return {"mlm_loss": (out["mlm_loss"], predicted),
                **{name: (out[name], tokens)
                   for name in ("disc_loss", "disc_accuracy", "replaced_rate")}}

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        return {**means, "perplexity": perplexity(means["mlm_loss"])}

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> float | None:
        """Generator forward + its MLM head at the selected positions, discriminator forward +
        its head (H x H dense, H x 1 prediction) at every position; backward doubles it."""
        if self.generator_shape is None:
            return None
        batch_size, seq_len = batch["input_ids"].shape
        predicted = len(label_positions(batch))
        generator = (encoder_forward_flops(self.generator_shape, batch_size, seq_len)
                     + mlm_head_forward_flops(self.generator_shape, predicted))
        discriminator = (encoder_forward_flops(shape, batch_size, seq_len)
                         + batch_size * seq_len * 2 * (shape.hidden * shape.hidden + shape.hidden))
        return 3 * (generator + discriminator)
