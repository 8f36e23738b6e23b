"""Held-out evaluation of a checkpoint on several corpora in one run, with no training: how well
its masked LM predicts each corpus's held-out text, and how its vocabulary segments that text.

Don't-stop-pretraining (Gururangan et al. 2020, §3.1 and Table 3) reads domain adaptation off the
masked-LM loss of a model on held-out documents of each domain, before and after adaptation;
SciBERT (Beltagy et al. 2019, §2) compares the general and the in-domain vocabulary. A task of
this family (``conf/task/perplexity/domains.yaml``) names its corpora (``task.corpora``: their
pretraining task configs) and scores those its eval splits name: each corpus's "heldout"
documents, carved as its training runs carve them (the evaluation's caps apply to every corpus,
so a capped study carves what its capped runs held out), by the run's objective (MLM loss and
perplexity) and by ``subtokens_per_word``; ``metrics.vocabulary`` holds the vocabulary's size
and, when ``task.vocabulary_reference`` names another checkpoint, its ``overlap`` with that
checkpoint's vocabulary (``datamodules/vocabulary_stats.py``).

A checkpoint saved without pretraining heads (a sentence encoder such as all-MiniLM-L6-v2) would
be scored through an untrained masked-LM head: its loss says nothing about the encoder, so such a
checkpoint gets the vocabulary figures only.
"""

import logging
from collections.abc import Mapping

from datamodules import pretrain
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.tokenization import load_tokenizer
from datamodules.vocabulary_stats import subtokens_per_word, vocabulary, vocabulary_overlap
from lit_models.archs import Model
from lit_models.core.family import check_max_length
from lit_models.families.pretrain import (
    LitPretrain,
    Pretraining,
    build_objective,
    pretraining_datamodule,
)
from lit_models.interop.hf import has_pretraining_heads

log = logging.getLogger("plmbench")

#: the evaluation's settings that every corpus takes over where the evaluation sets them
SHARED = ("max_train_samples", "max_eval_samples", "eval_documents", "max_length",
          "eval_batch_size")


def corpus_task(task: Mapping, name: str) -> dict:
    """The pretraining task of corpus ``name``, evaluating only its held-out documents."""
    corpora = task.get("corpora") or {}
    if name not in corpora:
        raise PlmbenchError(f"task {task['name']}: eval split {name!r} names none of its corpora "
                            f"{sorted(corpora)}; name one in task.splits.eval")
    corpus = dict(corpora[name])
    shared = {key: task[key] for key in SHARED if task.get(key) is not None}
    return {**corpus, **shared, "splits": {"train": None, "eval": [pretrain.HELD_OUT]},
            "heldout_of": corpus["splits"]["train"]}


class CorpusEvaluation(Pretraining):
    """Several corpora's held-out text, evaluated only: nothing is trained or exported."""

    def vocabulary_corpus(self, task):
        return pretrain.vocabulary_corpus(corpus_task(task, task["splits"]["eval"][0]))

    def build(self, cfg, model: Model, init_from: InitFrom):
        task, tokenizer = cfg["task"], model.tokenizer
        if task["splits"].get("train"):
            raise PlmbenchError(f"task {task['name']} only evaluates; set its splits.train to null")
        check_max_length(task, model.net)
        objective = build_objective(cfg["objective"], model)
        self.corpora = {name: corpus_task(task, name) for name in task["splits"]["eval"]}
        datamodules = {name: pretraining_datamodule(corpus, tokenizer, objective, cfg["seed"])
                       for name, corpus in self.corpora.items()}
        dm = pretrain.HeldOutCorpora(task, datamodules, objective.collator(tokenizer, cfg["seed"]),
                                     cfg["seed"])
        self.tokenizer = tokenizer
        self.scores_heads = init_from.scratch or has_pretraining_heads(init_from.directory())
        return LitPretrain(model.net, objective, cfg["optim"], dm.eval_split_names), dm

    def predict(self, trainer, module, dm, run_dir, cfg) -> dict[str, str]:
        if self.scores_heads:
            trainer.validate(module, datamodule=dm, verbose=False)
        else:
            log.warning("%s: %s has no pretraining heads; its held-out loss is not measured",
                        run_dir, cfg["init_from"])
        for name, corpus in self.corpora.items():
            documents = pretrain.split_documents(corpus, pretrain.HELD_OUT)
            sentences = (sentence for document in documents for sentence in document)
            figures = {"subtokens_per_word": subtokens_per_word(self.tokenizer, sentences)}
            module.last_metrics[name] = {**module.last_metrics.get(name, {}), **figures}
        module.last_metrics["vocabulary"] = {"size": len(vocabulary(self.tokenizer))}
        reference = cfg["task"].get("vocabulary_reference")
        if reference:
            other = load_tokenizer(InitFrom.parse(
                reference, "task.vocabulary_reference", pretrained=True).directory(
                "task.vocabulary_reference"))
            module.last_metrics["vocabulary"]["overlap"] = vocabulary_overlap(self.tokenizer, other)
        return {}

    def export(self, module, model, run_dir, cfg) -> None:
        """Nothing was trained: the checkpoint is where it was."""
