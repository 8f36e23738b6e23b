"""SpanBERT's registration (Joshi et al. 2020): BERT's WordPiece vocabulary and checkpoint layout
(the released SpanBERT checkpoints are transformers ``bert`` checkpoints, and so are our exports:
the pretraining net as ``BertForMaskedLM`` plus the span boundary head under ``cls.sbo.``, which
transformers ignores), fine-tuned as BERT is."""

from datamodules import tokenization
from lit_models.archs.bert import ENCODER_NAMES, absolute_positions_only
from lit_models.archs.spec import Arch, HFLayout
from lit_models.nets.heads import PooledClassifier
from lit_models.nets.spanbert import SpanBertConfig, SpanBertForPreTraining, SpanBertModel

ARCH = Arch(
    name="spanbert",
    config=SpanBertConfig,
    encoder=SpanBertModel,
    pretraining=SpanBertForPreTraining,
    tokenizer=tokenization.BERT,  # BERT's cased WordPiece vocabulary (§4.1)
    hf=HFLayout(
        model_type="bert",
        prefix="bert.",
        names={
            **ENCODER_NAMES,
            "mlm_head.dense": "cls.predictions.transform.dense",
            "mlm_head.norm": "cls.predictions.transform.LayerNorm",
            "mlm_head.bias": "cls.predictions.bias",
            "sbo_head.position_embeddings": "cls.sbo.position_embeddings",
            "sbo_head.dense1": "cls.sbo.dense1",
            "sbo_head.norm1": "cls.sbo.LayerNorm1",
            "sbo_head.dense2": "cls.sbo.dense2",
            "sbo_head.norm2": "cls.sbo.LayerNorm2",
            "sbo_head.bias": "cls.sbo.bias",
        },
        head_prefixes=("cls.",),
        classifier_names={"out": "classifier"},
        classes={"encoder": "BertModel", "pretraining": "BertForMaskedLM",
                 "mlm": "BertForMaskedLM", "classifier": "BertForSequenceClassification"},
        skipped=r"(^|\.)position_ids$|^cls\.predictions\.decoder\.(weight|bias)$",
        config_only_ours=("pre_norm",),
        unsupported=absolute_positions_only,
    ),
    classification_head=PooledClassifier,
)
