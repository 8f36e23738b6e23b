"""Sequence classification heads: how an encoder's output becomes label scores.

BERT (Devlin et al. 2019, §4.1): a linear layer W over C, the pooled [CLS] representation
(the pooler's tanh(W_p h_[CLS] + b_p)): scores = W Dropout(C). RoBERTa (Liu et al. 2019, as
released in fairseq's ``RobertaClassificationHead``): the pooling is part of the head:
scores = W_o Dropout(tanh(W_d Dropout(h_<s>))); ELECTRA's (Clark et al. 2020, as released) the
same with GELU for tanh. DistilBERT (Sanh et al. 2019, as released in transformers'
``DistilBertForSequenceClassification``): scores = W_o Dropout(ReLU(W_d h_[CLS])). XLNet (Yang
et al. 2019, as released): the last token's state (its <cls>) through W_s, tanh and W_o. GPT
(Radford et al. 2018, §3.3; GPT-2 as released in transformers' ``GPT2ForSequenceClassification``):
a linear layer without bias over the last token's final state, scores = W h_last. SuperGLUE's span
tasks (Wang et al. 2019, §5: WiC's marked word, WSC's noun phrase and pronoun): each span pooled by
self-attention over its tokens (Lee et al. 2017, §3, as Tenney et al. 2019 probe spans), then a
linear layer over the spans (and, for WiC, the sequence's pooled state).
"""

import torch
from torch import Tensor, nn

from lit_models.nets.blocks import activation


def _init(module: nn.Linear, std: float) -> None:
    nn.init.normal_(module.weight, std=std)
    nn.init.zeros_(module.bias)


def pooled_state(encoded) -> Tensor:
    """C [B, H]: the encoder's pooler output, h_0 when it has no pooler."""
    pooled = encoded.pooler_output
    return encoded.last_hidden_state[:, 0] if pooled is None else pooled


class PooledClassifier(nn.Module):
    """scores = W Dropout(C), C the encoder's pooler output (h_[CLS] when it has no pooler)."""

    def __init__(self, config, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(config.hidden_size, num_labels)
        _init(self.out, config.initializer_range)

    def forward(self, encoded) -> Tensor:
        return self.out(self.dropout(pooled_state(encoded)))


class FirstTokenClassifier(nn.Module):
    """scores = W_o Dropout(act(W_d Dropout(h_0))), h_0 the first token's hidden state; act is
    tanh (RoBERTa) or GELU (ELECTRA's released fine-tuning head)."""

    def __init__(self, config, num_labels: int, dropout: float, hidden_act: str = "tanh") -> None:
        super().__init__()
        self.act = torch.tanh if hidden_act == "tanh" else activation(hidden_act)
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.out = nn.Linear(config.hidden_size, num_labels)
        for linear in (self.dense, self.out):
            _init(linear, config.initializer_range)

    def forward(self, encoded) -> Tensor:
        h = self.dropout(encoded.last_hidden_state[:, 0])
        return self.out(self.dropout(self.act(self.dense(h))))


class ReluFirstTokenClassifier(nn.Module):
    """scores = W_o Dropout(ReLU(W_d h_0)), h_0 the first token's hidden state (no pooler)."""

    def __init__(self, config, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(config.hidden_size, num_labels)
        for linear in (self.dense, self.out):
            _init(linear, config.initializer_range)

    def forward(self, encoded) -> Tensor:
        h = self.dense(encoded.last_hidden_state[:, 0]).relu()
        return self.out(self.dropout(h))


class SequenceSummaryClassifier(nn.Module):
    """XLNet's (Yang et al. 2019, as released; transformers' ``SequenceSummary`` with
    summary_type "last"): scores = W_o Dropout(tanh(W_s h_last)), h_last the state of the last
    token, the <cls> XLNet appends, which the encoder gives as ``pooler_output``."""

    def __init__(self, config, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.summary = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(config.hidden_size, num_labels)
        for linear in (self.summary, self.out):
            _init(linear, config.initializer_range)

    def forward(self, encoded) -> Tensor:
        return self.out(self.dropout(torch.tanh(self.summary(encoded.pooler_output))))


class LastTokenClassifier(nn.Module):
    """scores = W h_last (no bias, no dropout), h_last the state of the last non-pad token (a
    decoder's ``pooler_output``), for decoder-only models whose last token has seen the whole
    input."""

    def __init__(self, config, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.out = nn.Linear(config.hidden_size, num_labels, bias=False)
        nn.init.normal_(self.out.weight, std=config.initializer_range)

    def forward(self, encoded) -> Tensor:
        return self.out(encoded.pooler_output)


class SpanPairClassifier(nn.Module):
    """scores = W Dropout([C;] x_1; x_2): x_k = sum_t a_t h_t over span k's tokens, a = softmax of
    w . h_t within the span (self-attentive span pooling); C the pooled state (the pooler output,
    else h_0) when ``with_pooled``. ``spans`` [B, 4] hold each row's (start, end) token indices of
    both spans, ends exclusive."""

    def __init__(self, config, num_labels: int, dropout: float, with_pooled: bool) -> None:
        super().__init__()
        self.with_pooled = with_pooled
        self.attention = nn.Linear(config.hidden_size, 1)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear((2 + with_pooled) * config.hidden_size, num_labels)
        for linear in (self.attention, self.out):
            _init(linear, config.initializer_range)

    def pool(self, hidden: Tensor, start: Tensor, end: Tensor) -> Tensor:
        """[B, H]: each row's tokens start..end-1 weighted by their softmaxed attention scores."""
        positions = torch.arange(hidden.shape[1], device=hidden.device)
        inside = (positions >= start[:, None]) & (positions < end[:, None])
        scores = self.attention(hidden).squeeze(-1).masked_fill(~inside, float("-inf"))
        return torch.einsum("bt,bth->bh", scores.softmax(-1), hidden)

    def forward(self, encoded, spans: Tensor) -> Tensor:
        hidden = encoded.last_hidden_state
        parts = [self.pool(hidden, spans[:, 0], spans[:, 1]),
                 self.pool(hidden, spans[:, 2], spans[:, 3])]
        if self.with_pooled:
            parts.insert(0, pooled_state(encoded))
        return self.out(self.dropout(torch.cat(parts, -1)))
