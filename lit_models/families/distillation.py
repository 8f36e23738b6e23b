"""Task-level knowledge distillation (``task=compression/distill``): a student fine-tuned on a
task with a fine-tuned teacher's soft targets.

Hinton et al. 2015, "Distilling the Knowledge in a Neural Network", §2: the student matches the
teacher's class probabilities softened by a temperature T, p_i = exp(z_i / T) / Σ_j exp(z_j / T),
through their cross-entropy, whose gradients are scaled by T² so they keep their size as T
changes, mixed with the usual loss on the true labels: L = α T² KL(p_teacher || p_student) +
(1 - α) L_hard (as DistilBERT's task-specific variant, Sanh et al. 2019 §4.2, and Tang et al.
2019 distil a fine-tuned BERT). A regression task (STS-B) matches the teacher's score by squared
error; extractive QA matches the start and the end distributions over the positions. With
``task.alpha_cos`` > 0, DistilBERT's cosine embedding loss (§2: L_cos, "align the directions of
the student and teacher hidden states vectors") joins them: + α_cos (1 - cos(h_s, h_t)) of the
two encoders' last hidden states, averaged over the non-padding positions; the student then
needs the teacher's width.

The target task is the teacher's (``task.target`` resolved from ``task.teacher``'s record, or
named); its family builds the student's module (``init_from``, any architecture) and, from the
teacher's checkpoint, the teacher's, which is frozen, kept out of the student's parameters, and
follows the batches to their device. Teacher and student must read the same tokenizer (their
inputs are one batch). After training the student is measured as every compression row is
(``metrics.compression``).
"""

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import token_mask
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import Model
from lit_models.core.build import pretrained_net
from lit_models.core.family import TaskFamily, target_family, target_task
from lit_models.families.compression import measured
from lit_models.objectives.distillation import cosine_loss, distillation_loss


class LastHidden:
    """The last hidden states of ``encoder``'s latest call, kept by a forward hook."""

    def __init__(self, encoder: nn.Module) -> None:
        self.value: Tensor | None = None
        encoder.register_forward_hook(self.keep)

    def keep(self, module: nn.Module, args, output) -> None:
        self.value = output.last_hidden_state


class SoftTargets:
    """(hard loss, the student's scores, batch) -> α soft + (1 - α) hard (+ α_cos L_cos), the
    soft loss against a frozen ``teacher`` module's scores on the same batch, L_cos between the
    ``student`` encoder's last hidden states and the teacher's."""

    def __init__(self, teacher: nn.Module, temperature: float, alpha: float,
                 regression: bool, alpha_cos: float = 0.0,
                 student: nn.Module | None = None) -> None:
        self.teacher = teacher.eval().requires_grad_(False)
        self.temperature, self.alpha, self.regression = temperature, alpha, regression
        self.alpha_cos = alpha_cos
        if alpha_cos:
            self.student_hidden, self.teacher_hidden = LastHidden(student), LastHidden(
                teacher.encoder)

    def soft_loss(self, student: Tensor, teacher: Tensor) -> Tensor:
        if self.regression:
            return F.mse_loss(student.float(), teacher.float())
        return distillation_loss(student.float(), teacher.float(), self.temperature)

    def __call__(self, hard: Tensor, scores: Tensor | tuple[Tensor, ...], batch: Mapping) -> Tensor:
        device = (scores[0] if isinstance(scores, tuple) else scores).device
        if next(self.teacher.parameters()).device != device:
            self.teacher.to(device)
        with torch.no_grad():
            targets = self.teacher(batch)
        if isinstance(scores, tuple):  # QA: the start and the end positions
            soft = sum(map(self.soft_loss, scores, targets)) / len(scores)
        else:
            soft = self.soft_loss(scores, targets)
        loss = self.alpha * soft + (1 - self.alpha) * hard
        if self.alpha_cos:  # the student's hidden states of the forward that gave ``scores``
            loss = loss + self.alpha_cos * cosine_loss(
                self.student_hidden.value.float(), self.teacher_hidden.value.float(),
                token_mask(batch))
        return loss


class TaskDistillation(TaskFamily):
    """The target task's family, training the student with the teacher's soft targets."""

    kinds = ("encoder", "decoder")

    def vocabulary_corpus(self, task):
        raise PlmbenchError(f"task {task['name']}: the student reads the teacher's tokenizer; "
                            "start it from a checkpoint with the teacher's vocabulary (init_from="
                            "ckpt:<the teacher's run> with a smaller preset, or hf:<dir>)")

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        if not task.get("teacher"):
            raise PlmbenchError(f"task {task['name']} distils a fine-tuned teacher: set "
                                "task.teacher=ckpt:<run dir> (a run saved with save_model=true)")
        temperature, alpha, alpha_cos = task["temperature"], task["alpha"], task["alpha_cos"]
        if temperature <= 0 or not 0 <= alpha <= 1 or alpha_cos < 0:
            raise PlmbenchError(f"task.temperature={temperature} must be > 0, task.alpha="
                                f"{alpha} in [0, 1] and task.alpha_cos={alpha_cos} >= 0 (Hinton "
                                "et al. 2015; DistilBERT: T = 2)")
        self.target = target_task(task, train=True)
        self.inner = target_family(self.target, model.arch)
        module, dm = self.inner.build({**cfg, "task": self.target}, model, init_from)
        teacher = pretrained_net(task["teacher"], "task.teacher", with_heads=False)
        if teacher.tokenizer.backend.get_vocab() != model.tokenizer.backend.get_vocab():
            raise PlmbenchError(f"task.teacher={task['teacher']} reads another vocabulary than "
                                f"the student ({cfg['init_from']}); distil into a student with "
                                "the teacher's tokenizer")
        teacher_cfg = {**cfg, "task": {**self.target, "splits": {
            **self.target["splits"], "train": None}}, "init_from": task["teacher"],
            "save_model": False}
        teacher_module, _ = target_family(self.target, teacher.arch).build(
            teacher_cfg, teacher, InitFrom.parse(task["teacher"], "task.teacher"))
        widths = {module.encoder.config.hidden_size, teacher_module.encoder.config.hidden_size}
        if alpha_cos and len(widths) > 1:
            raise PlmbenchError(f"task.alpha_cos={alpha_cos} aligns the student's hidden states "
                                f"with the teacher's, of other widths {sorted(widths)}: pick a "
                                "student of the teacher's width, or set task.alpha_cos=0")
        module.soft_targets = SoftTargets(teacher_module, temperature, alpha,
                                          self.target.get("num_labels") == 1, alpha_cos,
                                          module.encoder)
        self.dm, self.task = dm, task
        return module, dm

    def evaluation_outputs(self, module, run_dir, cfg) -> dict[str, str]:
        module.last_metrics["compression"] = measured(module, self.dm, self.task, self.target)
        return self.inner.evaluation_outputs(module, run_dir, {**cfg, "task": self.target})

    def export(self, module, model, run_dir, cfg) -> None:
        self.inner.export(module, model, run_dir, {**cfg, "task": self.target})
