"""Longformer's registration (Beltagy et al. 2020): RoBERTa's byte-level BPE vocabulary and
layout, plus the global projections, in transformers' ``Longformer*`` layout; classification
pools <s> as RoBERTa's head does (§6: <s> gets global attention)."""

from datamodules import tokenization
from lit_models.archs.bert import ENCODER_NAMES, bidirectional_absolute_only
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.heads import FirstTokenClassifier, PooledClassifier
from lit_models.nets.longformer import LongformerConfig, LongformerForMaskedLM, LongformerModel

ARCH = Arch(
    name="longformer",
    config=LongformerConfig,
    encoder=LongformerModel,
    pretraining=LongformerForMaskedLM,
    tokenizer=tokenization.VOCAB_JSON,  # RoBERTa's
    hf=HFLayout(
        model_type="longformer",
        prefix="longformer.",
        names={
            **ENCODER_NAMES,
            "encoder.layers.{i}.attention.global_qkv": (
                "encoder.layer.{i}.attention.self.query_global",
                "encoder.layer.{i}.attention.self.key_global",
                "encoder.layer.{i}.attention.self.value_global",
            ),
            "mlm_head.dense": "lm_head.dense",
            "mlm_head.norm": "lm_head.layer_norm",
            "mlm_head.bias": "lm_head.bias",
        },
        head_prefixes=("lm_head.",),
        classifier_names={"dense": "classifier.dense", "out": "classifier.out_proj"},
        # *ForMultipleChoice scores the pooled <s> (the pooler) with one Linear, as BERT does
        multiple_choice_names={"out": "classifier"},
        classes={"encoder": "LongformerModel", "pretraining": "LongformerForMaskedLM",
                 "mlm": "LongformerForMaskedLM",
                 "classifier": "LongformerForSequenceClassification",
                 "multiple_choice": "LongformerForMultipleChoice"},
        skipped=r"(^|\.)position_ids$|^lm_head\.decoder\.(weight|bias)$",
        config_only_ours=("pre_norm",),
        unsupported=bidirectional_absolute_only,
    ),
    capabilities=Capabilities(head_mask=True,
                              token_types=True, global_attention=True, hidden_states=True,
                              heads=frozenset({"mlm"})),
    classification_head=FirstTokenClassifier,
    multiple_choice_head=PooledClassifier,
)
