"""Open-domain question answering: retrieve, then read (Chen et al. 2017, DrQA; Karpukhin et al.
2020, DPR §6), and the readers that answer without retrieval.

``OpenQA`` is the task family of ``conf/task/open_qa/*``. It builds the corpus
(``retrieval.passages``), the retriever the task names (``task.retriever``: ``bm25`` or ``dense``,
``lit_models.retrievers``) and the reader (``task.reader``, a name in ``READERS``; ``auto`` picks
by the model's kind: an encoder reads extractively, an encoder-decoder answers closed-book):

- ``extractive`` (``LitRetrieveRead``): the extractive reader of ``lit_models.extractive_qa``,
  trained on SQuAD-format (question, gold paragraph, span) data, reads each of the top
  ``read_top_k`` passages; the answer is the best span over all of them (span score
  S·T_i + E·T_j, Devlin et al. 2019 §4.2, compared across passages);
- ``closed_book`` (``lit_models.closed_book``): a sequence-to-sequence model generates the answer
  from the question alone (Roberts et al. 2020); no retrieval;
- ``realm`` (``lit_models.realm``, Guu et al. 2020): the extractive reader over [CLS] x [SEP] z
  [SEP], trained with the question encoder on the marginal likelihood over the top k documents,
  the index refreshed every ``task.realm.refresh_every`` steps;
- ``rag_sequence`` / ``rag_token`` (``lit_models.rag``, Lewis et al. 2020): a BART generator
  reading "title / text // question" of each top-k document, the two marginalisations, the
  question encoder fine-tuned.

Every evaluation scores exact match after SQuAD's normalisation against any reference (a match of
the reference regex at the start of the prediction for CuratedTREC, DrQA's
``regex_match_score``), the retriever's recall@{1,5,20,100} and MRR (``retrieval.metrics``), its
queries/s, passages/s and corpus size, and writes ``<run dir>/predictions/<split>.jsonl``: per
question its id, question, retrieved passage ids with scores, the predicted answer and the
references.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import regex
from torch import nn

from datamodules.errors import PlmbenchError
from datamodules.open_qa import OpenQADataModule, passage_texts
from datamodules.predictions import write_jsonl
from datamodules.squad import vocabulary_corpus
from lit_models.archs import ARCHS, arch_of_net
from lit_models.extractive_qa import LitExtractiveQA
from lit_models.family import TaskFamily, check_max_length
from lit_models.retrievers import build_corpus_of, build_retriever
from lit_models.squad_metrics import normalize_answer
from retrieval.metrics import answer_hits, retrieval_metrics
from retrieval.retriever import Retriever


def exact_match(prediction: str, references: Sequence[str], match: str = "string") -> bool:
    """SQuAD-normalised equality with any reference; for ``regex`` references, DrQA's
    ``regex_match_score`` (the pattern matches at the start of the prediction, ignoring case)."""
    if match == "regex":
        for pattern in references:
            try:
                compiled = regex.compile(pattern, flags=regex.IGNORECASE | regex.UNICODE
                                         | regex.MULTILINE)
            except regex.error:
                continue
            if compiled.match(prediction) is not None:
                return True
        return False
    normalized = normalize_answer(prediction)
    return any(normalized == normalize_answer(reference) for reference in references)


def prediction_rows(questions, retrieved, corpus, answers: Sequence[str]) -> list[dict]:
    """The predictions file's rows: id, question, passages (id, score), prediction, references."""
    rows, scores = retrieved[0], retrieved[1]
    ids = corpus["id"]
    return [{"id": qid, "question": question,
             "passages": [{"id": ids[r], "score": float(s)}
                          for r, s in zip(ranked, scored, strict=True) if r >= 0],
             "prediction": answer, "references": references}
            for qid, question, references, ranked, scored, answer in zip(
                questions["id"], questions["question"], questions["answers"], rows.tolist(),
                scores.tolist(), answers, strict=True)]


def open_qa_metrics(answers: Sequence[str], questions, retrieved, corpus, match: str,
                    describe: Mapping) -> dict[str, float]:
    """EM (0..100), recall@k and MRR of the retrieved passages, and the retriever's figures."""
    references = questions["answers"]
    em = [exact_match(a, refs, match) for a, refs in zip(answers, references, strict=True)]
    metrics = {"exact_match": 100 * float(np.mean(em)) if em else 0.0}
    if retrieved is not None:
        texts = passage_texts(corpus, retrieved[0].tolist())
        metrics |= retrieval_metrics(answer_hits(texts, references, match, retrieved[0].shape[1]))
        metrics["queries_per_s"] = len(references) / max(retrieved[2], 1e-9)
        metrics |= {k: v for k, v in describe.items() if isinstance(v, int | float)}
    return metrics


class LitRetrieveRead(LitExtractiveQA):
    """The extractive reader over each question's retrieved passages."""

    def __init__(self, encoder: nn.Module, eval_splits: Sequence[str], decoding: Mapping,
                 match: str, describe: Mapping, optim: Mapping) -> None:
        super().__init__(encoder, eval_splits, decoding, False, optim)
        self.match, self.describe = match, dict(describe)

    def on_validation_epoch_end(self) -> None:
        collected, self.logits = self.logits, [[] for _ in self.eval_splits]
        if self.trainer.sanity_checking:
            return
        dm = self.trainer.datamodule
        for i, split in enumerate(self.eval_splits):
            read = dm.retrieved[i][0][:, : dm.task["read_top_k"]]
            windows = [logits for _, logits in self.gather_indexed(collected[i])]
            answers = self.answers(windows, dm.eval_windows[i], dm.eval_examples[i], read)
            metrics = open_qa_metrics(answers, dm.questions[i], dm.retrieved[i], dm.corpus,
                                      self.match, self.describe)
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


@dataclass(frozen=True)
class Reader:
    kinds: tuple[str, ...]  # the architecture kinds it reads with
    retrieves: bool  # whether it reads retrieved passages
    with_heads: bool  # whether the net is built with its pretraining heads (a generator's LM head)
    build: Callable  # (family, cfg, net, tokenizer) -> (module, DataModule)


def _extractive(family: "OpenQA", cfg: Mapping, net: nn.Module, tokenizer):
    task = cfg["task"]
    check_max_length(task, net)
    corpus = build_corpus_of(task)
    retriever = build_retriever(task, corpus, cfg)
    dm = OpenQADataModule(task, tokenizer, corpus, _retrieve(retriever, task),
                          cfg["seed"])
    decoding = {"n_best": task["n_best"], "max_answer_length": task["max_answer_length"]}
    module = LitRetrieveRead(net, dm.eval_split_names, decoding, task["questions"]["match"],
                             retriever.describe(), cfg["optim"])
    return module, dm


def _retrieve(retriever: Retriever, task: Mapping):
    depth = max(task["retrieve_top_k"], task["read_top_k"])

    def retrieve(questions: list[str]):
        found = retriever.search(questions, depth)
        return found.rows, found.scores, found.seconds

    return retrieve


def _closed_book(family, cfg, net, tokenizer):
    from lit_models.closed_book import build_closed_book

    return build_closed_book(cfg, net, tokenizer)


def _realm(family, cfg, net, tokenizer):
    from lit_models.realm import build_realm

    return build_realm(family, cfg, net, tokenizer)


def _rag(marginalisation: str) -> Callable:
    def build(family, cfg, net, tokenizer):
        from lit_models.rag import build_rag

        return build_rag(cfg, net, tokenizer, marginalisation)

    return build


#: reader name -> Reader; REALM and RAG readers register here
READERS: dict[str, Reader] = {
    "extractive": Reader(("encoder",), True, False, _extractive),
    "closed_book": Reader(("encoder-decoder",), False, True, _closed_book),
    "realm": Reader(("encoder",), True, False, _realm),
    "rag_sequence": Reader(("encoder-decoder",), True, True, _rag("sequence")),
    "rag_token": Reader(("encoder-decoder",), True, True, _rag("token")),
}


class OpenQA(TaskFamily):
    """Open-domain QA: a corpus, a retriever and a reader (``task.reader``)."""

    kinds = ("encoder", "encoder-decoder")

    def reader(self, task: Mapping, kind: str | None = None) -> Reader:
        name = task["reader"]
        if name == "auto":
            name = next(n for n, r in READERS.items() if kind in r.kinds) if kind else "extractive"
        if name not in READERS:
            raise PlmbenchError(f"task.reader={name!r} is unknown; use auto or one of "
                                f"{sorted(READERS)}")
        return READERS[name]

    def check_arch(self, arch, task) -> None:
        super().check_arch(arch, task)
        reader = self.reader(task, arch.kind)
        self.with_heads = reader.with_heads  # the run builds the net after this check
        if arch.kind not in reader.kinds:
            fitting = sorted(a.name for a in ARCHS.values() if a.kind in reader.kinds)
            raise PlmbenchError(f"reader {task['reader']} reads with {' or '.join(reader.kinds)} "
                                f"models, and {arch.name} is of kind {arch.kind}; pick a preset "
                                f"of {fitting}")

    def vocabulary_corpus(self, task):
        return vocabulary_corpus(task)

    def build(self, cfg, net, tokenizer):
        reader = self.reader(cfg["task"], arch_of_net(net).kind)
        return reader.build(self, cfg, net, tokenizer)

    def evaluation_outputs(self, module, run_dir: Path, cfg) -> dict[str, str]:
        return dict(module.predictions)
