"""XLNet's registration (Yang et al. 2019): a Unigram (SentencePiece-like) vocabulary whose <sep>
and <cls> end a sequence ("A <sep> B <sep> <cls>", segment ids 0, 1, 2), transformers' ``XLNet*``
layout, permutation language modelling (``objective=plm``), and the sequence summary over the
last token as its classification head. Pads may sit on either side: the encoder finds each
row's last token from the attention mask, so right-padded batches score as transformers'
left-padded ones."""

from datamodules.tokenization import TokenizerSpec
from lit_models.archs.spec import Arch, Capabilities, HFLayout
from lit_models.nets.heads import SequenceSummaryClassifier
from lit_models.nets.xlnet import XLNetConfig, XLNetLMHeadModel, XLNetModel

#: SentencePiece pieces; <sep> and <cls> END a sequence, segment ids 0, 1 and 2 for <cls>, as
#: XLNetTokenizer, which pads on the left
TOKENIZER = TokenizerSpec(
    "unigram",
    (("unk", "<unk>"), ("cls", "<cls>"), ("sep", "<sep>"), ("pad", "<pad>"), ("mask", "<mask>")),
    single="$A sep cls:2",
    pair="$A sep $B:1 sep:1 cls:2",
    tokenizer_class="XLNetTokenizer",
    spm_preprocess=(("do_lower_case", False), ("keep_accents", False)),  # XLNetTokenizer's
    padding_side="left",  # its classifier reads the last position, its <cls>
)


def unsupported(hf_config: dict) -> str | None:
    if hf_config.get("bi_data"):
        return "bi_data=true is not implemented; use a checkpoint with bi_data=false"
    if hf_config.get("untie_r") is False:
        return "untie_r=false (biases shared across layers) is not implemented"
    if hf_config.get("summary_type", "last") != "last" or hf_config.get("summary_proj_to_labels"):
        return "only the sequence summary over the last token (summary_type 'last') is supported"
    return None


LAYER, THEIRS = "layers.{i}.", "layer.{i}."
ARCH = Arch(
    name="xlnet",
    config=XLNetConfig,
    encoder=XLNetModel,
    pretraining=XLNetLMHeadModel,
    tokenizer=TOKENIZER,
    hf=HFLayout(
        model_type="xlnet",
        prefix="transformer.",
        names={
            "word_embedding": "word_embedding",
            "mask_emb": "mask_emb",
            # q, k, v, o, r, r_w_bias, r_r_bias, r_s_bias, seg_embed: the same tensors
            LAYER + "attention": THEIRS + "rel_attn",
            LAYER + "attention_norm": THEIRS + "rel_attn.layer_norm",
            LAYER + "feed_forward.linear1": THEIRS + "ff.layer_1",
            LAYER + "feed_forward.linear2": THEIRS + "ff.layer_2",
            LAYER + "ffn_norm": THEIRS + "ff.layer_norm",
            "lm_bias": "lm_loss.bias",  # the LM head's weight is the tied token embeddings
        },
        head_prefixes=("lm_loss.",),
        classifier_names={"summary": "sequence_summary.summary", "out": "logits_proj"},
        classes={"encoder": "XLNetModel", "pretraining": "XLNetLMHeadModel",
                 "classifier": "XLNetForSequenceClassification",
                 "multiple_choice": "XLNetForMultipleChoice",
                 "qa": "XLNetForQuestionAnsweringSimple"},
        skipped=r"^lm_loss\.weight$",
        task_head_prefixes=("sequence_summary.", "logits_proj.", "qa_outputs.", "classifier.",
                            "start_logits.", "end_logits.", "answer_class."),
        unsupported=unsupported,
    ),
    # relative segment encodings (§2.5) read the token types; two-stream attention (§2.3)
    capabilities=Capabilities(attention_weights=True, head_mask=True,
                              token_types=True, hidden_states=True, heads=frozenset({"plm"})),
    classification_head=SequenceSummaryClassifier,
)
