"""REALM: Retrieval-Augmented Language Model pre-training, fine-tuned for open-domain QA (Guu et al.
2020, §2.2-2.4 and §3.4).

p(y|x) = Σ_{z ∈ top k} p(y|z, x) p(z|x) (eq. in §2.2), the sum over the top k documents of the
knowledge retriever p(z|x) (``lit_models.families.open_qa.retrieval_augmented``: MIPS over the FAISS
index, the question encoder trained through f(x, z), document vectors from the index, refreshed
every N steps). The knowledge-augmented encoder p(y|z, x) reads the concatenation [CLS] x [SEP] z
[SEP] (§2.3) and, for open-QA fine-tuning, predicts a span (§2.3):

    p(y|z, x) ∝ Σ_{s ∈ S(z, y)} exp(MLP([h_START(s); h_END(s)])),

S(z, y) the spans of z that match y. The span score here is the extractive reader's S·T_i + E·T_j
(Devlin et al. 2019 §4.2; ``lit_models.families.extractive_qa``'s start/end head) in place of
REALM's MLP over [h_start; h_end]: the same factorisation our retrieve-then-read baseline uses, so
the two readers differ only in how they are trained and combined with the retriever. The normaliser
is every span of z of at most ``max_answer_length`` tokens. A span matches y when its characters are
an answer's, case-insensitively, between word boundaries. The loss is -log p(y|x) over the training
questions that some top-k document answers (REALM §3.4 keeps those too: its gradient is zero
otherwise), gradients into the reader and the question encoder.

Prediction: the span maximising log p(z|x) + log p(span|z, x) over the top ``read_top_k`` documents
and their spans (REALM's open-QA prediction is the most probable span).
"""

from collections.abc import Mapping, Sequence
from functools import partial

import regex
import torch
from tokenizers import Tokenizer
from torch import Tensor

from datamodules.collate import pad_collate
from datamodules.init_from import InitFrom
from datamodules.retrieval_augmented import QuestionsDataModule
from datamodules.tokenization import TextTokenizer
from lit_models.archs import Model
from lit_models.core.family import check_max_length
from lit_models.core.generation import NEVER
from lit_models.core.retrievers import QUESTION_ENCODER, build_corpus_of, build_retriever
from lit_models.families.extractive_qa import LitExtractiveQA
from lit_models.families.open_qa.reader import Reader
from lit_models.families.open_qa.retrieval_augmented import RetrievalAugmented
from lit_models.families.open_qa.scoring import open_qa_scorer


def span_logits(start: Tensor, end: Tensor, context: Tensor, max_answer_length: int) -> Tensor:
    """[N, T, T] scores start_i + end_j of the spans i..j of context tokens with
    j - i < ``max_answer_length``; NEVER elsewhere."""
    positions = torch.arange(start.shape[1], device=start.device)
    width = positions[None, :] - positions[:, None]
    valid = (width >= 0) & (width < max_answer_length)
    valid = valid & context[:, :, None] & context[:, None, :]
    return (start[:, :, None] + end[:, None, :]).masked_fill(~valid, NEVER)


def reader_log_likelihood(spans: Tensor, gold: Tensor) -> Tensor:
    """log p(y|z, x) [N] = log Σ_{gold spans} exp(score) - log Σ_{spans} exp(score); about
    NEVER where no span matches."""
    return spans.masked_fill(~gold, NEVER).logsumexp((1, 2)) - spans.logsumexp((1, 2))


def marginal_log_likelihood(retrieval_logits: Tensor, reader_ll: Tensor) -> Tensor:
    """log p(y|x) [B] = log Σ_z p(z|x) p(y|z, x), p(z|x) the softmax of ``retrieval_logits``
    [B, k] over the top k, ``reader_ll`` [B, k] = log p(y|z, x)."""
    return (retrieval_logits.log_softmax(-1) + reader_ll).logsumexp(-1)


def answer_spans(text: str, answers: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of ``text`` where an answer occurs (case-insensitive, whole words)."""
    spans = []
    for answer in {a.strip() for a in answers if a.strip()}:
        pattern = regex.compile(rf"(?<!\w){regex.escape(answer)}(?!\w)", regex.IGNORECASE)
        spans += [m.span() for m in pattern.finditer(text)]
    return spans


class ReaderInputs:
    """[CLS] x [SEP] z [SEP] token batches (z cut to fit ``max_length``), the character offsets
    of z's tokens and, given answers, the matching token spans."""

    def __init__(self, tokenizer: TextTokenizer, max_length: int) -> None:
        self.backend = Tokenizer.from_str(tokenizer.backend.to_str())
        self.backend.enable_truncation(max_length, strategy="only_second")
        self.backend.no_padding()
        self.collate = partial(pad_collate, pad_id=tokenizer.special.pad,
                               pad_values={"question_mask": 0})

    def __call__(self, questions: Sequence[str], passages: Sequence[str],
                 answers: Sequence[Sequence[str]] | None = None) -> dict[str, Tensor]:
        encodings = self.backend.encode_batch(list(zip(questions, passages, strict=True)))
        batch = self.collate([{"input_ids": e.ids, "token_type_ids": e.type_ids,
                               "question_mask": [int(s == 0) for s in e.sequence_ids]}
                              for e in encodings])
        N, T = batch["input_ids"].shape
        offsets = torch.full((N, T, 2), -1, dtype=torch.long)
        for n, e in enumerate(encodings):
            context = torch.tensor([s == 1 for s in e.sequence_ids])
            offsets[n, : len(e.ids)][context] = torch.tensor(e.offsets, dtype=torch.long)[context]
        batch["offsets"] = offsets
        if answers is not None:
            gold = torch.zeros(N, T, T, dtype=torch.bool)
            for n, (text, refs) in enumerate(zip(passages, answers, strict=True)):
                starts, ends = offsets[n, :, 0], offsets[n, :, 1]
                for first, last in answer_spans(text, refs):
                    i = ((starts == first) & (ends > 0)).nonzero()
                    j = (ends == last).nonzero()
                    if len(i) and len(j):  # both ends are token boundaries inside the window
                        gold[n, i[0, 0], j[-1, 0]] = True
            batch["gold"] = gold
        return batch


class LitRealm(RetrievalAugmented, LitExtractiveQA):
    """The knowledge-augmented encoder (the run's encoder + a span head) and the retriever's
    question encoder, trained on -log p(y|x)."""

    def __init__(self, model: Model, retriever, task: Mapping, optim: Mapping,
                 eval_splits: Sequence[str]) -> None:
        decoding = {"n_best": task["n_best"], "max_answer_length": task["max_answer_length"]}
        LitExtractiveQA.__init__(self, model.net, model.arch.capabilities, eval_splits, decoding,
                                 False, optim)
        realm = task["realm"]
        self.attach(retriever, task["read_top_k"], task["retrieve_top_k"],
                    realm["update_documents"], realm["refresh_every"], open_qa_scorer(task))
        self.train_k = min(realm["top_k"], len(retriever.corpus))
        self.inputs = ReaderInputs(model.tokenizer, task["max_length"])

    def spans(self, questions: Sequence[str], rows, answers=None) -> tuple[Tensor, dict]:
        """Span scores [B * k, T, T] of each question with each of its passages ``rows``."""
        k = rows.shape[1]
        texts = self.passages(rows)[1]
        repeat = [q for q in questions for _ in range(k)]
        refs = None if answers is None else [a for a in answers for _ in range(k)]
        batch = self.inputs(repeat, texts, refs)
        start, end = self({n: t.to(self.device) for n, t in batch.items()})
        context = batch["offsets"][..., 0].to(self.device) >= 0
        return span_logits(start, end, context, self.decoding["max_answer_length"]), batch

    def training_step(self, batch: Mapping, batch_idx: int) -> Tensor:
        rows, logits = self.retrieval_logits(batch, self.train_k)
        spans, inputs = self.spans(batch["question"], rows, batch["answers"])
        gold = inputs["gold"].to(self.device)
        reader_ll = reader_log_likelihood(spans, gold).view(rows.shape)
        answerable = gold.flatten(1).any(1).view(rows.shape).any(1)
        marginal = marginal_log_likelihood(logits, reader_ll)
        loss = -marginal[answerable].mean() if answerable.any() else 0 * marginal.sum()
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/answerable", answerable.float().mean())
        return loss

    @torch.no_grad()
    def read(self, questions: Sequence[str], rows, scores) -> list[str]:
        """The span maximising log p(z|x) + log p(span|z, x) over the passages ``rows``."""
        spans, inputs = self.spans(questions, rows)
        B, k = rows.shape
        best, flat = spans.flatten(1).max(1)
        span_lp = (best - spans.logsumexp((1, 2))).view(B, k)
        doc_lp = torch.from_numpy(scores).to(span_lp).masked_fill(
            torch.from_numpy(rows < 0).to(self.device), NEVER).log_softmax(-1)
        total = (doc_lp + span_lp).masked_fill(torch.from_numpy(rows < 0).to(self.device), NEVER)
        texts = self.passages(rows)[1]
        T = spans.shape[1]
        answers = []
        for b, pick in enumerate(total.argmax(1).tolist()):
            n = b * k + pick
            i, j = divmod(int(flat[n]), T)
            first, last = int(inputs["offsets"][n, i, 0]), int(inputs["offsets"][n, j, 1])
            answers.append(texts[n][first:last] if rows[b, pick] >= 0 and first >= 0 else "")
        return answers


class RealmReader(Reader):
    """The open-QA reader ``realm``: LitRealm over the task's dense retriever (question encoder
    apart from the document encoder). ``init_from=ckpt:<REALM pre-training run>`` gives both the
    reader's encoder and the retriever's two encoders (REALM fine-tunes from both, §3.4)."""

    def build(self, cfg: Mapping, model: Model, init_from: InitFrom):
        task = cfg["task"]
        check_max_length(task, model.net)
        corpus = build_corpus_of(task)
        dense = task["dense"]
        if init_from.kind == "ckpt" and (init_from.directory() / QUESTION_ENCODER).is_dir():
            # a REALM pre-training run: its retriever too (§3.4)
            dense = {**dense, "encoder": str(init_from)}
        retriever = build_retriever({**task, "retriever": "dense", "dense": dense}, corpus, cfg,
                                    separate=True)
        dm = QuestionsDataModule(task, retriever.encoder.tokenize_questions,
                                 cfg["seed"])
        module = LitRealm(model, retriever, task, cfg["optim"], dm.eval_split_names)
        return module, dm
