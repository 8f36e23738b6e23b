"""DeBERTa's registration (He et al. 2021): GPT-2's byte-level BPE with [CLS]/[SEP]/[MASK],
transformers' ``Deberta*`` layout (v1), and its classification head (``ContextPooler``: the
first token, dense, GELU; then ``classifier``)."""

from dataclasses import dataclass
from functools import partial

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.deberta import DebertaConfig, DebertaForMaskedLM, DebertaModel
from lit_models.nets.heads import FirstTokenClassifier

#: GPT-2's byte-level BPE with BERT's special tokens (§4.1); pairs as transformers 5's
#: DebertaTokenizer builds them
TOKENIZER = TokenizerSpec(
    "bpe",
    (("pad", "[PAD]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("unk", "[UNK]"), ("mask", "[MASK]")),
    single="cls $A sep",
    pair="cls $A sep sep $B sep",
    tokenizer_class="DebertaTokenizer",
)


@dataclass(frozen=True)
class DebertaLayout(HFLayout):
    """transformers keeps no absolute positions without position_biased_input; ours feed the
    enhanced mask decoder (the released checkpoints hold them): a checkpoint may lack them."""

    def optional(self) -> tuple[str, ...]:
        return (*super().optional(), "embeddings.position_embeddings.")


def unsupported(hf_config: dict) -> str | None:
    if hf_config.get("talking_head"):
        return "talking_head attention is not implemented; use a checkpoint without it"
    if hf_config.get("embedding_size", hf_config.get("hidden_size")) != hf_config.get(
            "hidden_size"):
        return "embedding_size differs from hidden_size: not implemented for DeBERTa"
    if hf_config.get("legacy", True) is False:
        return "legacy=false (the lm_predictions head layout) is not implemented"
    return None


LAYER = "encoder.layer.{i}."
ARCH = Arch(
    name="deberta",
    config=DebertaConfig,
    encoder=DebertaModel,
    pretraining=DebertaForMaskedLM,
    tokenizer=TOKENIZER,
    hf=DebertaLayout(
        model_type="deberta",
        prefix="deberta.",
        names={
            "embeddings.word_embeddings": "embeddings.word_embeddings",
            "embeddings.position_embeddings": "embeddings.position_embeddings",
            "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
            "embeddings.norm": "embeddings.LayerNorm",
            "encoder.rel_embeddings": "encoder.rel_embeddings",
            "encoder.layers.{i}.attention": LAYER + "attention.self",  # q_bias, v_bias
            "encoder.layers.{i}.attention.in_proj": LAYER + "attention.self.in_proj",
            "encoder.layers.{i}.attention.pos_proj": LAYER + "attention.self.pos_proj",
            "encoder.layers.{i}.attention.pos_q_proj": LAYER + "attention.self.pos_q_proj",
            "encoder.layers.{i}.attention.out": LAYER + "attention.output.dense",
            "encoder.layers.{i}.attention_norm": LAYER + "attention.output.LayerNorm",
            "encoder.layers.{i}.feed_forward.linear1": LAYER + "intermediate.dense",
            "encoder.layers.{i}.feed_forward.linear2": LAYER + "output.dense",
            "encoder.layers.{i}.ffn_norm": LAYER + "output.LayerNorm",
            # BERT's MLM transform and bias; the decoder is tied to the token embeddings
            "mlm_head.dense": "cls.predictions.transform.dense",
            "mlm_head.norm": "cls.predictions.transform.LayerNorm",
            "mlm_head.bias": "cls.predictions.bias",
        },
        head_prefixes=("cls.",),
        classifier_names={"dense": "pooler.dense", "out": "classifier"},
        classes={"encoder": "DebertaModel", "pretraining": "DebertaForMaskedLM",
                 "mlm": "DebertaForMaskedLM", "classifier": "DebertaForSequenceClassification"},
        skipped=r"(^|\.)position_ids$|^cls\.predictions\.decoder\.(weight|bias)$",
        config_only_ours=("pre_norm",),
        unsupported=unsupported,
    ),
    # token types are read where type_vocab_size > 0 (the released checkpoints: 0)
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True, heads=frozenset({"mlm"})),
    classification_head=partial(FirstTokenClassifier, hidden_act="gelu"),
)
