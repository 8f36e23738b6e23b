"""BART's registration (Lewis et al. 2020): RoBERTa's byte-level BPE vocabulary (<s>, </s>,
<mask>: §2.1 uses GPT-2's BPE), transformers' ``Bart*`` layout, denoising pretraining
(``objective=denoising``). An encoder-decoder: no classification head here (BART's own, §3.1,
pools the decoder's final eos state; not implemented), so GLUE reads its tasks as text, as for
T5 (``lit_models/families/text_to_text.py``)."""

from datamodules import tokenization
from lit_models.archs.spec import Arch, HFLayout
from lit_models.nets.bart import BartConfig, BartForConditionalGeneration, BartModel


def _stack_names(side: str, cross_attention: bool) -> dict[str, str | tuple[str, ...]]:
    """One stack's layers: our fused qkv / kv projections are their q, k, v projections."""
    layer, theirs = f"{side}.layers.{{i}}", f"{side}.layers.{{i}}"
    names = {
        f"{layer}.attention.qkv": tuple(f"{theirs}.self_attn.{p}_proj" for p in "qkv"),
        f"{layer}.attention.out": f"{theirs}.self_attn.out_proj",
        f"{layer}.attention_norm": f"{theirs}.self_attn_layer_norm",
        f"{layer}.feed_forward.linear1": f"{theirs}.fc1",
        f"{layer}.feed_forward.linear2": f"{theirs}.fc2",
        f"{layer}.ffn_norm": f"{theirs}.final_layer_norm",
    }
    if cross_attention:
        names |= {
            f"{layer}.cross_attention.q": f"{theirs}.encoder_attn.q_proj",
            f"{layer}.cross_attention.kv": tuple(f"{theirs}.encoder_attn.{p}_proj" for p in "kv"),
            f"{layer}.cross_attention.out": f"{theirs}.encoder_attn.out_proj",
            f"{layer}.cross_attention_norm": f"{theirs}.encoder_attn_layer_norm",
        }
    return names


ARCH = Arch(
    name="bart",
    config=BartConfig,
    encoder=BartModel,
    pretraining=BartForConditionalGeneration,
    tokenizer=tokenization.ROBERTA,  # fairseq's order <s>=0 <pad>=1 </s>=2 <unk>=3, then <mask>
    hf=HFLayout(
        model_type="bart",
        prefix="model.",
        names={
            "shared": "shared",
            "encoder_positions": "encoder.embed_positions",
            "decoder_positions": "decoder.embed_positions",
            "encoder_embedding_norm": "encoder.layernorm_embedding",
            "decoder_embedding_norm": "decoder.layernorm_embedding",
            **_stack_names("encoder", cross_attention=False),
            **_stack_names("decoder", cross_attention=True),
            "final_logits_bias": "final_logits_bias",
        },
        head_prefixes=("final_logits_bias", "lm_head."),
        classifier_names={},
        classes={"encoder": "BartModel", "pretraining": "BartForConditionalGeneration"},
        # the token embeddings of both stacks and the LM head are tied copies of `shared`
        skipped=r"^(encoder|decoder)\.embed_tokens\.weight$|^lm_head\.weight$",
        task_head_prefixes=("classification_head.", "qa_outputs."),
    ),
    kind="encoder-decoder",
)
