"""Knowledge distillation of a masked language model: DistilBERT's triple loss.

Sanh et al. 2019, "DistilBERT, a distilled version of BERT", §2-3: the student is trained on
the teacher's soft target probabilities with the distillation loss L_ce = sum_i t_i log(s_i),
t and s the teacher's and student's distributions softened by a temperature T, p_i =
exp(z_i / T) / sum_j exp(z_j / T) (Hinton et al. 2015); "the final training objective is a
linear combination of the distillation loss L_ce with the supervised training loss, in our case
the masked language modeling loss L_mlm", plus a cosine embedding loss L_cos that aligns the
directions of the student's and teacher's hidden states. As in the authors' distiller
(transformers' research_projects/distillation): L_ce is the KL divergence at the masked positions,
scaled by T^2 so its gradients keep their size as T changes (Hinton et al. 2015, §2), averaged
over those positions; L_cos is 1 - cos(h_s, h_t) of the last hidden states, averaged over the
non-padding tokens; the inputs are MLM's, dynamically masked, without NSP (§3).

The teacher (the YAML's ``teacher.checkpoint``: ``ckpt:<run dir>`` or ``hf:<dir>``; by default
the run's own ``init_from``) is loaded by the run and passed in as (net with heads, tokenizer),
frozen and kept in eval mode; it is no part of the trained module (its parameters are neither
counted nor optimised) and follows the batches to their device.
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
from datamodules.tokenization import TextTokenizer
from lit_models.objectives.flops import EncoderShape, encoder_forward_flops, mlm_head_forward_flops
from lit_models.objectives.mlm import MaskedLM, masked_lm_loss


def distillation_loss(student_logits: Tensor, teacher_logits: Tensor, temperature: float
                      ) -> Tensor:
    """T^2 KL(softmax(z_t / T) || softmax(z_s / T)), averaged over the rows (positions)."""
    if student_logits.shape[0] == 0:
        return student_logits.sum()
    log_s = F.log_softmax(student_logits / temperature, dim=-1)
    log_t = F.log_softmax(teacher_logits / temperature, dim=-1)
    return F.kl_div(log_s, log_t, reduction="batchmean", log_target=True) * temperature**2


def cosine_loss(student_hidden: Tensor, teacher_hidden: Tensor, attention_mask: Tensor
                ) -> Tensor:
    """Mean of 1 - cos(h_s, h_t) over the non-padding positions (``attention_mask``, [B, T])."""
    weights = attention_mask.to(student_hidden.dtype)
    distance = 1 - F.cosine_similarity(student_hidden, teacher_hidden, dim=-1)
    return (distance * weights).sum() / weights.sum()


class Distillation(MaskedLM):
    """L = alpha_ce L_ce + alpha_mlm L_mlm + alpha_cos L_cos (Sanh et al. 2019, §2); each
    logged term already carries its weight. Eval: the student's MLM loss (and perplexity)."""

    eval_metrics = ("mlm_loss", "distillation_loss", "cosine_loss")

    def __init__(self, teacher: tuple[nn.Module, TextTokenizer], name: str = "distillation",
                 temperature: float = 2.0, alpha_ce: float = 5.0, alpha_mlm: float = 2.0,
                 alpha_cos: float = 1.0, **masking) -> None:
        super().__init__(name=name, **masking)
        if temperature <= 0:
            raise PlmbenchError(f"temperature={temperature} must be > 0; DistilBERT uses 2")
        self.temperature = temperature
        self.alphas = {"distillation_loss": alpha_ce, "mlm_loss": alpha_mlm,
                       "cosine_loss": alpha_cos}
        self.teacher, self.teacher_tokenizer = teacher
        self.teacher.eval().requires_grad_(False)

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        """The teacher must read the student's vocabulary and have its width and an MLM head."""
        super().check(net, tokenizer)
        if self.teacher_tokenizer.backend.get_vocab() != tokenizer.backend.get_vocab():
            raise PlmbenchError(
                "the teacher (objective.teacher) and the student have different vocabularies; "
                "start the student from the teacher (init_from=<the teacher>)"
            )
        if self.teacher.config.hidden_size != net.config.hidden_size or not hasattr(
                self.teacher, "mlm_head"):
            raise PlmbenchError(
                "the teacher (objective.teacher) needs a masked-LM head and the student's hidden "
                f"size {net.config.hidden_size} (it has {self.teacher.config.hidden_size}) for "
                "the cosine loss; pick a student preset of the teacher's width"
            )

    def _teacher(self, device: torch.device) -> nn.Module:
        if next(self.teacher.parameters()).device != device:
            self.teacher.to(device)
        return self.teacher.eval()

    def _terms(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        inputs = encoder_inputs(batch)
        labels, masked = batch["labels"], label_positions(batch)
        student = net(**inputs).last_hidden_state
        with torch.no_grad():
            teacher_net = self._teacher(student.device)
            teacher = teacher_net(**inputs).last_hidden_state
            teacher_logits = teacher_net.mlm_head(at_positions(teacher, masked))
        student_logits = net.mlm_head(at_positions(student, masked))
        return {
            "distillation_loss": distillation_loss(student_logits, teacher_logits.to(
                student_logits.dtype), self.temperature),
            "mlm_loss": masked_lm_loss(student, labels, net.mlm_head, masked),
            "cosine_loss": cosine_loss(student, teacher.to(student.dtype), token_mask(batch)),
        }

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {name: self.alphas[name] * value for name, value in self._terms(net, batch).items()}

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        terms = self._terms(net, batch)
        return {
            "mlm_loss": (terms["mlm_loss"], predicted),
            "distillation_loss": (terms["distillation_loss"], predicted),
            "cosine_loss": (terms["cosine_loss"], token_mask(batch).sum()),
        }

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> float:
        """The student's training step plus the teacher's forward pass."""
        batch_size, seq_len = batch["input_ids"].shape
        predicted = len(label_positions(batch))
        teacher = EncoderShape.of(self.teacher.config)
        return super().flops(shape, batch) + encoder_forward_flops(
            teacher, batch_size, seq_len) + mlm_head_forward_flops(teacher, predicted)
