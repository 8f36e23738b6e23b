"""Span-pair classification over any registered encoder: SuperGLUE's WiC and WSC as its BERT
baseline trains them (Wang et al. 2019, §5): the encoder reads the text (WiC's sentence pair, WSC's
sentence), the two marked spans are pooled by self-attention over their tokens and a linear layer
scores the labels (``lit_models/nets/heads.py``'s ``SpanPairClassifier``; WiC adds the pooled
state, "we also concatenate the representation of the marked word"), trained with cross-entropy.
transformers has no such model, so ``save_model=true`` is refused.
"""

from collections.abc import Mapping

import torch

from datamodules.init_from import InitFrom
from datamodules.spans import SpanPairDataModule
from lit_models.archs import Model
from lit_models.core.family import NotExported
from lit_models.families.classify import Classification, LitClassifier
from lit_models.nets.heads import SpanPairClassifier


class LitSpanClassifier(LitClassifier):
    """The classifier with a head that reads the batch's ``spans`` too."""

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.encode(batch), batch["spans"])


class SpanClassification(NotExported, Classification):
    """WiC (the word's sense in two sentences), WSC (does the pronoun refer to the noun phrase)."""

    kinds = ("encoder",)
    datamodule = SpanPairDataModule
    model_name = "span-pair classifier"

    def head(self, cfg, model: Model, init_from: InitFrom) -> SpanPairClassifier:
        task = cfg["task"]
        return SpanPairClassifier(model.net.config, task["num_labels"],
                                  task["classifier_dropout"], task["with_pooled"])

    def module(self, cfg, model: Model, head, dm) -> LitSpanClassifier:
        task = cfg["task"]
        return LitSpanClassifier(model.net, model.arch.capabilities, head, task["num_labels"],
                                 task["metrics"], dm.eval_split_names, cfg["optim"])
