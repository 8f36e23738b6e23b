"""GLUE-style classification as text-to-text (Raffel et al. 2020, §2.4): an encoder-decoder (T5)
is fine-tuned to write the label's name after reading "<task> <field>: <text> ...", with the
maximum-likelihood objective of every task (teacher forcing, ``LitSeq2Seq``), and evaluated on
what it generates (greedy decoding, at most as many tokens as the longest label text).

Scoring (``LabelScorer``): a generated text that is one of the label names is that label; any
other text is outside the label set and counts as wrong (scored as a label other than the gold
one, so it lowers accuracy, F1 and MCC alike), and the share of such texts is recorded as
``invalid``. STS-B's generated text is read as a number (T5: the score rounded to 0.2); text that
is none scores -1, outside the 0..5 range, as T5's ``string_to_float`` default. The task's own
metrics are the GLUE ones (``lit_models/metrics/classification.py``), so runs report to the GLUE
board beside
the encoders. ``TextToText`` is the task family (named for encoder-decoders by the GLUE YAMLs'
``ByKind``): the text-pairs DataModule, ``LitSeq2Seq`` with this scorer, JSONL generations, GLUE
TSV predictions of every evaluated split with gold labels and of unlabelled tasks (AX), and
the majority-class baseline. ``Mixture`` trains
on several such tasks at once (§3.5.2, ``datamodules/mixture.py``).
"""

import json
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path

import lightning as L
import torch
from torchmetrics import MeanMetric, Metric

from datamodules import glue_text
from datamodules.base import task_config
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.mixture import MixtureDataModule
from datamodules.predictions import submission_vocabulary, write_predictions
from datamodules.tokenization import TextTokenizer
from lit_models.archs import Model
from lit_models.core.family import check_predicted_rows
from lit_models.core.generation import GenerationConfig
from lit_models.families.classify import Classification
from lit_models.families.seq2seq import LitSeq2Seq, Seq2Seq, check_lengths, decoder_start
from lit_models.metrics import exact_total
from lit_models.metrics.classification import (
    hard_probabilities,
    label_metrics,
    label_predictions,
)

#: STS-B's score of a generated text that is no number (T5's string_to_float default)
NOT_A_SCORE = -1.0


class LabelScorer(Metric):
    """The task's metrics on generated label texts against the references; ``invalid``: the
    share of generations outside the label set."""

    full_state_update = False

    def __init__(self, label_names: Sequence[str], metrics: Sequence[str], num_labels: int):
        super().__init__()
        self.label_ids = {name: i for i, name in enumerate(label_names)}
        self.num_labels = num_labels
        self.metrics = label_metrics(metrics, num_labels)
        self.invalid = exact_total(MeanMetric())

    def read(self, prediction: str, reference: str) -> tuple[float | int, float | int, bool]:
        """(predicted label or score, gold one, whether the prediction is outside the set)."""
        if self.num_labels == 1:
            try:
                return float(prediction), float(reference), False
            except ValueError:
                return NOT_A_SCORE, float(reference), True
        gold = self.label_ids[reference]
        if prediction in self.label_ids:
            return self.label_ids[prediction], gold, False
        return (gold + 1) % self.num_labels, gold, True  # wrong, whatever the metric

    def update(self, references: Sequence[str], texts: Sequence[str]) -> None:
        read = [self.read(p, r) for p, r in zip(texts, references, strict=True)]
        predicted, gold, invalid = (torch.tensor(column) for column in zip(*read, strict=True))
        if self.num_labels == 1:
            self.metrics.update(gold, scores=predicted)
        else:  # a generated label is a hard prediction
            self.metrics.update(gold, **label_predictions(
                hard_probabilities(predicted, self.num_labels), self.num_labels))
        self.invalid.update(invalid.float())

    def compute(self) -> dict[str, float]:
        return {**self.metrics.compute(), "invalid": float(self.invalid.compute())}

    def signatures(self) -> dict[str, str]:
        return self.metrics.signatures()

    def reset(self) -> None:
        super().reset()
        self.metrics.reset()
        self.invalid.reset()


def submission_label(task: Mapping, text: str) -> int | float | str:
    """A generated (or reference) label text as a predictions file's value: the class id of a
    label name, STS-B's score as a float; a text that is neither stays as it was written."""
    if task["num_labels"] == 1:
        try:
            return float(text)
        except ValueError:
            return text
    names = list(task["label_names"])
    return names.index(text) if text in names else text


def label_scorer(task: Mapping) -> LabelScorer:
    return LabelScorer(task["label_names"], task["metrics"], task["num_labels"])


def text_task(task: Mapping, tokenizer: TextTokenizer) -> dict:
    """The task with the text lengths the DataModule reads: its inputs cut to ``max_length``,
    targets as long as the longest label text (in tokens, the end token included)."""
    task = task_config(task, ("max_length", "num_labels", "label_names"))
    longest = max(len(e.ids) for e in tokenizer.backend.encode_batch(
        glue_text.label_texts(task)))
    return {**task, "source_max_length": task["max_length"], "target_max_length": longest}


class TextToText(Seq2Seq):
    """GLUE-style tasks as text for encoder-decoders (module docstring)."""

    kinds = ("encoder-decoder",)

    def vocabulary_corpus(self, task):
        if not task["splits"].get("train"):
            raise PlmbenchError(f"task {task['name']} has no training split; a text-to-text run "
                                "of it starts from a fine-tuned checkpoint (init_from=ckpt:<run "
                                "dir> of an MNLI run saved with save_model=true)")
        return glue_text.vocabulary_corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = text_task(cfg["task"], model.tokenizer)
        generation = GenerationConfig(max_new_tokens=task["target_max_length"])  # greedy
        check_lengths(task, model, generation)
        dm = glue_text.GlueTextDataModule(task, model.tokenizer, decoder_start(model),
                                          cfg["seed"])
        module = LitSeq2Seq(model, generation, dm.eval_split_names, dm.texts, cfg["optim"],
                            lambda split: label_scorer(task))
        return module, dm

    def predict(self, trainer: L.Trainer, module: LitSeq2Seq, dm, run_dir: Path, cfg
                ) -> dict[str, str]:
        """GLUE-format predictions (label names) of the splits the run predicts (as
        ``Classification.predict``); a generated text outside the label set is written as it
        is."""
        dm.setup("predict")
        dm.trainer = trainer  # each process predicts its share of the examples
        splits = dm.predicted_splits()
        outputs = trainer.predict(module, dataloaders=[loader for *_, loader in splits])
        per_split = outputs if len(splits) > 1 else [outputs]
        files = {}
        for (split, examples, _), batches in zip(splits, per_split, strict=True):
            rows = sorted(pair for batch in module.gather_batches(batches) for pair in batch)
            check_predicted_rows(cfg["task"], split, len(rows), len(examples))
            predicted = [submission_label(cfg["task"], text) for _, text in rows]
            path = write_predictions(run_dir, split, [i for i, _ in rows], predicted,
                                     submission_vocabulary(cfg["task"]))
            files[split] = str(path.relative_to(run_dir))
        return files

    def evaluation_outputs(self, module: LitSeq2Seq, run_dir: Path, cfg) -> dict[str, str]:
        """The last evaluation's predictions of every eval split in the GLUE schema, with gold
        labels (``datamodules/predictions.py``), as the encoders' runs write them."""
        task, files = cfg["task"], {}
        for split in module.eval_splits:
            rows = module.generations.get(split)
            if not rows:
                continue
            references = module.texts[split]["reference"]
            path = write_predictions(
                run_dir, split, [i for i, _ in rows],
                [submission_label(task, out.text) for _, out in rows],
                submission_vocabulary(task),
                [submission_label(task, references[i]) for i, _ in rows])
            files[split] = str(path.relative_to(run_dir))
        return files

    def baseline(self, task):
        return Classification().baseline(task)

    def eval_labels(self, task):
        return Classification().eval_labels(task)


#: what a mixture's members take from the mixture's own config when it sets them
SHARED_KEYS = ("max_length", "max_train_samples", "max_eval_samples", "batch_size",
               "eval_batch_size")


class Mixture(TextToText):
    """Multi-task text-to-text training (Raffel et al. 2020, §3.5.2): the task YAML's
    ``members`` (GLUE-style tasks) trained on together, examples mixed at the rates of
    ``mixing`` (cap K, temperature T; ``datamodules/mixture.py``), each member's eval splits
    scored with its own metrics as "<member>:<split>"."""

    def members(self, task: Mapping) -> dict[str, dict]:
        """Each member's task config, its eval splits those the mixture names for it, and the
        mixture's caps, lengths and batch sizes where it sets them."""
        task = task_config(task, ("members", "mixing", "splits"))
        evals = [name.split(":", 1)[0] for name in task["splits"]["eval"]]
        members = {}
        for name, member in task["members"].items():
            shared = {k: task[k] for k in SHARED_KEYS if task.get(k) is not None}
            splits = [s.split(":", 1)[1] for s, m in zip(task["splits"]["eval"], evals,
                                                         strict=True) if m == name]
            members[name] = {**member, **shared,
                             "splits": {"train": member["splits"]["train"], "eval": splits}}
        return members

    def vocabulary_corpus(self, task):
        corpora = [glue_text.vocabulary_corpus(m) for m in self.members(task).values()]
        return json.dumps([key for key, _ in corpora]), chain(*(texts for _, texts in corpora))

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = task_config(cfg["task"], ("members", "mixing", "splits", "batch_size"))
        members = {name: text_task(member, model.tokenizer)
                   for name, member in self.members(task).items()}
        generation = GenerationConfig(  # greedy, as long as the longest label text
            max_new_tokens=max(m["target_max_length"] for m in members.values()))
        for member in members.values():
            check_lengths(member, model, generation)
        dm = MixtureDataModule(task, {
            name: glue_text.GlueTextDataModule(member, model.tokenizer, decoder_start(model),
                                               cfg["seed"])
            for name, member in members.items()}, task["mixing"], cfg["seed"])
        module = LitSeq2Seq(model, generation, dm.eval_split_names, dm.texts, cfg["optim"],
                            lambda split: label_scorer(members[split.split(":")[0]]))
        return module, dm

    def evaluation_outputs(self, module: LitSeq2Seq, run_dir: Path, cfg) -> dict[str, str]:
        """Each member's generations as JSONL (a mixture's eval splits are "<member>:<split>")."""
        return Seq2Seq.evaluation_outputs(self, module, run_dir, cfg)

    def baseline(self, task):
        return None

    def eval_labels(self, task):
        return None
