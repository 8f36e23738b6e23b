"""Multiple choice over any registered encoder (Devlin et al. 2019, §4.4: SWAG; Liu et al. 2019
and Lan et al. 2020: RACE; Wang et al. 2019: COPA in SuperGLUE).

Every (context, choice) pair is encoded as one sequence (``datamodules/multiple_choice.py``); the
architecture's multiple-choice head maps each sequence to one score, as transformers'
``*ForMultipleChoice`` do (BERT: a vector V over the pooled [CLS] state, "the only task-specific
parameters", §4.4; RoBERTa and Longformer the same over their pooler; ELECTRA's and XLNet's
sequence summary; DistilBERT's pre-classifier), and the scores of an example's C choices are
normalised with a softmax and trained with cross-entropy on the right choice. Accuracy is that of
the highest-scoring choice. ``save_model=true`` exports the model as the architecture's
``*ForMultipleChoice`` (refused where transformers has none, DeBERTa v1), and ``init_from`` of
such a checkpoint keeps its head. A head that reads the pooled state gets a fresh pooler where the
encoder was saved without one, as transformers initialises it.
"""

from collections.abc import Mapping

import torch
from torch import nn

from datamodules.errors import PlmbenchError
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.multiple_choice import MultipleChoiceDataModule
from lit_models.archs import Model
from lit_models.families.classify import Classification, LitClassifier
from lit_models.interop.hf import has_task_head, load_head, task_class, task_head_names, to_hf
from lit_models.nets.heads import PooledClassifier

TASK = "multiple_choice"


class LitMultipleChoice(LitClassifier):
    """The classifier's encoder call and evaluation over one score per choice: the B x C
    sequences of a batch score [B, C], the classes of the softmax are the choices
    (``num_labels`` is the number of choices)."""

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return super().forward(batch).view(-1, self.num_labels)


def multiple_choice_head(model: Model, dropout: float) -> nn.Module:
    """The architecture's multiple-choice head (one score per sequence) over ``model.net``, which
    gets a pooler if the head reads one and the net was saved without it."""
    arch, net, _ = model
    build = arch.multiple_choice_head or arch.classification_head
    head = build(net.config, 1, dropout)
    if isinstance(head, PooledClassifier):
        net.add_pooler()
    return head


class MultipleChoice(Classification):
    """SWAG, RACE, COPA: a question (or a situation) and its choices, one right."""

    kinds = ("encoder",)
    datamodule = MultipleChoiceDataModule

    def check_export(self, cfg, model: Model) -> None:
        layout = model.arch.hf
        if cfg["save_model"] and task_class(layout, TASK) is None:
            raise PlmbenchError(f"transformers has no multiple-choice model of "
                                f"{layout.model_type}, so save_model=true cannot export one; "
                                "run without it")

    def head(self, cfg, model: Model, init_from: InitFrom) -> nn.Module:
        """The multiple-choice head; a fine-tuned multiple-choice checkpoint's (``init_from``)."""
        head = multiple_choice_head(model, cfg["task"]["classifier_dropout"])
        if not init_from.scratch:
            directory = init_from.directory()
            if has_task_head(directory, TASK):
                load_head(head, directory, task_head_names(model.arch.hf, TASK))
        return head

    def module(self, cfg, model: Model, head, dm) -> LitMultipleChoice:
        task = cfg["task"]
        return LitMultipleChoice(model.net, model.arch.capabilities, head, task["num_labels"],
                                 task["metrics"], dm.eval_split_names, cfg["optim"])

    def export(self, module, model: Model, run_dir, cfg) -> None:
        """``save_model=true``: the architecture's ``*ForMultipleChoice``."""
        if cfg["save_model"]:
            to_hf(model, run_dir / EXPORT_DIR, module.head, task=TASK)
