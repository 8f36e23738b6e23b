"""ModernBERT's registration (Warner et al. 2024), for answerdotai/ModernBERT-*, the ettin
encoders (Weller et al. 2025) and mmBERT (Marone et al. 2025), which share its architecture:
a byte-level BPE vocabulary (OLMo's, with [CLS] A [SEP] B [SEP] and no token types; mmBERT's
Gemma-2 vocabulary comes with its tokenizer.json), transformers' ``ModernBert*`` layout, and
the classification head that pools [CLS] or the mean (``classifier_pooling``).

transformers 5 writes ``layer_types`` (which layers attend globally) and ``rope_parameters``
(each kind's RoPE base) where the released config.json files have ``global_attn_every_n_layers``
and ``global_rope_theta`` / ``local_rope_theta``: both read (``config_of``); a pattern or RoPE
variant the net lacks is refused by name (``unsupported``)."""

from dataclasses import dataclass

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.modernbert import (
    ModernBertClassifier,
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertModel,
)

#: OLMo's byte-level BPE as ModernBERT extends it: [UNK] [CLS] [SEP] [PAD] [MASK] (ids 50280 to
#: 50284 in the released vocabulary), pairs as BERT's, one segment; transformers reads it with
#: PreTrainedTokenizerFast (ModernBERT's tokenizer_config.json)
TOKENIZER = TokenizerSpec(
    "bpe",
    (("unk", "[UNK]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("pad", "[PAD]"), ("mask", "[MASK]")),
    single="cls $A sep",
    pair="cls $A sep $B sep",
    tokenizer_class="PreTrainedTokenizerFast",
    model_input_names=("input_ids", "attention_mask"),
)

ENCODER_NAMES = {
    "embeddings.word_embeddings": "embeddings.tok_embeddings",
    "embeddings.norm": "embeddings.norm",
    "layers.{i}.attention_norm": "layers.{i}.attn_norm",
    "layers.{i}.attention.qkv": "layers.{i}.attn.Wqkv",  # [q heads; k heads; v heads], as ours
    "layers.{i}.attention.out": "layers.{i}.attn.Wo",
    "layers.{i}.ffn_norm": "layers.{i}.mlp_norm",
    "layers.{i}.feed_forward.linear1": "layers.{i}.mlp.Wi",  # [GELU half; gate half], as ours
    "layers.{i}.feed_forward.linear2": "layers.{i}.mlp.Wo",
    "final_norm": "final_norm",
}
GLOBAL, LOCAL = "full_attention", "sliding_attention"


def _every_n(layer_types: list[str]) -> int | None:
    """N where layer i is global exactly when i % N == 0; None where no N says so."""
    later = [i for i, kind in enumerate(layer_types) if kind == GLOBAL and i > 0]
    n = later[0] if later else max(len(layer_types), 1)
    pattern = [GLOBAL if i % n == 0 else LOCAL for i in range(len(layer_types))]
    return n if pattern == list(layer_types) else None


def unsupported(hf_config: dict) -> str | None:
    """Why a ModernBERT config has no counterpart here, or ours none in transformers (None: it
    has one)."""
    if hf_config.get("pruned_heads"):
        return ("pruned_heads: transformers' ModernBERT cannot hold a net with heads removed; "
                "export the net before pruning")
    layer_types = hf_config.get("layer_types")
    if layer_types is not None and _every_n(layer_types) is None:
        return (f"layer_types {layer_types}: plmbench's ModernBERT attends globally in every "
                "N-th layer from the first (global_attn_every_n_layers) and locally in the others")
    kinds = dict(hf_config.get("rope_parameters") or {})
    if hf_config.get("rope_scaling"):
        kinds["rope_scaling"] = hf_config["rope_scaling"]
    for kind, parameters in kinds.items():
        rope_type = (parameters or {}).get("rope_type", (parameters or {}).get("type", "default"))
        if rope_type != "default":
            return (f"{kind} has rope_type {rope_type!r}: only the default rotary embedding "
                    "(fixed base, no scaling) is implemented")
    return None


@dataclass(frozen=True)
class ModernBertLayout(HFLayout):
    """transformers 5's per-layer keys read as the released configs' (module docstring)."""

    def config_of(self, hf_config: dict) -> dict:
        values = dict(hf_config)
        if hf_config.get("layer_types") is not None:
            values["global_attn_every_n_layers"] = _every_n(hf_config["layer_types"])
        rope = hf_config.get("rope_parameters") or {}
        for kind, key in ((GLOBAL, "global_rope_theta"), (LOCAL, "local_rope_theta")):
            if (rope.get(kind) or {}).get("rope_theta") is not None:
                values[key] = rope[kind]["rope_theta"]
        return values


ARCH = Arch(
    name="modernbert",
    config=ModernBertConfig,
    encoder=ModernBertModel,
    pretraining=ModernBertForMaskedLM,
    tokenizer=TOKENIZER,
    hf=ModernBertLayout(
        model_type="modernbert",
        prefix="model.",
        names={
            **ENCODER_NAMES,
            "mlm_head.head.dense": "head.dense",
            "mlm_head.head.norm": "head.norm",
            "mlm_head.bias": "decoder.bias",  # its weight is tied to the token embeddings
        },
        head_prefixes=("head.", "decoder."),
        classifier_names={"dense": "head.dense", "norm": "head.norm", "out": "classifier"},
        classes={"encoder": "ModernBertModel", "pretraining": "ModernBertForMaskedLM",
                 "mlm": "ModernBertForMaskedLM",
                 "classifier": "ModernBertForSequenceClassification",
                 "multiple_choice": "ModernBertForMultipleChoice"},
        skipped=r"^decoder\.weight$",
        unsupported=unsupported,
        # ModernBertForTokenClassification / ForQuestionAnswering read the tokens through the
        # prediction head (dense, GELU, norm) before their Linear; plmbench's token heads do not
        token_head_classes=False,
    ),
    capabilities=Capabilities(attention_weights=True, head_mask=True, hidden_states=True,
                              heads=frozenset({"mlm"})),
    classification_head=ModernBertClassifier,
)
