"""DeBERTa-v2/v3's registration (He et al. 2021; He et al. 2023): a SentencePiece unigram
vocabulary (the released ``spm.model``: [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3, [MASK] added after the
pieces, no tokenizer.json) with "[CLS] A [SEP] B [SEP]" segments, transformers' ``DebertaV2*``
layout (``model_type`` "deberta-v2", which DeBERTa-v3 and mDeBERTa-v3 checkpoints carry), and
v1's classification head (``ContextPooler``: first token, dense, GELU; then ``classifier``).

The released checkpoints are fp16 pickles (``pytorch_model.bin``); their tensors are copied into
our float32 parameters. They also hold the pretraining heads transformers has no class for (the
generator's ``lm_predictions`` and the discriminator's ``mask_predictions``): kept out of an
encoder, as transformers does.

Our pretraining net is DeBERTa-v3's (``nets/deberta_rtd.py``: generator, discriminator, RTD head,
gradient-disentangled embeddings). transformers has no class for it: exported, its discriminator
is what ``DebertaV2Model`` loads (token embeddings E_D = E_G + E_Δ), named
``DebertaV2ForPreTraining`` in config.json's ``architectures``; the generator, the RTD head and
the residual E_Δ go to a file beside it (``from_hf(..., with_heads=True)`` reads them back to
continue pretraining). A discriminator alone (a released checkpoint) starts the net with
E_G = E_D and E_Δ = 0. The generator alone exports and imports as ``DebertaV2ForMaskedLM``.
"""

from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor, nn

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, Capabilities, HFLayout, NameTable
from lit_models.nets.deberta_rtd import DebertaV3ForPreTraining
from lit_models.nets.deberta_v2 import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Model
from lit_models.nets.heads import FirstTokenClassifier

#: the released spm.model's order; [MASK] follows the pieces
TOKENIZER = TokenizerSpec(
    "unigram",
    (("pad", "[PAD]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("unk", "[UNK]"), ("mask", "[MASK]")),
    single="cls $A sep",
    pair="cls $A sep $B:1 sep:1",
    tokenizer_class="DebertaV2Tokenizer",
    spm_preprocess=(("do_lower_case", False), ("split_by_punct", False)),  # DebertaV2Tokenizer's
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


#: the discriminator's token embeddings (transformers' name, no prefix), the generator's, and
#: the residual E_Δ (ours, then as kept beside the checkpoint)
EMBEDDINGS = "embeddings.word_embeddings.weight"
GENERATOR_EMBEDDINGS = "generator.deberta." + EMBEDDINGS
DELTA, BESIDE_DELTA = "embeddings.word_embeddings.delta", "gdes.embedding_delta"


@dataclass(frozen=True)
class DebertaV2Layout(HFLayout):
    """The MLM head's names follow the config's ``legacy`` (transformers' switch); the
    pretraining net's discriminator embeddings are exported as E_G + E_Δ (module docstring)."""

    def names_of(self, config) -> NameTable:
        legacy = bool(getattr(config, "legacy", True))
        generator = {f"generator.{ours}": f"generator.{theirs}"
                     for ours, theirs in MLM_HEAD_NAMES[legacy].items()}
        return {**self.names, **MLM_HEAD_NAMES[legacy], **generator}

    def export_state(self, net: nn.Module, weights: dict[str, Tensor]) -> dict[str, Tensor]:
        if not isinstance(net, DebertaV3ForPreTraining):
            return weights
        delta = weights.pop(self.prefix + DELTA)
        weights[self.prefix + EMBEDDINGS] = weights[GENERATOR_EMBEDDINGS] + delta
        return weights | {BESIDE_DELTA: delta}

    def import_state(self, net: nn.Module, state: dict[str, Tensor]) -> dict[str, Tensor]:
        if not isinstance(net, DebertaV3ForPreTraining):
            return state
        discriminator = state.pop(EMBEDDINGS, None)
        if BESIDE_DELTA in state:
            return state | {DELTA: state.pop(BESIDE_DELTA)}
        if discriminator is None:
            return state
        return {GENERATOR_EMBEDDINGS: discriminator, **state,
                DELTA: torch.zeros_like(discriminator)}


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
    pretraining=DebertaV3ForPreTraining,
    masked_lm=DebertaV2ForMaskedLM,
    tokenizer=TOKENIZER,
    hf=DebertaV2Layout(
        model_type="deberta-v2",
        prefix="deberta.",
        names={
            **ENCODER_NAMES,
            "rtd_head.dense": "mask_predictions.dense",
            "rtd_head.norm": "mask_predictions.LayerNorm",
            "rtd_head.classifier": "mask_predictions.classifier",
            # the generator inside our pretraining net (its head: ``names_of``)
            **{f"generator.deberta.{ours}": (f"generator.deberta.{theirs}"
                                             if isinstance(theirs, str) else
                                             tuple(f"generator.deberta.{t}" for t in theirs))
               for ours, theirs in ENCODER_NAMES.items()},
        },
        head_prefixes=("cls.", "lm_predictions.", "mask_predictions.", "generator.", "gdes."),
        classifier_names={"dense": "pooler.dense", "out": "classifier"},
        # ignored on import: the released checkpoints' masked-LM head beside the discriminator
        # (where no net of ``legacy: false`` reads it) and our residual E_Δ (``import_state``)
        task_head_prefixes=("classifier.", "qa_outputs.", "lm_predictions.", "gdes."),
        classes={"encoder": "DebertaV2Model", "pretraining": "DebertaV2ForPreTraining",
                 "mlm": "DebertaV2ForMaskedLM",
                 "classifier": "DebertaV2ForSequenceClassification",
                 "multiple_choice": "DebertaV2ForMultipleChoice"},
        skipped=r"(^|\.)position_ids$|(^|\.)cls\.predictions\.decoder\.(weight|bias)$",
        beside=r"^(generator|mask_predictions|gdes)\.",
        config_only_ours=("pre_norm",),
        unsupported=unsupported,
    ),
    # token types are read where type_vocab_size > 0 (the released checkpoints: 0); the
    # pretraining net: the generator (a masked LM) and the discriminator's head
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True, heads=frozenset({"rtd"})),
    classification_head=partial(FirstTokenClassifier, hidden_act="gelu"),
)
