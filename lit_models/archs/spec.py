"""What an architecture registers: one ``Arch`` per architecture, in ``lit_models/archs/<arch>.py``.

``build.py``, ``hf.py`` and the LightningModules ask the registration (``get_arch``) for
everything architecture-specific; none of them names an architecture.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from torch import nn

from datamodules.tokenization import TokenizerSpec

#: our parameter names -> transformers' names: "{i}" is the layer index; a tuple is one of our
#: tensors made of several of theirs, concatenated along dim 0 (e.g. a fused qkv projection)
NameTable = Mapping[str, str | tuple[str, ...]]


@dataclass(frozen=True)
class HFLayout:
    """How ``transformers`` lays out this architecture's checkpoints (config.json + weights)."""

    model_type: str  # config.json "model_type"
    prefix: str  # the encoder's prefix inside transformers' task models, e.g. "bert."
    names: NameTable  # encoder and pretraining-head modules; head names are not prefixed
    head_prefixes: tuple[str, ...]  # transformers' pretraining-head prefixes, e.g. ("cls.",)
    classifier_names: Mapping[str, str]  # our classification-head modules -> theirs
    #: "encoder" | "pretraining" | "mlm" | "classifier" | "qa" | "multiple_choice" -> class
    classes: Mapping[str, str]
    skipped: str  # regex of checkpoint entries that are no weights of their own (buffers, ties)
    task_head_prefixes: tuple[str, ...] = ("classifier.", "qa_outputs.")  # ignored on import
    optional: tuple[str, ...] = ()  # encoder weights a checkpoint may lack (kept as initialised)
    #: regex of transformers' names of pretraining weights its class has no place for (ELECTRA's
    #: generator, SpanBERT's span boundary head): exported beside the checkpoint's weights
    #: (``lit_models/core/hf.py``'s ``BESIDE_FILE``), so transformers loads no unexpected key
    beside: str = ""
    config_only_ours: tuple[str, ...] = ()  # our config fields transformers has no key for
    unsupported: Callable[[dict], str | None] = lambda hf_config: None  # why we cannot load it
    #: regex of transformers' weight names stored [in, out], transposed to our Linear's [out, in]
    #: (GPT-2's Conv1D); empty: none
    transposed: str = ""
    #: entries of ``names`` that depend on the net's config (T5's gated feed-forward)
    config_names: Callable[[object], NameTable] = lambda config: {}
    #: our multiple-choice head's modules -> those of transformers' ``*ForMultipleChoice``;
    #: None: ``classifier_names`` (the same head with one output)
    multiple_choice_names: Mapping[str, str] | None = None
    #: config values a checkpoint's weight names imply beyond its config.json (T5: an lm_head of
    #: its own unties the output layer, whatever transformers 5 wrote for tie_word_embeddings)
    weights_config: Callable[[set[str]], dict] = lambda names: {}


#: what an architecture is, for the task families that can use it (``TaskFamily.kinds``): the
#: Transformers' kinds, then those of the models that came before them (``Baseline``)
TRANSFORMER_KINDS = ("encoder", "decoder", "encoder-decoder")
BASELINE_KINDS = ("word-vectors", "bilm", "bilstm")
KINDS = TRANSFORMER_KINDS + BASELINE_KINDS


@dataclass(frozen=True)
class Arch:
    """An architecture: its nets, vocabulary, checkpoint layout and classification pooling."""

    name: str  # model presets' `arch`
    config: type  # dataclass whose field names are transformers' config.json keys
    #: the backbone: encoder(config) -> output with last_hidden_state (and pooler_output); for an
    #: encoder-decoder, encoder(config)(input_ids=, attention_mask=, decoder_input_ids=) gives the
    #: decoder's last_hidden_state, as transformers' BartModel / T5Model
    encoder: type
    #: the backbone with its pretraining heads (.mlm_head, optionally .nsp_head; an
    #: encoder-decoder's language-modelling head: .encode, .decode, .logits, .new_caches)
    pretraining: type
    tokenizer: TokenizerSpec  # family, special-token roles and templates of scratch vocabularies
    hf: HFLayout
    #: (config, num_labels, dropout) -> module mapping the encoder output to label scores;
    #: None where the architecture has no classification head here
    classification_head: Callable[..., nn.Module] | None = None
    #: (config, 1, dropout) -> module scoring one (context, choice) sequence, as transformers'
    #: ``*ForMultipleChoice`` does; None: ``classification_head`` with one output
    multiple_choice_head: Callable[..., nn.Module] | None = None
    kind: str = "encoder"  # one of KINDS
    #: other architectures whose checkpoints can start this one: their name -> (their pretraining
    #: net, with_heads) -> our net (DistilBERT: every other layer of a BERT teacher)
    init_from_arch: Mapping[str, Callable[[nn.Module, bool], nn.Module]] = field(
        default_factory=dict)
    #: the net of transformers' ``classes["mlm"]`` checkpoints where that is not ``pretraining``
    #: (ELECTRA's generator); None: ``pretraining`` loads them
    masked_lm: type | None = None


@dataclass(frozen=True)
class Baseline:
    """A model family that is no Transformer (static word vectors, ELMo's biLM, the GLUE
    baselines' BiLSTMs): no sub-word vocabulary, no Hugging Face layout, no pretraining heads,
    so it is no ``Arch``. Its presets name it as ``arch``; the task families of its ``kind``
    build its nets from the preset's fields (``TaskFamily.build_net``)."""

    name: str  # model presets' `arch`
    kind: str  # one of BASELINE_KINDS
    description: str  # what it is, for listings and errors
