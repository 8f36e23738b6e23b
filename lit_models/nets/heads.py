"""Sequence classification heads: how an encoder's output becomes label scores.

BERT (Devlin et al. 2019, §4.1): a linear layer W over C, the pooled [CLS] representation
(the pooler's tanh(W_p h_[CLS] + b_p)): scores = W Dropout(C). RoBERTa (Liu et al. 2019, as
released in fairseq's ``RobertaClassificationHead``): the pooling is part of the head:
scores = W_o Dropout(tanh(W_d Dropout(h_<s>))); ELECTRA's (Clark et al. 2020, as released) the
same with GELU for tanh. DistilBERT (Sanh et al. 2019, as released in transformers'
``DistilBertForSequenceClassification``): scores = W_o Dropout(ReLU(W_d h_[CLS])). XLNet (Yang
et al. 2019, as released): the last token's state (its <cls>) through W_s, tanh and W_o. GPT
(Radford et al. 2018, §3.3; GPT-2 as released in transformers' ``GPT2ForSequenceClassification``):
a linear layer without bias over the last token's final state, scores = W h_last.
"""

import torch
from torch import Tensor, nn

from lit_models.nets.blocks import activation


def _init(module: nn.Linear, std: float) -> None:
    nn.init.normal_(module.weight, std=std)
    nn.init.zeros_(module.bias)


class PooledClassifier(nn.Module):
    """scores = W Dropout(C), C the encoder's pooler output (h_[CLS] when it has no pooler)."""

    def __init__(self, config, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(config.hidden_size, num_labels)
        _init(self.out, config.initializer_range)

    def forward(self, encoded) -> Tensor:
        pooled = encoded.pooler_output
        if pooled is None:
            pooled = encoded.last_hidden_state[:, 0]
        return self.out(self.dropout(pooled))


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
