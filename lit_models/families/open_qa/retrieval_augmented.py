"""What REALM (Guu et al. 2020) and RAG (Lewis et al. 2020) share: a knowledge retriever
p(z|x) that trains with the reader, its index refresh and their evaluation.

The retriever p(z|x) = exp(f(x, z)) / Σ_z' exp(f(x, z')), f(x, z) = Embed_input(x)ᵀ Embed_doc(z)
(REALM §2.3; RAG eq. in §2.2, DPR's d(z)ᵀq(x)), is normalised over the top k documents of a
maximum inner product search (``retrieval.retriever.DenseRetriever``): the search picks the
documents without gradients, then f(x, z) is recomputed with the question encoder in training mode
so the loss back-propagates into it. Document vectors come from the index, fixed between refreshes
(REALM fine-tuning §3.4 and RAG §2.4: the document encoder is frozen); with
``update_documents`` (REALM pre-training, §3.4 and §A.1) the top k documents are re-embedded with
gradients, the document encoder trains, and ``IndexRefresh`` re-embeds the corpus with it and
rebuilds the index every N steps (REALM refreshes asynchronously; here synchronously, between two
steps).

An evaluation retrieves ``retrieve_top_k`` passages per question (recall@k is taken on them), the
reader reads the first of them, and per split the module records open-QA's metrics
(``lit_models.families.open_qa.family``: EM, recall@k, MRR, speeds), the number of index refreshes
so far, and writes ``predictions/<split>.jsonl``.
"""

from collections.abc import Mapping

import lightning as L
import numpy as np
import torch

from datamodules.predictions import write_jsonl
from lit_models.core.generation import NEVER
from lit_models.families.open_qa.scoring import open_qa_metrics, prediction_rows
from lit_models.metrics import Metrics
from retrieval.retriever import DenseRetriever


class IndexRefresh(L.Callback):
    """Every ``every_n_steps`` optimizer steps: re-embed the corpus with the current document
    encoder and rebuild the index (``refresh_index`` of the module)."""

    def __init__(self, every_n_steps: int) -> None:
        self.every_n_steps, self.last = every_n_steps, 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step != self.last and step % self.every_n_steps == 0:
            self.last = step
            pl_module.refresh_index()


class RetrievalAugmented:
    """Mixin of a ``PlmModule`` that reads what a ``DenseRetriever`` finds; ``attach`` it in
    ``__init__``. Subclasses implement ``read(questions, rows, scores) -> answers``."""

    def attach(self, retriever: DenseRetriever, corpus_k: int, retrieve_top_k: int,
               update_documents: bool, refresh_every: int, scorer: Metrics) -> None:
        self.retriever = retriever
        self.bi_encoder = retriever.encoder  # a submodule: moved to the device, optimised
        self.bi_encoder.passage_encoder.requires_grad_(update_documents)
        self.corpus_k = min(corpus_k, len(retriever.corpus))
        self.retrieve_top_k, self.update_documents = retrieve_top_k, update_documents
        self.refresh_every, self.scorer, self.refreshes = refresh_every, scorer, 0
        self.collected: list[list] = [[] for _ in self.eval_splits]

    def configure_callbacks(self) -> list[L.Callback]:
        refresh = [IndexRefresh(self.refresh_every)] if self.refresh_every else []
        return [*super().configure_callbacks(), *refresh]

    def refresh_index(self) -> None:
        """Re-embed and rebuild; every module's mode and every gradient stay as they were
        (Lightning's predict loop sets eval mode and clears gradients)."""
        modes = {m: m.training for m in self.modules()}
        grads = {p: p.grad for p in self.parameters()}
        self.retriever.refresh()
        for module, training in modes.items():
            module.train(training)
        for param, grad in grads.items():
            param.grad = grad
        self.refreshes += 1

    def passages(self, rows: np.ndarray) -> tuple[list[str], list[str]]:
        """(titles, texts) of corpus ``rows`` (any shape, flattened; -1: empty)."""
        flat = [int(r) for r in np.asarray(rows).reshape(-1)]
        found = self.retriever.corpus[[max(r, 0) for r in flat]]
        return ([t if r >= 0 else "" for t, r in zip(found["title"], flat, strict=True)],
                [t if r >= 0 else "" for t, r in zip(found["text"], flat, strict=True)])

    def retrieval_logits(self, batch: Mapping, k: int) -> tuple[np.ndarray, torch.Tensor]:
        """(corpus rows [B, k] of the top k, f(x, z) [B, k] with gradients; NEVER where the
        corpus has fewer than k passages) of the ``batch``'s questions and their tokens."""
        rows = self.retriever.search(batch["question"], k).rows
        return rows, self.document_scores(self.bi_encoder.encode_questions(batch), rows)

    def document_scores(self, query: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        """f(x, z) [B, k] of query vectors [B, H] (with gradients) and corpus ``rows`` [B, k]:
        document vectors re-embedded with gradients (``update_documents``) or the index's;
        NEVER where a row is -1."""
        encoder = self.bi_encoder
        if self.update_documents:
            tokens = encoder.tokenize_passages(*self.passages(rows))
            docs = encoder.encode_passages({n: t.to(self.device) for n, t in tokens.items()})
            docs = docs.view(*rows.shape, -1)
        else:
            docs = self.retriever.passage_vectors(rows.clip(min=0)).to(query)
        logits = torch.einsum("bh,bkh->bk", query, docs)
        return logits.masked_fill(torch.from_numpy(rows < 0).to(self.device), NEVER)

    def validation_step(self, batch: Mapping, batch_idx: int, dataloader_idx: int = 0) -> None:
        found = self.retriever.search(batch["question"], self.retrieve_top_k)
        answers = self.read(batch["question"], found.rows[:, :self.corpus_k],
                            found.scores[:, :self.corpus_k])
        share = found.seconds / len(answers)
        self.collected[dataloader_idx].extend(
            (i, (rows, scores, answer, share)) for i, rows, scores, answer in zip(
                batch["index"], found.rows, found.scores, answers, strict=True))

    def on_validation_epoch_end(self) -> None:
        collected, self.collected = self.collected, [[] for _ in self.eval_splits]
        dm = self.trainer.datamodule
        for i, split, outputs in self.gathered_splits(collected):
            rows, scores, answers, seconds = zip(*outputs, strict=True)
            retrieved = (np.stack(rows), np.stack(scores), float(sum(seconds)))
            metrics = open_qa_metrics(self.scorer, answers, dm.questions[i], retrieved,
                                      self.retriever.corpus, self.retriever.describe())
            self.record_metrics(split, metrics | {"index_refreshes": self.refreshes})
            if self.run_dir is not None and self.trainer.is_global_zero:
                lines = prediction_rows(dm.questions[i], retrieved, self.retriever.corpus,
                                        answers)
                path = write_jsonl(self.run_dir, split, lines)
                self.predictions[split] = str(path.relative_to(self.run_dir))
