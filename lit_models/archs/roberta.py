"""RoBERTa's registration (Liu et al. 2019): byte-level BPE with <s>/</s> (pairs as
"<s> A </s></s> B </s>", one segment), transformers' ``Roberta*`` layout, and the classification
head that pools <s> itself (dense, tanh, out_proj)."""

from datamodules import tokenization
from lit_models.archs.bert import ENCODER_NAMES, bidirectional_absolute_only
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.heads import FirstTokenClassifier, PooledClassifier
from lit_models.nets.roberta import RobertaConfig, RobertaForMaskedLM, RobertaModel

ARCH = Arch(
    name="roberta",
    config=RobertaConfig,
    encoder=RobertaModel,
    pretraining=RobertaForMaskedLM,
    #: fairseq's order <s>=0 <pad>=1 </s>=2 <unk>=3, then <mask>: transformers' RobertaTokenizer
    tokenizer=tokenization.VOCAB_JSON,
    hf=HFLayout(
        model_type="roberta",
        prefix="roberta.",
        names={
            **ENCODER_NAMES,
            "mlm_head.dense": "lm_head.dense",
            "mlm_head.norm": "lm_head.layer_norm",
            "mlm_head.bias": "lm_head.bias",
        },
        head_prefixes=("lm_head.",),
        classifier_names={"dense": "classifier.dense", "out": "classifier.out_proj"},
        # *ForMultipleChoice scores the pooled <s> (the pooler) with one Linear, as BERT does
        multiple_choice_names={"out": "classifier"},
        classes={"encoder": "RobertaModel", "pretraining": "RobertaForMaskedLM",
                 "mlm": "RobertaForMaskedLM", "classifier": "RobertaForSequenceClassification",
                 "multiple_choice": "RobertaForMultipleChoice"},
        skipped=r"(^|\.)position_ids$|^lm_head\.decoder\.(weight|bias)$",
        config_only_ours=("pre_norm",),
        unsupported=bidirectional_absolute_only,
    ),
    # one segment (type_vocab_size 1, §4.2): its token types are all 0
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True, heads=frozenset({"mlm"})),
    classification_head=FirstTokenClassifier,
    multiple_choice_head=PooledClassifier,
)
