"""T5's registration (Raffel et al. 2020): a SentencePiece-style unigram vocabulary (§2.2) with
<pad>, </s>, <unk> and 100 sentinels <extra_id_0> .. <extra_id_99> (span corruption, §3.1.4;
inputs "text </s>", no start token), transformers' ``T5*`` layout (v1.0's ReLU feed-forward ``wi``
and v1.1's gated ``wi_0``/``wi_1``), span-corruption pretraining (``objective=span_corruption``)
and text-to-text fine-tuning: summarization (``summarize: ``) and GLUE with labels as words
(``lit_models/families/text_to_text.py``). An encoder-decoder: no classification head."""

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, HFLayout
from lit_models.nets.t5 import T5Config, T5ForConditionalGeneration, T5Model

#: SentencePiece's order in T5's vocabulary: <pad>=0 </s>=1 <unk>=2; the sentinels follow here
#: (3 .. 102; the released vocabulary puts them last, <extra_id_0> highest: plmbench finds them
#: by name)
SENTINELS = tuple(f"<extra_id_{i}>" for i in range(100))
TOKENIZER = TokenizerSpec(
    "unigram",
    (("pad", "<pad>"), ("sep", "</s>"), ("unk", "<unk>")),
    single="$A sep",
    pair="$A sep $B sep",
    tokenizer_class="T5Tokenizer",
    extra=SENTINELS,
    extra_descending=True,  # a released spiece.model: <extra_id_99> = 32000 ... <extra_id_0> last
    model_input_names=("input_ids", "attention_mask"),
)


def _layer(side: str, sublayers: tuple[str, ...], gated: bool) -> dict[str, str | tuple[str, ...]]:
    """One stack's layers: our fused projections are their q, k, v (and wi_0, wi_1)."""
    ours, theirs = f"{side}.layers.{{i}}", f"{side}.block.{{i}}.layer"
    names: dict[str, str | tuple[str, ...]] = {}
    for k, sublayer in enumerate(sublayers):
        at = f"{theirs}.{k}"
        if sublayer == "self":
            names |= {f"{ours}.attention.qkv": tuple(f"{at}.SelfAttention.{p}" for p in "qkv"),
                      f"{ours}.attention.out": f"{at}.SelfAttention.o",
                      f"{ours}.attention_norm": f"{at}.layer_norm"}
        elif sublayer == "cross":
            names |= {f"{ours}.cross_attention.q": f"{at}.EncDecAttention.q",
                      f"{ours}.cross_attention.kv": tuple(f"{at}.EncDecAttention.{p}"
                                                          for p in "kv"),
                      f"{ours}.cross_attention.out": f"{at}.EncDecAttention.o",
                      f"{ours}.cross_attention_norm": f"{at}.layer_norm"}
        else:
            wi = (f"{at}.DenseReluDense.wi_0", f"{at}.DenseReluDense.wi_1") if gated \
                else f"{at}.DenseReluDense.wi"
            names |= {f"{ours}.feed_forward.linear1": wi,
                      f"{ours}.feed_forward.linear2": f"{at}.DenseReluDense.wo",
                      f"{ours}.ffn_norm": f"{at}.layer_norm"}
    return names


def layer_names(config: T5Config) -> dict[str, str | tuple[str, ...]]:
    """Both stacks' layers, the feed-forward as the config has it (gated or not)."""
    gated = config is not None and config.gated
    return {**_layer("encoder", ("self", "ffn"), gated),
            **_layer("decoder", ("self", "cross", "ffn"), gated)}


def unsupported(config: dict) -> str | None:
    """Why a T5 config has no counterpart here (None: it has one)."""
    act = config.get("feed_forward_proj", "relu")
    known = ("relu", "gelu", "gelu_new", "silu")
    if act.removeprefix("gated-") not in known or act.count("-") > 1:
        return f"feed_forward_proj={act!r}: use relu, gelu or silu, optionally gated-"
    return None


ARCH = Arch(
    name="t5",
    config=T5Config,
    encoder=T5Model,
    pretraining=T5ForConditionalGeneration,
    tokenizer=TOKENIZER,
    hf=HFLayout(
        model_type="t5",
        prefix="",  # T5Model and T5ForConditionalGeneration share every encoder-decoder name
        names={
            "shared": "shared",
            "encoder_position_bias.buckets":
                "encoder.block.0.layer.0.SelfAttention.relative_attention_bias",
            "decoder_position_bias.buckets":
                "decoder.block.0.layer.0.SelfAttention.relative_attention_bias",
            "encoder.final_norm": "encoder.final_layer_norm",
            "decoder.final_norm": "decoder.final_layer_norm",
            "lm_head": "lm_head",
        },
        head_prefixes=("lm_head.",),
        classifier_names={},
        classes={"encoder": "T5Model", "pretraining": "T5ForConditionalGeneration"},
        # both stacks' token embeddings are tied copies of `shared`
        skipped=r"^(encoder|decoder)\.embed_tokens\.weight$",
        task_head_prefixes=("classification_head.", "qa_outputs."),
        unsupported=unsupported,
        config_names=layer_names,
        weights_config=lambda names: {"tie_word_embeddings": False} if "lm_head.weight" in names
        else {},
    ),
    kind="encoder-decoder",
)
