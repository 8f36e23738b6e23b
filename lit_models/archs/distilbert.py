"""DistilBERT's registration (Sanh et al. 2019): BERT's WordPiece vocabulary (one segment is
all the student reads), transformers' ``DistilBert*`` layout, the classification head of
``DistilBertForSequenceClassification`` (dense, ReLU, out on h_[CLS]; there is no pooler), and
initialisation from a BERT checkpoint by taking every other layer (``init_from=ckpt:<BERT run>``
with a distilbert preset)."""

from dataclasses import replace

from datamodules import tokenization
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.distilbert import (
    DistilBertConfig,
    DistilBertForMaskedLM,
    DistilBertModel,
    student_of_bert,
)
from lit_models.nets.heads import ReluFirstTokenClassifier

LAYER = "transformer.layer.{i}."


def learned_positions_only(hf_config: dict) -> str | None:
    if hf_config.get("sinusoidal_pos_embds", False):
        return "sinusoidal_pos_embds true: only learned position embeddings are supported"
    return None


ARCH = Arch(
    name="distilbert",
    config=DistilBertConfig,
    encoder=DistilBertModel,
    pretraining=DistilBertForMaskedLM,
    tokenizer=replace(tokenization.VOCAB_TXT, tokenizer_class="DistilBertTokenizer",
                      model_input_names=("input_ids", "attention_mask")),  # no segments
    hf=HFLayout(
        model_type="distilbert",
        prefix="distilbert.",
        names={
            "embeddings.word_embeddings": "embeddings.word_embeddings",
            "embeddings.position_embeddings": "embeddings.position_embeddings",
            "embeddings.norm": "embeddings.LayerNorm",
            "encoder.layers.{i}.attention.qkv": tuple(
                LAYER + f"attention.{m}" for m in ("q_lin", "k_lin", "v_lin")),
            "encoder.layers.{i}.attention.out": LAYER + "attention.out_lin",
            "encoder.layers.{i}.attention_norm": LAYER + "sa_layer_norm",
            "encoder.layers.{i}.feed_forward.linear1": LAYER + "ffn.lin1",
            "encoder.layers.{i}.feed_forward.linear2": LAYER + "ffn.lin2",
            "encoder.layers.{i}.ffn_norm": LAYER + "output_layer_norm",
            "mlm_head.dense": "vocab_transform",
            "mlm_head.norm": "vocab_layer_norm",
            "mlm_head.bias": "vocab_projector.bias",
        },
        head_prefixes=("vocab_transform.", "vocab_layer_norm.", "vocab_projector."),
        classifier_names={"dense": "pre_classifier", "out": "classifier"},
        classes={"encoder": "DistilBertModel", "pretraining": "DistilBertForMaskedLM",
                 "mlm": "DistilBertForMaskedLM",
                 "classifier": "DistilBertForSequenceClassification",
                 "multiple_choice": "DistilBertForMultipleChoice"},
        skipped=r"(^|\.)position_ids$|^vocab_projector\.weight$",
        task_head_prefixes=("pre_classifier.", "classifier.", "qa_outputs."),
        unsupported=learned_positions_only,
    ),
    # no segment embeddings: token types are accepted and ignored
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              hidden_states=True, heads=frozenset({"mlm"})),
    classification_head=ReluFirstTokenClassifier,
    init_from_arch={"bert": student_of_bert},
)
