"""The GLUE paper's baselines as task families (Wang et al. 2019, §5): BiLSTM sentence encoders
(``lit_models/nets/bilstm.py``) over word features (``bilstm_inputs.py``: static vectors, ELMo, a
frozen encoder's layers), trained from scratch on each task, for the ``bilstm`` kind of model
presets (``conf/model/bilstm-*.yaml``).

- ``BiLSTMClassification``: GLUE-style classification and regression (the ``glue`` board's
  tasks): single sentences classified from their max-pooled states, pairs from
  [u; v; |u - v|; u * v], with the "+Attn" variant's attention between the sentences; the
  metrics, the data-only baseline and the GLUE prediction files are ``Classification``'s.
- ``BiLSTMTagging``: BIO tagging (NER) with a tag per word, scored as ``Tagging`` scores it.

A BiLSTM trains on the task's own data: there is no checkpoint to start from (``init_from``
must be ``scratch``) and none is exported (``save_model`` is refused up front). The record's
pretraining cost is that of the runs its inputs were pretrained by (``pretrained_from``: the
word-vectors and ELMo runs, the encoder).
"""

import logging
from collections.abc import Mapping

import torch
from torch import nn

from datamodules import tagging
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.word_inputs import (
    WordClassificationDataModule,
    WordInputs,
    WordTaggingDataModule,
    sentence_words,
)
from lit_models.archs import Capabilities, Model
from lit_models.core.family import NotExported, TaskFamily
from lit_models.core.module import PlmModule
from lit_models.families.bilstm_inputs import build_inputs
from lit_models.families.classify import Classification, LitClassifier
from lit_models.families.tagging import LitTagger
from lit_models.metrics import build_metrics
from lit_models.nets.bilstm import BiLSTMClassifier, BiLSTMConfig, BiLSTMTagger

log = logging.getLogger("plmbench")
#: BiLSTMConfig's fields a preset sets (input_dim, pairs and num_labels come from the inputs and
#: the task)
PRESET_FIELDS = ("hidden_size", "num_layers", "num_highway", "dropout", "attention",
                 "classifier_hidden", "classifier_dropout")


class BiLSTMModel(nn.Module):
    """Input layers, their features concatenated per word, then a BiLSTM task model."""

    def __init__(self, inputs: nn.ModuleList, head: BiLSTMClassifier | BiLSTMTagger) -> None:
        super().__init__()
        self.inputs = inputs
        self.head = head
        self.config = head.config

    def features(self, batch: Mapping[str, torch.Tensor], suffix: str) -> torch.Tensor:
        return torch.cat([layer(batch, suffix) for layer in self.inputs], dim=-1)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Scores of each sentence, pair (``_b`` keys) or word (a tagger)."""
        pair = {} if "word_mask_b" not in batch else {
            "features_b": self.features(batch, "_b"), "mask_b": batch["word_mask_b"]}
        return self.head(self.features(batch, ""), batch["word_mask"], **pair)


def bilstm_config(model: Mapping, input_dim: int, num_labels: int, pairs: bool) -> BiLSTMConfig:
    try:
        return BiLSTMConfig(input_dim=input_dim, num_labels=num_labels, pairs=pairs,
                            **{k: model[k] for k in PRESET_FIELDS if k in model})
    except TypeError as err:
        raise PlmbenchError(f"model={model['name']}: {err}") from None


class LitBiLSTMClassifier(LitClassifier):
    """``LitClassifier``'s loss, metrics and predictions over a ``BiLSTMModel``'s scores (its
    classifier is the BiLSTM's own: no head on top)."""

    def __init__(self, model: BiLSTMModel, num_labels: int, metrics, eval_splits,
                 optim: Mapping, class_weights=None) -> None:
        # no token types (a pair's sentences are read apart, ``word_mask_b``), no global attention
        super().__init__(model, Capabilities(), nn.Identity(), num_labels, metrics, eval_splits,
                         optim, class_weights)

    def encode(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder(batch)


class LitBiLSTMTagger(LitTagger):
    """``LitTagger``'s loss, entity scores and prediction files over a ``BiLSTMModel``'s tag
    scores, one per word (each batch's ``word_ids`` number the words)."""

    def __init__(self, model: BiLSTMModel, label_names, eval_splits, optim: Mapping,
                 metrics=()) -> None:
        PlmModule.__init__(self, optim, model.config.num_layers)
        self.encoder = model
        self.label_names = list(label_names)
        self.eval_splits = list(eval_splits)
        self.metrics = build_metrics(metrics, "tags")
        self.collected = [[] for _ in eval_splits]

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder(batch)


class BiLSTMFamily(NotExported, TaskFamily):
    """What the BiLSTM families share: the input layers from the preset's ``inputs`` and the
    task's training words, a run from scratch, the inputs' checkpoints as its pretraining."""

    kinds = ("bilstm",)
    model_name = "BiLSTM baseline"
    sources: list[str] = []  # the checkpoints of the inputs (``bilstm`` sets them)

    def bilstm(self, cfg: Mapping, training_words: list[list[str]], head: type[nn.Module],
               num_labels: int, pairs: bool) -> tuple[BiLSTMModel, WordInputs]:
        model = cfg["model"]
        if cfg["init_from"] != "scratch":
            raise PlmbenchError(f"model={model['name']}: a BiLSTM trains from scratch on the "
                                "task (its pretrained inputs are model.inputs.*); set "
                                "init_from=scratch")
        self.check_export(cfg, None)
        inputs, words, self.sources, note = build_inputs(model["inputs"], training_words,
                                                         model["max_words"], cfg["seed"])
        log.info("%s inputs: %s", model["name"], note)
        width = sum(layer.output_dim for layer in inputs)
        return BiLSTMModel(inputs, head(bilstm_config(model, width, num_labels, pairs))), words

    def pretrained_from(self, cfg: Mapping) -> list[str]:
        return self.sources


class BiLSTMClassification(BiLSTMFamily, Classification):
    def build_net(self, cfg: Mapping, arch, init_from: InitFrom) -> Model:
        task = cfg["task"]
        if not task["splits"].get("train"):
            raise PlmbenchError(f"task {task['name']} has no training split: the BiLSTM "
                                "baselines train on a task's own data; pick a task with one")
        _, fields = sentence_words(task, task["splits"]["train"],
                                   task.get("max_train_samples"))
        return Model(arch, *self.bilstm(cfg, [w for field in fields for w in field],
                                        BiLSTMClassifier, task["num_labels"],
                                        pairs=len(task["text_fields"]) == 2))

    def build(self, cfg, model: Model, init_from: InitFrom):
        task, (_, net, words) = cfg["task"], model
        dm = WordClassificationDataModule(task, words, seed=cfg["seed"])
        module = LitBiLSTMClassifier(net, task["num_labels"], task["metrics"],
                                     dm.eval_split_names, cfg["optim"], self.class_weights(task))
        return module, dm


class BiLSTMTagging(BiLSTMFamily):
    def build_net(self, cfg: Mapping, arch, init_from: InitFrom) -> Model:
        task = cfg["task"]
        train = tagging.load_sentences(task, task["splits"]["train"],
                                       task.get("max_train_samples"))
        return Model(arch, *self.bilstm(cfg, train[task["tokens_field"]], BiLSTMTagger,
                                        len(task["label_names"]), pairs=False))

    def build(self, cfg, model: Model, init_from: InitFrom):
        task, (_, net, words) = cfg["task"], model
        dm = WordTaggingDataModule(task, words, seed=cfg["seed"])
        return LitBiLSTMTagger(net, task["label_names"], dm.eval_split_names, cfg["optim"],
                               task["metrics"]), dm
