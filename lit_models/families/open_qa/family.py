"""Open-domain question answering: retrieve, then read (Chen et al. 2017, DrQA; Karpukhin et al.
2020, DPR §6), and the readers that answer without retrieval.

``OpenQA`` is the task family of ``conf/task/open_qa/*``. It builds the corpus
(``retrieval.passages``), the retriever the task names (``task.retriever``: ``bm25`` or ``dense``,
``lit_models.core.retrievers``) and the reader (``task.reader``, one of the task YAML's ``readers``,
each a ``Reader`` named by ``_target_``; ``auto`` picks by the model's kind: an encoder reads
extractively, an encoder-decoder answers closed-book):

- ``extractive`` (``LitRetrieveRead``): the extractive reader of
  ``lit_models.families.extractive_qa``, trained on SQuAD-format (question, gold paragraph, span)
  data, reads each of the top ``read_top_k`` passages; the answer is the best span over all of them
  (span score S·T_i + E·T_j, Devlin et al. 2019 §4.2, compared across passages);
- ``closed_book`` (``lit_models.families.open_qa.closed_book``): a sequence-to-sequence model
  generates the answer from the question alone (Roberts et al. 2020); no retrieval;
- ``realm`` (``lit_models.families.open_qa.realm``, Guu et al. 2020): the extractive reader over
  [CLS] x [SEP] z [SEP], trained with the question encoder on the marginal likelihood over the top k
  documents, the index refreshed every ``task.realm.refresh_every`` steps;
- ``rag_sequence`` / ``rag_token`` (``lit_models.families.open_qa.rag``, Lewis et al. 2020): a BART
  generator reading "title / text // question" of each top-k document, the two marginalisations, the
  question encoder fine-tuned.

Every evaluation scores exact match after SQuAD's normalisation against any reference (a match of
the reference regex at the start of the prediction for CuratedTREC, DrQA's ``regex_match_score``),
the retriever's recall@{1,5,20,100} and MRR (``lit_models.metrics.retrieval``), its queries/s,
passages/s and corpus size, and writes ``<run dir>/predictions/<split>.jsonl``: per question its id,
question, retrieved passage ids with scores, the predicted answer and the references.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from torch import nn

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.open_qa import OpenQADataModule
from datamodules.predictions import write_jsonl
from datamodules.squad import vocabulary_corpus
from lit_models.archs import Capabilities, Model, archs_with
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.retrievers import build_corpus_of, build_retriever
from lit_models.families.extractive_qa import LitExtractiveQA
from lit_models.families.open_qa.reader import Reader
from lit_models.families.open_qa.scoring import open_qa_metrics, open_qa_scorer, prediction_rows
from lit_models.metrics import Metrics
from retrieval.retriever import Retriever


class LitRetrieveRead(LitExtractiveQA):
    """The extractive reader over each question's retrieved passages."""

    def __init__(self, encoder: nn.Module, capabilities: Capabilities,
                 eval_splits: Sequence[str], decoding: Mapping, scorer: Metrics,
                 describe: Mapping, optim: Mapping) -> None:
        super().__init__(encoder, capabilities, eval_splits, decoding, False, optim)
        self.scorer, self.describe = scorer, dict(describe)

    def on_validation_epoch_end(self) -> None:
        collected, self.logits = self.logits, [[] for _ in self.eval_splits]
        dm = self.trainer.datamodule
        for i, split, windows in self.gathered_splits(collected):
            read = dm.retrieved[i][0][:, : dm.task["read_top_k"]]
            answers = self.answers(windows, dm.eval_windows[i], dm.eval_examples[i], read)
            metrics = open_qa_metrics(self.scorer, answers, dm.questions[i], dm.retrieved[i],
                                      dm.corpus, self.describe)
            self.record_metrics(split, metrics)
            if self.run_dir is not None and self.trainer.is_global_zero:
                rows = prediction_rows(dm.questions[i], dm.retrieved[i], dm.corpus, answers)
                path = write_jsonl(self.run_dir, split, rows)
                self.predictions[split] = str(path.relative_to(self.run_dir))

    def answers(self, window_logits, windows, pairs, rows: np.ndarray) -> list[str]:
        """Per question the best span over its read passages: ``pairs`` holds, question after
        question, one row per valid retrieved ``rows`` entry."""
        answers = [""] * len(rows)
        if not window_logits:
            return answers
        spans = self.decode(window_logits, windows, len(pairs))
        texts = spans.texts(pairs[self.trainer.datamodule.task["context_field"]])
        question_of = np.repeat(np.arange(len(rows)), (rows >= 0).sum(1))
        best = np.full(len(rows), -np.inf)
        for j, (text, score) in enumerate(zip(texts, spans.score, strict=True)):
            q = question_of[j]
            if spans.has_span[j] and score > best[q]:
                best[q], answers[q] = score, text
        return answers


class ExtractiveReader(Reader):
    """DPR's reader: the extractive reader of ``lit_models.families.extractive_qa`` over each
    question's top ``read_top_k`` passages."""

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        check_max_length(task, model.net)
        corpus = build_corpus_of(task)
        retriever = build_retriever(task, corpus, cfg)
        dm = OpenQADataModule(task, model.tokenizer, corpus, _retrieve(retriever, task),
                              cfg["seed"])
        decoding = {"n_best": task["n_best"], "max_answer_length": task["max_answer_length"]}
        module = LitRetrieveRead(model.net, model.arch.capabilities, dm.eval_split_names,
                                 decoding, open_qa_scorer(task), retriever.describe(),
                                 cfg["optim"])
        return module, dm


def _retrieve(retriever: Retriever, task: Mapping):
    depth = max(task["retrieve_top_k"], task["read_top_k"])

    def retrieve(questions: list[str]):
        found = retriever.search(questions, depth)
        return found.rows, found.scores, found.seconds

    return retrieve


class OpenQA(TaskFamily):
    """Open-domain QA: a corpus, a retriever and a reader (``task.reader``, one of the task's
    ``readers``; ``auto``: the first that reads with the model's kind)."""

    kinds = ("encoder", "encoder-decoder")

    def reader(self, task: Mapping, kind: str | None = None) -> Reader:
        readers = task["readers"]
        name = task["reader"]
        if name == "auto":
            name = next((n for n, r in readers.items() if kind in _reader(task, n).kinds),
                        "extractive") if kind else "extractive"
        if name not in readers:
            raise PlmbenchError(f"task.reader={name!r} is unknown; use auto or one of "
                                f"{sorted(readers)}")
        return _reader(task, name)

    def check_arch(self, arch, task) -> None:
        super().check_arch(arch, task)
        reader = self.reader(task, arch.kind)
        self.with_heads = reader.with_heads  # the run builds the net after this check
        if arch.kind not in reader.kinds:
            fitting = archs_with(lambda a: a.kind in reader.kinds)
            raise PlmbenchError(f"reader {task['reader']} reads with {' or '.join(reader.kinds)} "
                                f"models, and {arch.name} is of kind {arch.kind}; pick a preset "
                                f"of {fitting}")

    def vocabulary_corpus(self, task):
        return vocabulary_corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        return self.reader(cfg["task"], model.arch.kind).build(cfg, model, init_from)

    def evaluation_outputs(self, module, run_dir: Path, cfg) -> dict[str, str]:
        return dict(module.predictions)


def _reader(task: Mapping, name: str) -> Reader:
    """The reader ``readers.<name>`` of the task YAML names (``_target_``), built by Hydra."""
    reader = instantiate(task["readers"][name])
    if not isinstance(reader, Reader):
        raise PlmbenchError(f"task.readers.{name}._target_ must name a Reader subclass")
    return reader
