"""RoBERTa: BERT's encoder, pretrained differently (Liu et al. 2019, "RoBERTa: A Robustly
Optimized BERT Pretraining Approach").

The architecture is BERT-base/large (§2, §4) with three differences that the released
checkpoints fix: a byte-level BPE vocabulary of 50K units (§4.4, in the tokenizer), one segment
only (no NSP, §4.2: ``type_vocab_size`` 1), and position ids that start past the padding index,
as fairseq's ``utils.make_positions`` numbers them: the t-th non-pad token (t = 1, 2, ...) gets
position ``pad + t`` and every pad token position ``pad``. The pretraining net has only the
masked-LM head (BERT's transform + tied decoder, §3.1 of Devlin et al. 2019, always with exact
GELU as fairseq's ``RobertaLMHead``).
"""

from dataclasses import dataclass

from torch import Tensor

from lit_models.nets.bert import BertConfig, BertEmbeddings, BertModel
from lit_models.nets.masked_lm import EncoderForMaskedLM


@dataclass
class RobertaConfig(BertConfig):
    """Defaults are RoBERTa-base (§4: BERT-base sizes, 50,265 BPE units, 125M parameters)."""

    vocab_size: int = 50265
    max_position_embeddings: int = 514  # 512 positions past pad_token_id + 1
    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1

    @property
    def max_length(self) -> int:
        return self.max_position_embeddings - self.pad_token_id - 1


class RobertaEmbeddings(BertEmbeddings):
    """BERT's embeddings with positions numbered from ``pad + 1`` over the non-pad tokens."""

    def __init__(self, config: RobertaConfig):
        super().__init__(config)
        self.pad_token_id = config.pad_token_id
        self.position_embeddings.padding_idx = config.pad_token_id

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                position_ids: Tensor | None = None) -> Tensor:
        """``position_ids`` (packed rows: 0 at each example's first token) are numbered as
        fairseq numbers an example's tokens, from ``pad + 1``."""
        not_pad = input_ids.ne(self.pad_token_id)
        counted = not_pad.cumsum(1) if position_ids is None else position_ids + 1
        positions = counted * not_pad + self.pad_token_id
        if input_ids.shape[1] + self.pad_token_id >= self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence length {input_ids.shape[1]} exceeds the "
                f"{self.position_embeddings.num_embeddings - self.pad_token_id - 1} positions "
                "of max_position_embeddings past the padding index; truncate inputs"
            )
        segment = (self.token_type_embeddings.weight[0] if token_type_ids is None
                   else self.token_type_embeddings(token_type_ids))
        x = self.word_embeddings(input_ids) + segment + self.position_embeddings(positions)
        return self.dropout(self.norm(x))


class RobertaModel(BertModel):
    embeddings_class = RobertaEmbeddings


class RobertaForMaskedLM(EncoderForMaskedLM):
    """RoBERTa with its one pretraining head, ``mlm_head`` (dynamic-masking MLM, §4.1); fairseq's
    RobertaLMHead applies exact GELU whatever the encoder's activation."""

    def __init__(self, config: RobertaConfig):
        super().__init__(config, RobertaModel(config, add_pooling_layer=False), "roberta", "gelu")