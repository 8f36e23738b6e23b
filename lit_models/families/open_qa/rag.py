"""RAG: Retrieval-Augmented Generation (Lewis et al. 2020), for open-domain QA.

A DPR-style retriever p_η(z|x) (``lit_models.families.open_qa.retrieval_augmented``: the question
encoder fine-tuned, the document encoder and the index fixed, §2.4) and a BART generator p_θ(y_i|x,
z, y_<i) that reads each of the top k documents as "title / text // question" (the input RAG's
released code builds). Two marginalisations (§2.1):

- RAG-Sequence: p(y|x) ≈ Σ_z p_η(z|x) Π_i p_θ(y_i|x, z, y_<i) -- one document per answer;
- RAG-Token: p(y|x) ≈ Π_i Σ_z p_η(z|x) p_θ(y_i|x, z, y_<i) -- a document per token.

The loss is -log p(y|x) of the first reference answer (§2.4). Decoding (§2.5):

- RAG-Token: the marginalised next-token distribution p'(y_i|x, y_<i) = Σ_z p_η(z|x) p_θ(y_i|x, z,
  y_<i) is an ordinary autoregressive distribution, so ``lit_models.core.generation``'s greedy and
  beam search run over it (``RagTokenDecoding``);
- RAG-Sequence "thorough": a beam search per document gives the hypotheses Y; every y ∈ Y is scored
  under every document by a forward pass, and p(y|x) = Σ_z p_η(z|x) p_θ(y|x, z);
- RAG-Sequence "fast": no forward pass for a pair (y, z) whose beam for z did not produce y:
  p_θ(y|x, z) ≈ 0 there, so p(y|x) ≈ Σ_{z: y ∈ beam(z)} p_η(z|x) p_θ(y|x, z) ≤ thorough's.

Here each document's beam search keeps its best hypothesis (so |Y| ≤ k).
"""

from collections.abc import Mapping, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import pad_collate, token_mask
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.retrieval_augmented import QuestionsDataModule
from lit_models.archs import Model
from lit_models.core.generation import (
    GenerationConfig,
    Seq2SeqDecoding,
    beam_search,
    generate,
    greedy_search,
)
from lit_models.core.module import PlmModule
from lit_models.core.retrievers import build_corpus_of, build_retriever
from lit_models.families.open_qa.reader import Reader
from lit_models.families.open_qa.retrieval_augmented import RetrievalAugmented
from lit_models.families.open_qa.scoring import open_qa_scorer
from lit_models.nets.outputs import shift_right

DECODINGS = ("thorough", "fast")


def rag_sequence_log_likelihood(doc_logp: Tensor, token_logp: Tensor, mask: Tensor) -> Tensor:
    """log Σ_z p(z|x) Π_i p(y_i|x, z, y_<i): ``doc_logp`` [B, k], ``token_logp`` [B, k, T] the
    log-probabilities of the answer's tokens under each document, ``mask`` [B, T] its tokens."""
    return (doc_logp + (token_logp * mask[:, None]).sum(-1)).logsumexp(-1)


def rag_token_log_likelihood(doc_logp: Tensor, token_logp: Tensor, mask: Tensor) -> Tensor:
    """log Π_i Σ_z p(z|x) p(y_i|x, z, y_<i), shapes as ``rag_sequence_log_likelihood``."""
    return ((doc_logp[..., None] + token_logp).logsumexp(1) * mask).sum(-1)


def sequence_log_probs(net: nn.Module, input_ids: Tensor, attention_mask: Tensor,
                       labels: Tensor, pad: int) -> Tensor:
    """[N, T] log p_θ(y_i|x, z, y_<i) of each row's ``labels`` (0 at pads), teacher-forced."""
    decoder_input_ids = shift_right(labels, net.config.decoder_start_token_id, pad)
    hidden = net(input_ids=input_ids, attention_mask=attention_mask,
                 decoder_input_ids=decoder_input_ids).last_hidden_state
    logp = F.log_softmax(net.logits(hidden).float(), -1)
    return logp.gather(-1, labels[..., None]).squeeze(-1) * (labels != pad)


class RagTokenDecoding:
    """The marginalised next-token distribution of B questions × ``beams`` hypotheses, over one
    ``Seq2SeqDecoding`` of every (question, document, beam) row (row (b·k + z)·beams + n), for
    ``lit_models.core.generation``'s searches (which read ``prompt``, ``caches``, ``next_logits``,
    ``reorder``)."""

    def __init__(self, net: nn.Module, input_ids: Tensor, attention_mask: Tensor,
                 doc_logp: Tensor, beams: int, use_cache: bool) -> None:
        self.inner = Seq2SeqDecoding(net, input_ids, attention_mask, beams, use_cache)
        (self.B, self.k), self.beams, self.doc_logp = doc_logp.shape, beams, doc_logp
        self.caches = self.inner.caches
        self.prompt = self.inner.prompt[: self.B * beams]

    def next_logits(self, sequences: Tensor) -> Tensor:
        """log Σ_z p(z|x) p(y|x, z, y_<i) [B·beams, V] (already normalised)."""
        B, k, N = self.B, self.k, self.beams
        rows = sequences.view(B, 1, N, -1).expand(B, k, N, -1).reshape(B * k * N, -1)
        logp = F.log_softmax(self.inner.next_logits(rows), -1).view(B, k, N, -1)
        return (logp + self.doc_logp[:, :, None, None]).logsumexp(1).view(B * N, -1)

    def reorder(self, rows: Tensor) -> None:
        """Hypothesis r takes hypothesis ``rows[r]``'s place, under every document."""
        B, k, N = self.B, self.k, self.beams
        base = torch.arange(B, device=rows.device)[:, None, None]
        source = rows.view(B, 1, N) - base * N  # the beam taken, within the question
        inner = (base * k + torch.arange(k, device=rows.device)[None, :, None]) * N + source
        self.inner.reorder(inner.flatten())


def generate_rag_token(net: nn.Module, input_ids: Tensor, attention_mask: Tensor,
                       doc_logp: Tensor, cfg: GenerationConfig) -> Tensor:
    """RAG-Token decoding: ids [B, T'] after the decoder start token."""
    decoding = RagTokenDecoding(net, input_ids, attention_mask, doc_logp, cfg.num_beams,
                                cfg.use_cache)
    search = greedy_search if cfg.num_beams == 1 else beam_search
    out = search(decoding, cfg, net.config.eos_token_id, net.config.pad_token_id)
    return out[:, decoding.prompt.shape[1]:]


def hypothesis_scores(net: nn.Module, input_ids: Tensor, attention_mask: Tensor,
                      hypotheses: Tensor, k: int, pad: int) -> Tensor:
    """log p_θ(y_h|x, z) [B, H, k] of every hypothesis ``hypotheses`` [B, H, T] under every
    document (``input_ids`` [B·k, S]): thorough decoding's B·H·k forward rows."""
    B, H, T = hypotheses.shape
    inputs = input_ids.view(B, 1, k, -1).expand(B, H, k, -1).reshape(B * H * k, -1)
    mask = attention_mask.view(B, 1, k, -1).expand(B, H, k, -1).reshape(B * H * k, -1)
    labels = hypotheses[:, :, None].expand(B, H, k, T).reshape(B * H * k, T)
    return sequence_log_probs(net, inputs, mask, labels, pad).sum(-1).view(B, H, k)


def thorough_marginals(doc_logp: Tensor, scores: Tensor) -> Tensor:
    """log p(y_h|x) = log Σ_z p(z|x) p(y_h|x, z) [B, H] from ``scores`` [B, H, k]."""
    return (doc_logp[:, None] + scores).logsumexp(-1)


def fast_marginals(doc_logp: Tensor, own_scores: Tensor, hypotheses: Tensor) -> Tensor:
    """Fast decoding's log p(y_h|x) [B, k] of the hypothesis of document h (``hypotheses``
    [B, k, T], ``own_scores`` [B, k] = log p_θ(y_z|x, z)): the sum over the documents whose
    hypothesis is y_h, p_θ(y_h|x, z) taken as 0 under the others."""
    same = (hypotheses[:, :, None] == hypotheses[:, None]).all(-1)  # [B, h, z]
    terms = (doc_logp + own_scores)[:, None].expand_as(same)
    return terms.masked_fill(~same, -float("inf")).logsumexp(-1)


class LitRag(RetrievalAugmented, PlmModule):
    def __init__(self, model: Model, retriever, task: Mapping, marginalisation: str,
                 optim: Mapping, eval_splits: Sequence[str]) -> None:
        PlmModule.__init__(self, optim, model.net.config.num_hidden_layers)
        self.arch, self.net, self.tokenizer = model
        self.eval_splits = list(eval_splits)
        rag = task["rag"]
        if rag["decoding"] not in DECODINGS:
            raise PlmbenchError(f"task.rag.decoding={rag['decoding']!r}: use one of {DECODINGS}")
        self.marginalisation, self.decoding = marginalisation, rag["decoding"]
        self.attach(retriever, rag["top_k"], task["retrieve_top_k"], False, 0,
                    open_qa_scorer(task))
        self.generation = GenerationConfig(**task["generation"])
        self.sources = self.tokenizer.truncating(rag["max_length"])
        self.targets = self.tokenizer.truncating(task["target_max_length"])
        self.pad = self.net.config.pad_token_id
        self.collate = partial(pad_collate, pad_id=self.pad)

    def generator_inputs(self, questions: Sequence[str], rows) -> dict[str, Tensor]:
        """"title / text // question" of each question with each of its documents [B·k, S]."""
        titles, texts = self.passages(rows)
        k = rows.shape[1]
        sources = [f"{title} / {text} // {questions[n // k]}" if title else
                   f"{text} // {questions[n // k]}"
                   for n, (title, text) in enumerate(zip(titles, texts, strict=True))]
        batch = self.collate([{"input_ids": e.ids} for e in self.sources.encode_batch(sources)])
        batch["attention_mask"] = token_mask(batch).long()  # the decoding helpers take one
        return {name: t.to(self.device) for name, t in batch.items()}

    def training_step(self, batch: Mapping, batch_idx: int) -> Tensor:
        rows, logits = self.retrieval_logits(batch, self.corpus_k)
        doc_logp = logits.log_softmax(-1)
        inputs = self.generator_inputs(batch["question"], rows)
        (B, k) = rows.shape
        answers = [e.ids for e in self.targets.encode_batch([a[0] for a in batch["answers"]])]
        labels = self.collate([{"input_ids": ids} for ids in answers])["input_ids"]
        labels = labels.to(self.device)
        repeated = labels.repeat_interleave(k, 0)
        token_logp = sequence_log_probs(self.net, inputs["input_ids"], inputs["attention_mask"],
                                        repeated, self.pad).view(B, k, -1)
        likelihood = rag_sequence_log_likelihood if self.marginalisation == "sequence" \
            else rag_token_log_likelihood
        loss = -likelihood(doc_logp, token_logp, (labels != self.pad).float()).mean()
        self.log("train/loss", loss, prog_bar=True)
        return loss

    @torch.no_grad()
    def read(self, questions: Sequence[str], rows, scores) -> list[str]:
        inputs = self.generator_inputs(questions, rows)
        doc_logp = torch.from_numpy(scores).to(self.device).masked_fill(
            torch.from_numpy(rows < 0).to(self.device), -1e9).log_softmax(-1)
        if self.marginalisation == "token":
            ids = generate_rag_token(self.net, inputs["input_ids"], inputs["attention_mask"],
                                     doc_logp, self.generation)
        else:
            ids = self.rag_sequence(inputs, doc_logp)
        texts = self.tokenizer.backend.decode_batch(ids.tolist(), skip_special_tokens=True)
        return [t.strip() for t in texts]

    def rag_sequence(self, inputs: Mapping[str, Tensor], doc_logp: Tensor) -> Tensor:
        """The hypothesis of highest p(y|x), thorough or fast (module docstring) -> [B, T]."""
        B, k = doc_logp.shape
        ids = generate(self.arch, self.net, inputs["input_ids"], inputs["attention_mask"],
                       self.generation)
        hypotheses = ids.view(B, k, -1)
        if self.decoding == "thorough":
            marginals = thorough_marginals(doc_logp, hypothesis_scores(
                self.net, inputs["input_ids"], inputs["attention_mask"], hypotheses, k,
                self.pad))
        else:
            own = sequence_log_probs(self.net, inputs["input_ids"], inputs["attention_mask"],
                                     ids, self.pad).sum(-1).view(B, k)
            marginals = fast_marginals(doc_logp, own, hypotheses)
        best = marginals.argmax(-1)
        return hypotheses[torch.arange(B, device=best.device), best]


class RagReader(Reader):
    """The open-QA readers ``rag_sequence`` and ``rag_token`` (``marginalisation``): LitRag over
    the task's dense retriever (its question encoder a copy of the document encoder, the index
    fixed)."""

    kinds = ("encoder-decoder",)
    with_heads = True

    def __init__(self, marginalisation: str) -> None:
        self.marginalisation = marginalisation

    def build(self, cfg: Mapping, model: Model, init_from: InitFrom):
        task, net = cfg["task"], model.net
        for key, value in (("rag.max_length", task["rag"]["max_length"]),
                           ("target_max_length", task["target_max_length"])):
            if value > net.config.max_length:
                raise PlmbenchError(f"task.{key}={value} exceeds the {net.config.max_length} "
                                    f"positions of the model; set task.{key}<="
                                    f"{net.config.max_length}")
        corpus = build_corpus_of(task)
        retriever = build_retriever({**task, "retriever": "dense"}, corpus, cfg, separate=True)
        dm = QuestionsDataModule(task, retriever.encoder.tokenize_questions,
                                 cfg["seed"])
        module = LitRag(model, retriever, task, self.marginalisation, cfg["optim"],
                        dm.eval_split_names)
        return module, dm
