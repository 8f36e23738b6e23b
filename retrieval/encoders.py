"""The dense bi-encoder: a question encoder and a passage encoder, each a registered encoder net
whose token states are pooled into one vector.

Karpukhin et al. 2020 (DPR), §3.1: E_Q and E_P are two independent BERT encoders, the vector of a
text its [CLS] state (``pooling="cls"``); the similarity of question q and passage p is the dot
product sim(q, p) = E_Q(q)ᵀ E_P(p) (eq. 1), which maximum inner product search (FAISS) ranks. A
passage is encoded with its title as the first segment (DPR's "title [SEP] text"). Reimers &
Gurevych 2019 (Sentence-BERT), §3: the mean of the token states (``pooling="mean"``, padding
excluded); all-MiniLM-L6-v2 was trained that way, one encoder for both sides, with the vectors
L2-normalised (``normalize=True``: the dot product is then the cosine similarity).

The encoders are nets this layer is handed with their architecture (a ``Model``: ``lit_models``
loads them from checkpoints through the architecture registry, whose declared capabilities say
whether they read token types); ``shared=True`` uses one net for both sides (REALM's and
Sentence-BERT's choice), else the passage encoder is a separate copy. ``fingerprint`` names
what a passage vector depends on (the passage encoder's weights, the pooling, the
normalisation, the tokenizer and the passage length), so an index built with other weights is
refused.
"""

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import pad_collate, token_mask
from lit_models.archs import Model

POOLINGS = ("cls", "mean")


def pool(hidden: Tensor, attention_mask: Tensor, pooling: str) -> Tensor:
    """[B, T, H] token states -> [B, H]: the first token's state, or the mean over the tokens
    the mask keeps."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise ValueError(f"pooling {pooling!r} is not one of {POOLINGS}")


def weights_fingerprint(net: nn.Module) -> str:
    """Short hash of a net's parameters and buffers (names, shapes and values)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(net.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


class BiEncoder(nn.Module):
    """E_Q and E_P with their pooling; ``encode_questions`` / ``encode_passages`` take token
    batches (``tokenize_questions`` / ``tokenize_passages``) and keep the autograd graph, so a
    trainer (DPR, REALM, RAG) back-propagates into them."""

    def __init__(self, model: Model, passage_encoder: nn.Module | None = None,
                 pooling: str = "mean", normalize: bool = True, max_question_length: int = 64,
                 max_passage_length: int = 256) -> None:
        """``model``: the question encoder, its architecture and tokenizer; ``passage_encoder``
        another net of that architecture (None: the question encoder)."""
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling {pooling!r} is not one of {POOLINGS}")
        self.arch, self.question_encoder, tokenizer = model
        self.passage_encoder = passage_encoder if passage_encoder is not None \
            else self.question_encoder
        self.tokenizer = tokenizer
        self.pooling, self.normalize = pooling, normalize
        self.max_question_length, self.max_passage_length = max_question_length, max_passage_length
        self._questions = tokenizer.truncating(max_question_length)
        self._passages = tokenizer.truncating(max_passage_length)
        for backend in (self._questions, self._passages):
            backend.no_padding()  # a checkpoint's tokenizer.json may pad (MiniLM's: to 128)
        self.collate = partial(pad_collate, pad_id=tokenizer.special.pad)

    @classmethod
    def separate(cls, model: Model, **settings) -> "BiEncoder":
        """DPR's two encoders, both starting from ``model``'s weights."""
        return cls(model, copy.deepcopy(model.net), **settings)

    def models(self) -> tuple[Model, Model]:
        """The question and the passage encoder, each with the architecture and tokenizer."""
        return (Model(self.arch, self.question_encoder, self.tokenizer),
                Model(self.arch, self.passage_encoder, self.tokenizer))

    @property
    def shared(self) -> bool:
        return self.passage_encoder is self.question_encoder

    @property
    def dim(self) -> int:
        return self.passage_encoder.config.hidden_size

    def settings(self) -> dict:
        return {"pooling": self.pooling, "normalize": self.normalize,
                "max_question_length": self.max_question_length,
                "max_passage_length": self.max_passage_length}

    def fingerprint(self) -> str:
        """What the passage vectors depend on."""
        key = [weights_fingerprint(self.passage_encoder), self.tokenizer.fingerprint,
               self.pooling, self.normalize, self.max_passage_length]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]

    def _batch(self, encodings) -> dict[str, Tensor]:
        return self.collate([{"input_ids": e.ids, "token_type_ids": e.type_ids}
                             for e in encodings])

    def tokenize_questions(self, questions: Sequence[str]) -> dict[str, Tensor]:
        return self._batch(self._questions.encode_batch(list(questions)))

    def tokenize_passages(self, titles: Sequence[str], texts: Sequence[str]) -> dict[str, Tensor]:
        """Title and text as a pair (DPR's "title [SEP] text"); the text alone without a title."""
        pairs = [(title, text) if title else text
                 for title, text in zip(titles, texts, strict=True)]
        return self._batch(self._passages.encode_batch(pairs))

    def embed(self, net: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
        """Pooled (and, with ``normalize``, unit-length) vectors [B, H] of a token batch."""
        extra = {}
        if self.arch.capabilities.token_types:
            extra["token_type_ids"] = batch.get("token_type_ids")
        out = net(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                  **extra)
        vectors = pool(out.last_hidden_state, token_mask(batch).long(), self.pooling)
        return F.normalize(vectors, dim=-1) if self.normalize else vectors

    def encode_questions(self, batch: Mapping[str, Tensor]) -> Tensor:
        return self.embed(self.question_encoder, batch)

    def encode_passages(self, batch: Mapping[str, Tensor]) -> Tensor:
        return self.embed(self.passage_encoder, batch)

    @torch.no_grad()
    def question_vectors(self, questions: Sequence[str], batch_size: int = 128) -> Tensor:
        """float32 [N, H] vectors of ``questions``, batched, in eval mode, on the encoder's
        device."""
        device = next(self.question_encoder.parameters()).device
        was_training = self.question_encoder.training
        self.question_encoder.eval()
        out = []
        for i in range(0, len(questions), batch_size):
            batch = self.tokenize_questions(questions[i:i + batch_size])
            batch = {k: v.to(device) for k, v in batch.items()}
            out.append(self.encode_questions(batch).float().cpu())
        self.question_encoder.train(was_training)
        return torch.cat(out) if out else torch.zeros(0, self.dim)
