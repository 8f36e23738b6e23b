"""ELECTRA's registration (Clark et al. 2020): BERT's WordPiece vocabulary and segments,
transformers' ``Electra*`` layout, and the released fine-tuning head (first token, dense, GELU,
out_proj).

Our pretraining net holds both encoders. Exported, it is transformers' ``ElectraForPreTraining``
(the discriminator and its head); the generator's weights, under ``generator.``, go to a file
beside it that transformers does not read (``from_hf(..., with_heads=True)`` reads them back to
continue pretraining). The generator alone exports and imports as ``ElectraForMaskedLM``.
"""

from functools import partial

from datamodules import tokenization
from lit_models.archs.bert import ENCODER_NAMES, bidirectional_absolute_only
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.electra import (
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ElectraModel,
)
from lit_models.nets.heads import FirstTokenClassifier


def _prefixed(names: str | tuple[str, ...], prefix: str) -> str | tuple[str, ...]:
    return prefix + names if isinstance(names, str) else tuple(prefix + n for n in names)


#: the encoder: BERT's, with the embeddings' projection to the hidden size and no pooler
ELECTRA_ENCODER_NAMES = {
    **{ours: theirs for ours, theirs in ENCODER_NAMES.items() if ours != "pooler"},
    "embeddings_project": "embeddings_project",
}
#: the generator's masked-LM head, as in transformers' ElectraForMaskedLM
GENERATOR_HEAD_NAMES = {
    "mlm_head.dense": "generator_predictions.dense",
    "mlm_head.norm": "generator_predictions.LayerNorm",
    "mlm_head.bias": "generator_lm_head.bias",  # its weight is tied to the token embeddings
}

ARCH = Arch(
    name="electra",
    config=ElectraConfig,
    encoder=ElectraModel,
    pretraining=ElectraForPreTraining,
    masked_lm=ElectraForMaskedLM,
    tokenizer=tokenization.VOCAB_TXT,  # the released models use BERT's uncased WordPiece
    hf=HFLayout(
        model_type="electra",
        prefix="electra.",
        names={
            **ELECTRA_ENCODER_NAMES,
            **GENERATOR_HEAD_NAMES,
            "rtd_head.dense": "discriminator_predictions.dense",
            "rtd_head.prediction": "discriminator_predictions.dense_prediction",
            # the generator inside our pretraining net (its embeddings are the discriminator's)
            **{f"generator.electra.{ours}": _prefixed(theirs, "generator.electra.")
               for ours, theirs in ELECTRA_ENCODER_NAMES.items()},
            **{f"generator.{ours}": f"generator.{theirs}"
               for ours, theirs in GENERATOR_HEAD_NAMES.items()},
        },
        head_prefixes=("discriminator_predictions.", "generator_predictions.",
                       "generator_lm_head.", "generator."),
        classifier_names={"dense": "classifier.dense", "out": "classifier.out_proj"},
        # ElectraForMultipleChoice: the first token through a sequence summary (dense, GELU)
        multiple_choice_names={"dense": "sequence_summary.summary", "out": "classifier"},
        classes={"encoder": "ElectraModel", "pretraining": "ElectraForPreTraining",
                 "mlm": "ElectraForMaskedLM", "classifier": "ElectraForSequenceClassification",
                 "multiple_choice": "ElectraForMultipleChoice"},
        skipped=r"(^|\.)position_ids$|(^|\.)generator_lm_head\.weight$",
        beside=r"^generator\.",
        task_head_prefixes=("classifier.", "qa_outputs.", "sequence_summary."),
        config_only_ours=("pre_norm",),
        unsupported=bidirectional_absolute_only,
    ),
    # the pretraining net: the generator (a masked LM) and the discriminator's head
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True, heads=frozenset({"rtd"})),
    classification_head=partial(FirstTokenClassifier, hidden_act="gelu"),
)
