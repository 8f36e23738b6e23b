"""REALM pre-training: the masked language model with a knowledge retriever (Guu et al. 2020,
§2.2-2.4, §3.1-3.4).

p(y|x) = Σ_{z ∈ top k} p(y|z, x) p(z|x) (§2.2). x is a sentence of the knowledge corpus with one
salient span masked (§3.4; ``lit_models.objectives.salient_span``), z a passage of that corpus
(DPR's 100-word passages, ``retrieval.passages``). The knowledge retriever p(z|x) is the softmax
of f(x, z) = Embed_input(x)ᵀ Embed_doc(z) over the top k of a maximum inner product search
(``lit_models.families.open_qa.retrieval_augmented``: FAISS, ``retrieval.index``), the query
encoder reading x
with its span masked. The knowledge-augmented encoder reads [CLS] x [SEP] z [SEP] (REALM's code,
featurization.featurize_query_and_docs, gives it z's body without the title) and predicts the
masked tokens: p(y|z, x) = Π_j p(y_j|z, x) (§2.3). The loss is -log p(y|x) (``realm``'s
``marginal_log_likelihood``), divided by the number of masked tokens as REALM's code divides its
loss (model.py, which marginalises per masked token where the paper's §2.3 takes the product;
we follow the paper). Gradients reach the query encoder through p(z|x).

§3.2 and §3.4, as implemented here:
- the index holds Embed_doc vectors, re-embedded and rebuilt every ``refresh_every`` steps
  (REALM: asynchronously, by a parallel job, about every 500 steps; here synchronously between
  two steps, ``IndexRefresh``). With ``update_documents`` (the paper: "once the top k documents
  have been retrieved, we recompute p(z|x) and its gradient using the fresh θ", and its code
  trains the document embedder) the top k are re-embedded with gradients; without, the
  document encoder stays frozen and f(x, z) reads the index's vectors;
- the null document ∅ (an empty passage) is always one of the k candidates, so a sentence
  that needs no retrieval can put its mass there (§3.4 "Null document");
- the passage x was taken from is never retrieved (§3.4 "Prohibiting trivial retrievals");
- the retriever is warm-started from ICT (§3.4; ``task.dense.encoder=ckpt:<ict run>``,
  conf/task/retrieval/ict_squad.yaml) or any encoder checkpoint; the knowledge-augmented
  encoder is the run's model (``init_from``).

The search uses the query vector of the training step (dropout included); f(x, z) is then
recomputed with gradients. Eval metrics per masked token (a fixed mask per held-out sentence):
``mlm_loss`` = -log p(y|x), ``retrieval_utility`` = log p(y|x) - log p(y|∅, x) (REALM's code
records it per masked token; §4.4 defines RU per document), ``retrieval_entropy`` (nats, of
p(z|x) over the k candidates) and ``index_refreshes``. The export holds the knowledge-augmented
encoder (``<run dir>/model``) and the retriever's two encoders beside it, which open-QA fine-tuning
reads (``task.reader=realm init_from=ckpt:<run dir>``).
"""

import json
from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np
import torch
from torch import Tensor, nn
from torchmetrics import MeanMetric

from datamodules.collate import (
    IGNORE_INDEX,
    at_positions,
    encoder_inputs,
    label_positions,
    pad_collate,
)
from datamodules.errors import PlmbenchError
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.realm_pretrain import MaskedSentencesDataModule
from datamodules.tokenization import TextTokenizer
from lit_models.archs import Model
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.module import PlmModule
from lit_models.core.retrievers import build_corpus_of, build_retriever
from lit_models.families.bi_encoder import save_bi_encoder
from lit_models.families.open_qa.realm import marginal_log_likelihood
from lit_models.families.open_qa.retrieval_augmented import RetrievalAugmented
from lit_models.families.pretrain import build_objective
from lit_models.interop.hf import to_hf
from lit_models.metrics import exact_total
from lit_models.objectives.base import ExampleRandomness, perplexity
from lit_models.objectives.salient_span import SalientSpanMasking, find_all, token_span
from retrieval.ict import sentences
from retrieval.passages import corpus_fingerprint

EVAL_METRICS = ("mlm_loss", "retrieval_utility", "retrieval_entropy")


def masked_sentences(texts: Sequence[str], rows: Sequence[int], find, reader, query
                     ) -> list[dict]:
    """Per sentence of the passages ``texts`` (corpus ``rows``) with a salient span that both
    tokenizers keep: the reader's ``input_ids`` ([CLS] x [SEP]) and ``spans``, the query
    encoder's ``query_ids`` and ``query_spans`` (flat token bounds, the i-th of each the same
    characters) and the ``source`` row. Sentences without one are skipped, as REALM does."""
    found = [(row, s) for row, text in zip(rows, texts, strict=True) for s in sentences(text)]
    texts_ = [s for _, s in found]
    examples = []
    for (row, _), spans, r, q in zip(found, find_all(find, texts_),
                                     reader.encode_batch(texts_), query.encode_batch(texts_),
                                     strict=True):
        pairs = [(token_span(r, s), token_span(q, s)) for s in spans]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if pairs:
            examples.append({"input_ids": r.ids, "spans": [i for a, _ in pairs for i in a],
                             "query_ids": q.ids, "query_spans": [i for _, b in pairs for i in b],
                             "source": int(row)})
    return examples


def collate(examples: list[dict], randomness: ExampleRandomness, mask_id: int, query_pad: int,
            query_mask_id: int) -> dict:
    """One span per example drawn (an example's ``mask_seed`` fixes it) and masked in both the
    reader's and the query encoder's tokens: ``input_ids`` (+ masks) are the query encoder's,
    padded; ``x_ids`` / ``x_labels`` the reader's [CLS] x [SEP] lists; ``source`` the rows."""
    query, x_ids, x_labels = [], [], []
    for example in examples:
        rng = randomness.rng(example)
        i = 2 * rng.randrange(len(example["spans"]) // 2)
        (s, e), (qs, qe) = example["spans"][i:i + 2], example["query_spans"][i:i + 2]
        ids = list(example["input_ids"])
        labels = [IGNORE_INDEX] * len(ids)
        labels[s:e], ids[s:e] = ids[s:e], [mask_id] * (e - s)
        q = list(example["query_ids"])
        q[qs:qe] = [query_mask_id] * (qe - qs)
        query.append({"input_ids": q})
        x_ids.append(ids)
        x_labels.append(labels)
    batch = pad_collate(query, query_pad)
    batch.update(x_ids=x_ids, x_labels=x_labels,
                 source=torch.tensor([e["source"] for e in examples]))
    return batch


class LitRealmPretrain(RetrievalAugmented, PlmModule):
    """The knowledge-augmented encoder (the run's net with its MLM head) and the retriever,
    trained on -log p(y|x) per masked token."""

    def __init__(self, net: nn.Module, tokenizer: TextTokenizer, retriever, task: Mapping,
                 optim: Mapping, eval_splits: Sequence[str]) -> None:
        PlmModule.__init__(self, optim, net.config.num_hidden_layers)
        self.net = net
        self.eval_splits = list(eval_splits)
        realm = task["realm"]
        self.attach(retriever, realm["top_k"], realm["top_k"], realm["update_documents"],
                    realm["refresh_every"], "string")
        self.null_document = realm["null_document"]
        self.documents_k = min(realm["top_k"] - int(self.null_document), len(retriever.corpus))
        if self.documents_k < 1:
            raise PlmbenchError(f"task.realm.top_k={realm['top_k']} leaves no retrieved "
                                "document beside the null document; raise it (REALM: 8)")
        self.max_length = task["max_length"]
        self.backend = tokenizer.truncating(task["max_length"])
        self.backend.no_padding()
        self.sep, self.pad = tokenizer.special.sep, tokenizer.special.pad
        self.eval_means = nn.ModuleList(
            nn.ModuleDict({name: exact_total(MeanMetric()) for name in EVAL_METRICS})
            for _ in eval_splits)

    def candidates(self, query: Tensor, sources: Tensor) -> np.ndarray:
        """Corpus rows [B, k] of the top k by MIPS, the source passage of each x left out (§3.4);
        -1 where the corpus has fewer."""
        vectors = query.detach().float().cpu().numpy()
        found, _ = self.retriever.index.search(vectors, self.documents_k + 1)
        rows = np.full((len(found), self.documents_k), -1, dtype=np.int64)
        for b, (ranked, source) in enumerate(zip(found, sources.tolist(), strict=True)):
            kept = [r for r in ranked if r >= 0 and r != source][:self.documents_k]
            rows[b, :len(kept)] = kept
        return rows

    def null_scores(self, query: Tensor) -> Tensor:
        """f(x, ∅) [B, 1]: the query vectors against the embedding of the empty passage."""
        encoder = self.bi_encoder
        tokens = {n: t.to(self.device) for n, t in encoder.tokenize_passages([""], [""]).items()}
        with torch.set_grad_enabled(self.update_documents and torch.is_grad_enabled()):
            null = encoder.encode_passages(tokens)  # [1, H]
        return query @ null.T

    def reader_log_likelihood(self, batch: Mapping, texts: Sequence[str]) -> Tensor:
        """log p(y|z, x) [B, k] = Σ_j log p(y_j|z, x) over x's masked tokens, reading
        [CLS] x [SEP] z [SEP] for the k passage ``texts`` of each x (row-major)."""
        B = len(batch["x_ids"])
        k = len(texts) // B
        items = []
        for n, encoding in enumerate(self.backend.encode_batch(list(texts),
                                                               add_special_tokens=False)):
            x, labels = batch["x_ids"][n // k], batch["x_labels"][n // k]
            z = encoding.ids[:max(self.max_length - len(x) - 1, 0)]
            items.append({"input_ids": x + z + [self.sep],
                          "token_type_ids": [0] * len(x) + [1] * (len(z) + 1),
                          "labels": labels + [IGNORE_INDEX] * (len(z) + 1)})
        inputs = {n: t.to(self.device) for n, t in pad_collate(items, self.pad).items()}
        hidden = self.net(**encoder_inputs(inputs)).last_hidden_state
        positions = label_positions(inputs)
        log_probs = self.net.mlm_head(at_positions(hidden, positions)).log_softmax(-1)
        targets = inputs["labels"].flatten().index_select(0, positions)
        token_ll = log_probs.gather(1, targets[:, None]).squeeze(1)
        rows = torch.div(positions, inputs["input_ids"].shape[1], rounding_mode="floor")
        return torch.zeros(B * k, device=self.device).index_add(0, rows, token_ll).view(B, k)

    def marginal(self, batch: Mapping) -> tuple[Tensor, Tensor, Tensor]:
        """(log p(y|x) [B], log p(y|z, x) [B, k], f(x, z) [B, k]); with the null document
        first among the k."""
        query = self.bi_encoder.encode_questions(batch)  # [B, H], with gradients
        rows = self.candidates(query, batch["source"])
        logits = self.document_scores(query, rows)
        texts = self.passages(rows)[1]
        if self.null_document:
            logits = torch.cat([self.null_scores(query), logits], 1)
            k = rows.shape[1]
            texts = [t for b in range(len(rows)) for t in ["", *texts[b * k:(b + 1) * k]]]
        reader_ll = self.reader_log_likelihood(batch, texts)
        return marginal_log_likelihood(logits, reader_ll), reader_ll, logits

    @staticmethod
    def masked_tokens(batch: Mapping) -> int:
        return sum(sum(label != IGNORE_INDEX for label in row) for row in batch["x_labels"])

    def training_step(self, batch: Mapping, batch_idx: int) -> Tensor:
        marginal, _, _ = self.marginal(batch)
        loss = -marginal.sum() / self.masked_tokens(batch)
        self.log("train/mlm_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: Mapping, batch_idx: int, dataloader_idx: int = 0) -> None:
        means = self.eval_means[dataloader_idx]
        marginal, reader_ll, logits = self.marginal(batch)
        n = self.masked_tokens(batch)
        means["mlm_loss"].update(-marginal.sum() / n, weight=n)
        if self.null_document:
            means["retrieval_utility"].update((marginal - reader_ll[:, 0]).sum() / n, weight=n)
        p = logits.softmax(-1)
        entropy = -torch.xlogy(p, p).sum(-1)
        means["retrieval_entropy"].update(entropy.mean(), weight=len(entropy))

    def on_validation_epoch_end(self) -> None:
        for split, means in zip(self.eval_splits, self.eval_means, strict=True):
            if not self.trainer.sanity_checking:
                values = {name: float(m.compute()) for name, m in means.items()
                          if m.update_called}
                values["perplexity"] = perplexity(values["mlm_loss"])
                self.record_metrics(split, values | {"index_refreshes": self.refreshes})
            for metric in means.values():
                metric.reset()


def split_rows(corpus, task: Mapping, split: str) -> list[int]:
    """The corpus rows whose sentences make ``split``: the last ``eval_documents`` articles for
    the held-out split, the first ``max_train_samples`` of the others for training."""
    articles: dict[str, list[int]] = {}
    for row, passage in enumerate(corpus["id"]):
        articles.setdefault(passage.rpartition(":")[0], []).append(row)
    groups = list(articles.values())
    held = task["eval_documents"]
    if len(groups) <= held:
        raise PlmbenchError(f"task {task['name']}: {len(groups)} articles leave none to train "
                            f"on after holding out eval_documents={held}; raise "
                            "task.corpus.max_documents or lower task.eval_documents")
    chosen = groups[-held:] if split == task["splits"]["eval"][0] else \
        groups[:-held][:task.get("max_train_samples")]
    return [row for group in chosen for row in group]


class RealmPretraining(TaskFamily):
    """REALM pre-training on a knowledge corpus's own sentences (``conf/task/pretrain/realm_*``,
    with ``objective=ssm``)."""

    with_heads = True
    pretrains = True

    def vocabulary_corpus(self, task):
        corpus = build_corpus_of(task)
        return json.dumps(["realm", corpus_fingerprint(corpus)]), iter(corpus["text"])

    def build(self, cfg, model: Model, init_from: InitFrom):
        task, (_, net, tokenizer) = cfg["task"], model
        check_max_length(task, net)
        objective = build_objective(cfg["objective"], model)
        if not isinstance(objective, SalientSpanMasking) or objective.fallback != "drop":
            raise PlmbenchError(f"task {task['name']} masks one salient span per sentence "
                                "(REALM §3.4); add objective=ssm (with objective.fallback=drop)")
        corpus = build_corpus_of(task)
        retriever = build_retriever({**task, "retriever": "dense"}, corpus, cfg, separate=True)
        encoder = retriever.encoder
        reader = tokenizer.truncating(task["max_query_length"])
        query = encoder.tokenizer.truncating(encoder.max_question_length)
        for backend in (reader, query):
            backend.no_padding()

        def examples(split: str) -> list[dict]:
            rows = split_rows(corpus, task, split)
            made = masked_sentences(corpus[rows]["text"] if rows else [], rows, objective.find,
                                    reader, query)
            cap = task.get("max_eval_samples") if split != task["splits"].get("train") else None
            return made[:cap] if cap else made

        dm = MaskedSentencesDataModule(
            task, partial(collate, randomness=ExampleRandomness(cfg["seed"]),
                          mask_id=tokenizer.special.mask, query_pad=encoder.tokenizer.special.pad,
                          query_mask_id=encoder.tokenizer.special.mask),
            examples, corpus_fingerprint(corpus), cfg["seed"])
        module = LitRealmPretrain(net, tokenizer, retriever, task, cfg["optim"],
                                  dm.eval_split_names)
        return module, dm

    def export(self, module: LitRealmPretrain, model: Model, run_dir, cfg) -> None:
        """The knowledge-augmented encoder as ``<run dir>/model`` and the retriever's question
        and passage encoders beside it (``lit_models.core.retrievers``' layout)."""
        to_hf(model, run_dir / EXPORT_DIR)
        save_bi_encoder(module.bi_encoder, run_dir / EXPORT_DIR)
