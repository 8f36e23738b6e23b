"""ALBERT's registration (Lan et al. 2020): a SentencePiece-style unigram vocabulary with
"[CLS] A [SEP] B [SEP]" segments (§4.1), transformers' ``Albert*`` checkpoint layout, and
classification over the pooled [CLS] state, as BERT.

transformers' ALBERT shares whole layers in ``num_hidden_groups`` groups, each group one layer
(``inner_group_num`` 1, as every released checkpoint): our ``sharing="all"`` is one group and
``"none"`` one group per layer, so ``albert_layer_groups.{i}`` is our layer i. Sharing only the
attention or only the feed-forward networks (Table 4's ablations) has no transformers layout:
such a net trains and evaluates here, and its export is refused.
"""

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.albert import AlbertConfig, AlbertForPreTraining, AlbertModel
from lit_models.nets.heads import PooledClassifier

#: SentencePiece's order in ALBERT's vocabulary: <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4
TOKENIZER = TokenizerSpec(
    "unigram",
    (("pad", "<pad>"), ("unk", "<unk>"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("mask", "[MASK]")),
    single="cls $A sep",
    pair="cls $A sep $B:1 sep:1",
    tokenizer_class="AlbertTokenizer",
    spm_preprocess=(("do_lower_case", True), ("keep_accents", False)),  # AlbertTokenizer's
)

LAYER = "encoder.albert_layer_groups.{i}.albert_layers.0."


def whole_layer_sharing(config: dict) -> str | None:
    """Why a config (transformers' config.json or ours, on export) has no counterpart."""
    if config.get("inner_group_num", 1) != 1:
        return (f"inner_group_num {config['inner_group_num']}: plmbench's ALBERT has one layer "
                "per group, as every released checkpoint")
    groups, layers = config.get("num_hidden_groups", 1), config.get("num_hidden_layers", 12)
    if groups not in (1, layers):
        return (f"num_hidden_groups {groups} of {layers} layers: plmbench shares all layers "
                "(1 group) or none (a group per layer)")
    sharing = config.get("sharing", "all")
    if sharing not in ("all", "none"):
        return (f"sharing={sharing!r} has no transformers counterpart (AlbertModel shares whole "
                "layers or nothing); train with model.sharing=all or none to export")
    return None


ARCH = Arch(
    name="albert",
    config=AlbertConfig,
    encoder=AlbertModel,
    pretraining=AlbertForPreTraining,
    tokenizer=TOKENIZER,
    hf=HFLayout(
        model_type="albert",
        prefix="albert.",
        names={
            "embeddings.word_embeddings": "embeddings.word_embeddings",
            "embeddings.position_embeddings": "embeddings.position_embeddings",
            "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
            "embeddings.norm": "embeddings.LayerNorm",
            "embeddings.projection": "encoder.embedding_hidden_mapping_in",
            "encoder.layers.{i}.attention.qkv": tuple(
                LAYER + f"attention.{m}" for m in ("query", "key", "value")),
            "encoder.layers.{i}.attention.out": LAYER + "attention.dense",
            "encoder.layers.{i}.attention_norm": LAYER + "attention.LayerNorm",
            "encoder.layers.{i}.feed_forward.linear1": LAYER + "ffn",
            "encoder.layers.{i}.feed_forward.linear2": LAYER + "ffn_output",
            "encoder.layers.{i}.ffn_norm": LAYER + "full_layer_layer_norm",
            "pooler": "pooler",
            # the masked-LM transform (H -> E) and bias; the decoder is the tied embeddings
            "mlm_head.dense": "predictions.dense",
            "mlm_head.norm": "predictions.LayerNorm",
            "mlm_head.bias": "predictions.bias",
            "sop_head": "sop_classifier.classifier",
        },
        head_prefixes=("predictions.", "sop_classifier."),
        classifier_names={"out": "classifier"},
        classes={"encoder": "AlbertModel", "pretraining": "AlbertForPreTraining",
                 "mlm": "AlbertForMaskedLM", "classifier": "AlbertForSequenceClassification",
                 "multiple_choice": "AlbertForMultipleChoice"},
        skipped=r"(^|\.)(position_ids|token_type_ids)$|^predictions\.decoder\.(weight|bias)$",
        config_only_ours=("pre_norm", "sharing"),
        unsupported=whole_layer_sharing,
    ),
    # the sentence-order head also serves NSP (Table 5's comparison)
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True,
                              heads=frozenset({"mlm", "sop", "nsp"})),
    classification_head=PooledClassifier,
)
