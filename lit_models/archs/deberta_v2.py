"""DeBERTa-v2/v3's registration (He et al. 2021; He et al. 2023): a SentencePiece unigram
vocabulary (the released ``spm.model``: [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3, [MASK] added after the
pieces, no tokenizer.json) with "[CLS] A [SEP] B [SEP]" segments, transformers' ``DebertaV2*``
layout (``model_type`` "deberta-v2", which DeBERTa-v3 and mDeBERTa-v3 checkpoints carry), and
v1's classification head (``ContextPooler``: first token, dense, GELU; then ``classifier``).

The released checkpoints are fp16 pickles (``pytorch_model.bin``); their tensors are copied into
our float32 parameters. They also hold the pretraining heads transformers has no class for (the
generator's ``lm_predictions`` and the discriminator's ``mask_predictions``): kept out of an
encoder, as transformers does.
"""

from dataclasses import dataclass
from functools import partial

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, Capabilities, HFLayout, NameTable
from lit_models.nets.deberta_v2 import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Model
from lit_models.nets.heads import FirstTokenClassifier

#: the released spm.model's order; [MASK] follows the pieces
TOKENIZER = TokenizerSpec(
    "unigram",
    (("pad", "[PAD]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("unk", "[UNK]"), ("mask", "[MASK]")),
    single="cls $A sep",
    pair="cls $A sep $B:1 sep:1",
    tokenizer_class="DebertaV2Tokenizer",
)

LAYER = "encoder.layer.{i}."
ENCODER_NAMES = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.norm": "embeddings.LayerNorm",
    "encoder.rel_embeddings": "encoder.rel_embeddings",
    "encoder.rel_norm": "encoder.LayerNorm",
    "encoder.conv.conv": "encoder.conv.conv",
    "encoder.conv.norm": "encoder.conv.LayerNorm",
    "encoder.layers.{i}.attention.qkv": tuple(
        LAYER + f"attention.self.{m}_proj" for m in ("query", "key", "value")),
    "encoder.layers.{i}.attention.pos_key_proj": LAYER + "attention.self.pos_key_proj",
    "encoder.layers.{i}.attention.pos_query_proj": LAYER + "attention.self.pos_query_proj",
    "encoder.layers.{i}.attention.out": LAYER + "attention.output.dense",
    "encoder.layers.{i}.attention_norm": LAYER + "attention.output.LayerNorm",
    "encoder.layers.{i}.feed_forward.linear1": LAYER + "intermediate.dense",
    "encoder.layers.{i}.feed_forward.linear2": LAYER + "output.dense",
    "encoder.layers.{i}.ffn_norm": LAYER + "output.LayerNorm",
}
#: BERT's MLM transform and bias (the decoder is tied to the token embeddings), under
#: transformers' ``legacy`` names or the released ``lm_predictions`` ones
MLM_HEAD_NAMES = {
    True: {"mlm_head.dense": "cls.predictions.transform.dense",
           "mlm_head.norm": "cls.predictions.transform.LayerNorm",
           "mlm_head.bias": "cls.predictions.bias"},
    False: {"mlm_head.dense": "lm_predictions.lm_head.dense",
            "mlm_head.norm": "lm_predictions.lm_head.LayerNorm",
            "mlm_head.bias": "lm_predictions.lm_head.bias"},
}


@dataclass(frozen=True)
class DebertaV2Layout(HFLayout):
    """The MLM head's names follow the config's ``legacy`` (transformers' switch)."""

    def names_of(self, config) -> NameTable:
        return {**self.names, **MLM_HEAD_NAMES[bool(getattr(config, "legacy", True))]}


def unsupported(hf_config: dict) -> str | None:
    if hf_config.get("embedding_size", hf_config.get("hidden_size")) != hf_config.get(
            "hidden_size"):
        return "embedding_size differs from hidden_size: not implemented for DeBERTa-v2"
    heads, hidden = hf_config.get("num_attention_heads"), hf_config.get("hidden_size")
    size = hf_config.get("attention_head_size")
    if size is not None and heads and hidden and size * heads != hidden:
        return (f"attention_head_size {size} x {heads} heads differs from hidden_size "
                f"{hidden}: not implemented for DeBERTa-v2")
    return None


ARCH = Arch(
    name="deberta_v2",
    config=DebertaV2Config,
    encoder=DebertaV2Model,
    pretraining=DebertaV2ForMaskedLM,
    tokenizer=TOKENIZER,
    hf=DebertaV2Layout(
        model_type="deberta-v2",
        prefix="deberta.",
        names={**ENCODER_NAMES, **MLM_HEAD_NAMES[True]},
        head_prefixes=("cls.", "lm_predictions.", "mask_predictions."),
        classifier_names={"dense": "pooler.dense", "out": "classifier"},
        classes={"encoder": "DebertaV2Model", "pretraining": "DebertaV2ForMaskedLM",
                 "mlm": "DebertaV2ForMaskedLM",
                 "classifier": "DebertaV2ForSequenceClassification",
                 "multiple_choice": "DebertaV2ForMultipleChoice"},
        skipped=r"(^|\.)position_ids$|^cls\.predictions\.decoder\.(weight|bias)$",
        config_only_ours=("pre_norm",),
        unsupported=unsupported,
    ),
    # token types are read where type_vocab_size > 0 (the released checkpoints: 0)
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True, heads=frozenset({"mlm"})),
    classification_head=partial(FirstTokenClassifier, hidden_act="gelu"),
)
