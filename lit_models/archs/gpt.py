"""GPT-2's registration (Radford et al. 2019): a byte-level BPE vocabulary (§2.2) with <s>, <pad>
and </s> (inputs "<s> text </s>", pairs "<s> A </s> B </s>", one segment), transformers'
``GPT2*`` layout (its Conv1D weights stored [in, out]), causal LM pretraining
(``objective=causal_lm``), classification over the last non-pad token's state
(``GPT2ForSequenceClassification``), and the decoder-only summarization baseline of the seq2seq
family (source </s> summary)."""

import re
from dataclasses import dataclass

from torch import Tensor

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.gpt import GPTConfig, GPTLMHeadModel, GPTModel
from lit_models.nets.heads import LastTokenClassifier

#: <s>=0 <pad>=1 </s>=2 <unk>=3 (GPT-2's own vocabulary has one <|endoftext|> for all of them and
#: no pad; a byte-level vocabulary never needs unk, the trainer wants one). The class names the
#: generic fast tokenizer: transformers' GPT2Tokenizer would drop our <s> ... </s> template.
TOKENIZER = TokenizerSpec(
    "bpe",
    (("cls", "<s>"), ("pad", "<pad>"), ("sep", "</s>"), ("unk", "<unk>")),
    single="cls $A sep",
    pair="cls $A sep $B sep",
    tokenizer_class="PreTrainedTokenizerFast",
    model_input_names=("input_ids", "attention_mask"),
)

_LAYER = "decoder.layers.{i}"


#: transformers' GPT-2 weights stored [in, out] (Conv1D), where our Linear holds [out, in]
CONV1D = re.compile(r"\.(c_attn|c_proj|c_fc)\.weight$")


@dataclass(frozen=True)
class GPT2Layout(HFLayout):
    """GPT-2's checkpoints: their Conv1D weights are transposed both ways."""

    def import_weight(self, name: str, tensor: Tensor) -> Tensor:
        return tensor.t().contiguous() if CONV1D.search(name) else tensor

    def export_weight(self, name: str, tensor: Tensor) -> Tensor:
        return self.import_weight(name, tensor)


def unsupported(config: dict) -> str | None:
    """Why a GPT-2 config has no counterpart here (None: it has one)."""
    if not config.get("scale_attn_weights", True):
        return "scale_attn_weights=false (unscaled attention) is not implemented"
    if config.get("scale_attn_by_inverse_layer_idx", False):
        return "scale_attn_by_inverse_layer_idx=true is not implemented"
    if config.get("add_cross_attention", False):
        return "add_cross_attention=true (GPT-2 as a decoder of an encoder) is not implemented"
    return None


ARCH = Arch(
    name="gpt2",
    config=GPTConfig,
    encoder=GPTModel,
    pretraining=GPTLMHeadModel,
    tokenizer=TOKENIZER,
    hf=GPT2Layout(
        model_type="gpt2",
        prefix="transformer.",
        names={
            "wte": "wte",
            "wpe": "wpe",
            f"{_LAYER}.attention.qkv": "h.{i}.attn.c_attn",
            f"{_LAYER}.attention.out": "h.{i}.attn.c_proj",
            f"{_LAYER}.attention_norm": "h.{i}.ln_1",
            f"{_LAYER}.feed_forward.linear1": "h.{i}.mlp.c_fc",
            f"{_LAYER}.feed_forward.linear2": "h.{i}.mlp.c_proj",
            f"{_LAYER}.ffn_norm": "h.{i}.ln_2",
            "decoder.final_norm": "ln_f",
        },
        head_prefixes=("lm_head.",),
        classifier_names={"out": "score"},
        classes={"encoder": "GPT2Model", "pretraining": "GPT2LMHeadModel",
                 "classifier": "GPT2ForSequenceClassification"},
        # the causal-mask buffers of older checkpoints, and the LM head tied to wte
        skipped=r"(^|\.)attn\.(masked_)?bias$|^lm_head\.weight$",
        task_head_prefixes=("score.", "qa_outputs."),
        unsupported=unsupported,
    ),
    # token types, when given, are looked up in the token embeddings: no segment embeddings
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              hidden_states=True, heads=frozenset({"lm"}), cached_decoding=True),
    classification_head=LastTokenClassifier,
    kind="decoder",
)
