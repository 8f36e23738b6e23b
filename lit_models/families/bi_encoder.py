"""Dense passage retriever training (DPR, Karpukhin et al. 2020, §3.2).

A batch of B questions q_i, their positive passages p_i+ and one BM25 hard negative each
(``retrieval.dpr_data``); every question is scored against all 2B passages of the batch (the other
questions' positives and negatives are its in-batch negatives), and the loss is the negative
log-likelihood of the positive passage (eq. 2):
L(q_i, p_i+, p_i,1-, ..., p_i,n-)
    = -log e^{sim(q_i, p_i+)} / (e^{sim(q_i, p_i+)} + Σ_j e^{sim(q_i, p_i,j-)}),
sim the inner product of the bi-encoder's vectors (``retrieval.encoders.BiEncoder``; DPR: two BERT
encoders, [CLS] vectors). Evaluation ranks the passages of the eval questions' paragraphs by the
current encoders (exact inner product) and records the task's metrics of the rankings (recall@k
and MRR, ``lit_models.metrics.retrieval``).
``save_model`` exports ``<run dir>/model/question_encoder`` and ``passage_encoder`` (Hugging Face
layout), which an open-QA task reads as ``task.dense.encoder=ckpt:<run dir>``.
"""

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from datamodules import strict_json
from datamodules.dpr import BiEncoderDataModule
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.squad import vocabulary_corpus
from lit_models.archs import Model
from lit_models.core.family import TaskFamily
from lit_models.core.module import PlmModule
from lit_models.core.retrievers import PASSAGE_ENCODER, QUESTION_ENCODER, SETTINGS_FILE
from lit_models.interop.hf import to_hf
from lit_models.metrics import build_metrics
from retrieval.dpr_data import dpr_triples, eval_questions
from retrieval.encoders import BiEncoder
from retrieval.ict import ict_pairs

PASSAGE = "passage_"


def collate(items: list[Mapping], encoder: BiEncoder) -> dict:
    """Training items -> question tokens (input_ids, attention_mask, ...: the tokens the
    throughput counts) and the 2B passages' (``passage_*``: positives, then negatives); eval
    items -> question tokens."""
    batch = encoder.tokenize_questions([item["question"] for item in items])
    if "positive_text" in items[0]:
        sides = ("positive", "negative") if "negative_text" in items[0] else ("positive",)
        titles = [i[f"{side}_title"] for side in sides for i in items]
        texts = [i[f"{side}_text"] for side in sides for i in items]
        passages = encoder.tokenize_passages(titles, texts)
        batch |= {PASSAGE + k: v for k, v in passages.items()}
    return batch


def _split(batch: Mapping) -> tuple[dict, dict]:
    questions = {k: v for k, v in batch.items() if not k.startswith(PASSAGE)}
    passages = {k.removeprefix(PASSAGE): v for k, v in batch.items() if k.startswith(PASSAGE)}
    return questions, passages


class LitBiEncoder(PlmModule):
    def __init__(self, encoder: BiEncoder, eval_splits, retrieve_top_k: int, passage_batch: int,
                 optim: Mapping, metrics: Sequence[str]) -> None:
        super().__init__(optim, encoder.question_encoder.config.num_hidden_layers)
        self.encoder = encoder
        self.eval_splits, self.top_k, self.passage_batch = list(eval_splits), retrieve_top_k, \
            passage_batch
        self.metrics = build_metrics(metrics, "rankings")
        self.question_vectors: list[list[torch.Tensor]] = [[] for _ in self.eval_splits]

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        questions, passages = _split(batch)
        q = self.encoder.encode_questions(questions)  # [B, H]
        p = self.encoder.encode_passages(passages)  # [2B, H]: positives, then negatives
        scores = q @ p.T  # sim(q_i, p_j) for every passage of the batch
        loss = F.cross_entropy(scores, torch.arange(len(q), device=q.device))  # eq. 2
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.question_vectors[dataloader_idx].append(
            self.encoder.encode_questions(batch).float().cpu())

    def on_validation_epoch_end(self) -> None:
        collected, self.question_vectors = self.question_vectors, [[] for _ in self.eval_splits]
        if self.trainer.sanity_checking:
            return
        dm = self.trainer.datamodule
        for i, split in enumerate(self.eval_splits):
            corpus = dm.eval_corpus[i]
            passages = torch.cat([self._passage_vectors(corpus[j:j + self.passage_batch])
                                  for j in range(0, len(corpus), self.passage_batch)])
            questions = self.gather_batches(collected[i])  # every process's, in order
            scores = torch.cat(questions) @ passages.T
            rows = scores.topk(min(self.top_k, len(corpus)), dim=1).indices
            texts = [[corpus["text"][r] for r in ranked] for ranked in rows.tolist()]
            self.metrics.update(dm.eval_data[i]["answers"], rankings=texts)
            self.record_metrics(split, self.metrics.compute())
            self.metrics.reset()

    @torch.no_grad()
    def _passage_vectors(self, rows: Mapping) -> torch.Tensor:
        batch = self.encoder.tokenize_passages(rows["title"], rows["text"])
        batch = {k: v.to(self.device) for k, v in batch.items()}
        return self.encoder.encode_passages(batch).float().cpu()


class BiEncoderTraining(TaskFamily):
    """DPR training on SQuAD-format data (``conf/task/retrieval/*``); ``task.pairs=ict``: the
    inverse cloze task's (sentence, passage) pairs instead (``retrieval.ict``, in-batch
    negatives only)."""

    def vocabulary_corpus(self, task):
        return vocabulary_corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        spec = task["bi_encoder"]
        settings = {k: spec[k] for k in ("pooling", "normalize", "max_question_length",
                                         "max_passage_length")}
        encoder = BiEncoder(model, **settings) if spec["shared"] \
            else BiEncoder.separate(model, **settings)
        words = task["passage_words"]
        pairs = ict_pairs if task.get("pairs", "dpr") == "ict" else dpr_triples
        dm = BiEncoderDataModule(task, partial(collate, encoder=encoder),
                                 partial(pairs, task, words=words),
                                 partial(eval_questions, task, words=words),
                                 cfg["seed"])
        module = LitBiEncoder(encoder, dm.eval_split_names, task["retrieve_top_k"],
                              task["eval_batch_size"], cfg["optim"], task["metrics"])
        return module, dm

    def export(self, module: LitBiEncoder, model: Model, run_dir, cfg) -> None:
        if cfg["save_model"]:
            save_bi_encoder(module.encoder, run_dir / EXPORT_DIR)


def save_bi_encoder(encoder: BiEncoder, directory: Path) -> None:
    """``directory``/question_encoder and passage_encoder (Hugging Face layout) and the pooling
    and lengths they were trained with, as ``task.dense.encoder=ckpt:<run dir>`` reads them."""
    question, passage = encoder.models()
    to_hf(question, directory / QUESTION_ENCODER)
    to_hf(passage, directory / PASSAGE_ENCODER)
    (directory / SETTINGS_FILE).write_text(strict_json.dumps(encoder.settings()))
