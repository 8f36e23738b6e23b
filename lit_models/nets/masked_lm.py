"""The masked-LM head and the pretraining net of every architecture on BERT's layout (Devlin et
al. 2019, §3.1, Task #1): BERT, RoBERTa, ALBERT, DistilBERT, ELECTRA, SpanBERT, DeBERTa and
Longformer share them, each adding its own heads."""

import torch
from torch import Tensor, nn

from lit_models.nets.blocks import activation, init_normal_
from lit_models.nets.outputs import EncoderOutput


class BertMLMHead(nn.Module):
    """Masked-LM head (§3.1 Task #1): LayerNorm(act(W h + b)) E^T + b_vocab, E the token
    embedding matrix (tied, not copied). Callers pass only the masked positions' hidden states.
    ``hidden_act`` overrides the config's activation (RoBERTa's head is always exact GELU).
    W maps the hidden size to the embeddings' width (the hidden size itself in BERT; ALBERT's
    factorized embedding size E, Lan et al. 2020, §3.1; ELECTRA's narrower embeddings)."""

    def __init__(self, config, word_embeddings: nn.Embedding,
                 hidden_act: str | None = None):
        super().__init__()
        width = word_embeddings.embedding_dim
        self.dense = nn.Linear(config.hidden_size, width)
        self.act = activation(hidden_act or config.hidden_act)
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.word_embeddings = word_embeddings
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: Tensor) -> Tensor:
        """[..., H] -> vocabulary logits [..., V]."""
        h = self.norm(self.act(self.dense(hidden)))
        return nn.functional.linear(h, self.word_embeddings.weight, self.bias)


class EncoderForMaskedLM(nn.Module):
    """An encoder with the masked-LM head ``mlm_head`` (§3.1): the pretraining net of every
    architecture on BERT's layout. The encoder is the attribute ``prefix`` names (transformers'
    prefix for its weights: bert, roberta, ...); ``forward`` runs the encoder only, and the
    objectives apply the heads where their losses need them. Subclasses add their other heads."""

    def __init__(self, config, encoder: nn.Module, prefix: str, mlm_act: str | None = None):
        super().__init__()
        self.config = config
        self.prefix = prefix
        self.add_module(prefix, encoder)
        self.mlm_head = BertMLMHead(config, encoder.embeddings.word_embeddings, mlm_act)
        # the head only: it also holds the (already initialised) shared token embeddings
        for module in (self.mlm_head.dense, self.mlm_head.norm):
            init_normal_(module, config.initializer_range)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
        **inputs: Tensor,
    ) -> EncoderOutput:
        """The encoder's output; ``inputs`` are the encoder's own (Longformer's global mask)."""
        encoder = getattr(self, self.prefix)
        return encoder(input_ids, attention_mask, token_type_ids,
                       output_hidden_states=output_hidden_states, **inputs)
