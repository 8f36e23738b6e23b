"""SpanBERT's registration (Joshi et al. 2020): BERT's WordPiece vocabulary and checkpoint layout
(the released SpanBERT checkpoints are transformers ``bert`` checkpoints, and so are our exports:
the pretraining net as ``BertForMaskedLM``, its span boundary head, ``cls.sbo.``, in a file beside
it that transformers does not read), fine-tuned as BERT is."""

from dataclasses import replace

from datamodules import tokenization
from lit_models.archs import bert
from lit_models.archs.bert import ENCODER_NAMES, MLM_HEAD_NAMES
from lit_models.archs.spec import Arch, Capabilities
from lit_models.nets.heads import PooledClassifier
from lit_models.nets.spanbert import SpanBertConfig, SpanBertForPreTraining, SpanBertModel

ARCH = Arch(
    name="spanbert",
    config=SpanBertConfig,
    encoder=SpanBertModel,
    pretraining=SpanBertForPreTraining,
    tokenizer=tokenization.VOCAB_TXT,  # BERT's cased WordPiece vocabulary (§4.1)
    hf=replace(
        bert.ARCH.hf,
        names={
            **ENCODER_NAMES,
            **MLM_HEAD_NAMES,
            "sbo_head.position_embeddings": "cls.sbo.position_embeddings",
            "sbo_head.dense1": "cls.sbo.dense1",
            "sbo_head.norm1": "cls.sbo.LayerNorm1",
            "sbo_head.dense2": "cls.sbo.dense2",
            "sbo_head.norm2": "cls.sbo.LayerNorm2",
            "sbo_head.bias": "cls.sbo.bias",
        },
        classes={**bert.ARCH.hf.classes, "pretraining": "BertForMaskedLM"},
        beside=r"^cls\.sbo\.",
    ),
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True,
                              heads=frozenset({"mlm", "sbo"})),
    classification_head=PooledClassifier,
)
