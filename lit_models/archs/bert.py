"""BERT's registration (Devlin et al. 2019): WordPiece vocabulary with [CLS]/[SEP] segments,
transformers' ``Bert*`` checkpoint layout, classification over the pooled [CLS] state."""

from datamodules import tokenization
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel
from lit_models.nets.heads import PooledClassifier

#: the encoder's modules (shared by every BERT-layout encoder: BERT, RoBERTa, ...). Our attention
#: has one fused ``qkv`` projection where BERT has separate query/key/value matrices.
ENCODER_NAMES = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.norm": "embeddings.LayerNorm",
    "encoder.layers.{i}.attention.qkv": (
        "encoder.layer.{i}.attention.self.query",
        "encoder.layer.{i}.attention.self.key",
        "encoder.layer.{i}.attention.self.value",
    ),
    "encoder.layers.{i}.attention.out": "encoder.layer.{i}.attention.output.dense",
    "encoder.layers.{i}.attention_norm": "encoder.layer.{i}.attention.output.LayerNorm",
    "encoder.layers.{i}.feed_forward.linear1": "encoder.layer.{i}.intermediate.dense",
    "encoder.layers.{i}.feed_forward.linear2": "encoder.layer.{i}.output.dense",
    "encoder.layers.{i}.ffn_norm": "encoder.layer.{i}.output.LayerNorm",
    "pooler": "pooler.dense",
}


#: §3.1: the masked-LM transform and bias (the decoder is tied to the embeddings)
MLM_HEAD_NAMES = {
    "mlm_head.dense": "cls.predictions.transform.dense",
    "mlm_head.norm": "cls.predictions.transform.LayerNorm",
    "mlm_head.bias": "cls.predictions.bias",
}


def bidirectional_absolute_only(hf_config: dict) -> str | None:
    """Why a BERT-family config has no counterpart here: relative position embeddings, or a
    decoder (``is_decoder``: causal self-attention, ``add_cross_attention``), which would load
    into our encoders, which attend both ways, with no weight amiss (None: it has one)."""
    for key in ("is_decoder", "add_cross_attention"):
        if hf_config.get(key):
            return (f"{key}=true (a decoder) is not implemented: plmbench's encoders attend both "
                    "ways; use an encoder checkpoint")
    kind = hf_config.get("position_embedding_type", "absolute")
    if kind != "absolute":
        return f"position_embedding_type {kind!r}: only absolute position embeddings are supported"
    return None


ARCH = Arch(
    name="bert",
    config=BertConfig,
    encoder=BertModel,
    pretraining=BertForPreTraining,
    #: [CLS] A [SEP] B [SEP], segment ids 1 on B (§3, Figure 2): transformers' BertTokenizer
    tokenizer=tokenization.VOCAB_TXT,
    hf=HFLayout(
        model_type="bert",
        prefix="bert.",
        names={
            **ENCODER_NAMES,
            **MLM_HEAD_NAMES,
            "nsp_head": "cls.seq_relationship",
        },
        head_prefixes=("cls.",),
        classifier_names={"out": "classifier"},
        classes={"encoder": "BertModel", "pretraining": "BertForPreTraining",
                 "mlm": "BertForMaskedLM", "classifier": "BertForSequenceClassification",
                 "multiple_choice": "BertForMultipleChoice"},
        skipped=r"(^|\.)position_ids$|^cls\.predictions\.decoder\.(weight|bias)$",
        config_only_ours=("pre_norm",),
        unsupported=bidirectional_absolute_only,
    ),
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True,
                              heads=frozenset({"mlm", "nsp"})),
    classification_head=PooledClassifier,
)


