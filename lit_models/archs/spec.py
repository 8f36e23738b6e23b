"""What an architecture registers, and the one interface the rest of plmbench uses its nets by.

An architecture is an ``Arch`` in ``lit_models/archs/<arch>.py`` handed to ``register_arch``
(``lit_models/archs/__init__.py`` imports the built-in ones; a plugin or a test registers its own
the same way, with a model preset on Hydra's search path). ``get_arch(name)`` finds it by the
presets' ``arch``; a run resolves it once and hands ``Model(arch, net, tokenizer)`` down: the
task family builds from it, an objective checks it, an export writes it. Nothing asks a net what
it can do (no ``hasattr`` or ``inspect.signature``): the registration declares it.

The net interface (``Capabilities`` says which optional parts an architecture has):

- ``encoder(config)`` (an encoder's also takes ``add_pooling_layer``): ``forward(input_ids,
  attention_mask=None, token_type_ids=None, output_hidden_states=False)`` ->
  ``nets.outputs.EncoderOutput`` (``last_hidden_state`` [B, T, H], ``pooler_output`` or None,
  ``hidden_states``: the embeddings' and every layer's output, the last equal to
  ``last_hidden_state``, where ``hidden_states`` is declared); ``token_type_ids`` are read only
  where ``token_types`` (segment embeddings), ``global_attention_mask`` [B, T] is taken only where
  ``global_attention``. An encoder-decoder's ``encoder(config)(input_ids, attention_mask,
  decoder_input_ids)`` gives the decoder's last hidden state, as transformers' ``BartModel``.
- ``pretraining(config)``: the backbone with the pretraining ``heads`` it declares: ``mlm``
  (``.mlm_head(states at masked positions)`` -> vocabulary scores), ``nsp`` / ``sop``
  (``.nsp_head`` / ``.sop_head`` over the pooled state), ``sbo`` (``.sbo_head``, SpanBERT),
  ``rtd`` (``.generator``, a masked-LM net, and ``.rtd_head``, ELECTRA), ``lm`` (a causal or
  sequence-to-sequence language model: ``.logits(states)`` -> vocabulary scores; an
  encoder-decoder's also ``.encode``, ``.decode``), ``plm`` (two-stream attention:
  ``forward(perm_mask=, target_mapping=)`` and ``.logits``, XLNet); ``cached_decoding``:
  ``.new_caches()`` and ``forward(..., caches=)`` reuse past keys and values.
- ``attention_weights`` (``forward(output_attentions=True)`` -> each layer's attention
  probabilities in ``attentions``) and ``head_mask`` (``forward(head_mask=)`` [L, heads]
  multiplies each head's attention probabilities, as transformers 4's ``head_mask`` did): the
  analyses' eager path (issue 22). Not declared where the ``encoder`` contract has no one stack's
  T x T maps: T5's and BART's ``encoder`` is the whole encoder-decoder, Longformer's local
  attention keeps a window per token.

Checkpoints: ``HFLayout`` maps our parameter names to transformers' (``lit_models/interop/hf.py``
reads and writes them); what renaming cannot do is a hook an architecture overrides in a
subclass in its own module (``names_of``, ``import_weight`` / ``export_weight``, ``config_of``,
``weights_config``, ``optional``, ``export_state`` / ``import_state``), so neither ``hf.py`` nor
this file changes when one is added.

``tests/contracts`` checks every declaration of every registered architecture (Hugging Face and
classifier round trips, cached decoding equal to uncached, hidden states, attention weights,
head masks): a new architecture gets those tests by registering.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from torch import Tensor, nn

from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer, TokenizerSpec

#: our parameter names -> transformers' names: "{i}" is the layer index; a tuple is one of our
#: tensors made of several of theirs, concatenated along dim 0 (e.g. a fused qkv projection)
NameTable = Mapping[str, str | tuple[str, ...]]

#: what an architecture is, for the task families that can use it (``TaskFamily.kinds``): the
#: Transformers' kinds, then those of the models that came before them (``Baseline``)
TRANSFORMER_KINDS = ("encoder", "decoder", "encoder-decoder")
BASELINE_KINDS = ("word-vectors", "bilm", "bilstm")
KINDS = TRANSFORMER_KINDS + BASELINE_KINDS
#: the pretraining heads a ``pretraining`` net may have (module docstring), as errors name them
HEADS = {"mlm": "masked-LM", "nsp": "next-sentence-prediction", "sop": "sentence-order-prediction",
         "sbo": "span boundary", "rtd": "replaced-token-detection (generator and discriminator)",
         "lm": "language-modelling", "plm": "two-stream attention (permutation LM)"}


@dataclass(frozen=True)
class Capabilities:
    """What an architecture's nets can do beyond the common interface (module docstring)."""

    token_types: bool = False  # segment embeddings: the encoder reads token_type_ids
    global_attention: bool = False  # the encoder takes a global_attention_mask (Longformer)
    hidden_states: bool = False  # output_hidden_states=True gives every layer's output
    heads: frozenset[str] = frozenset()  # the pretraining net's heads, of HEADS
    cached_decoding: bool = False  # new_caches() + forward(caches=): incremental decoding
    attention_weights: bool = False  # output_attentions=True gives each layer's (issue 22)
    head_mask: bool = False  # forward(head_mask=) masks attention heads (issue 22)

    def __post_init__(self) -> None:
        if unknown := sorted(set(self.heads) - set(HEADS)):
            raise ValueError(f"heads {unknown} are unknown: use {list(HEADS)}")

    @property
    def logits(self) -> bool:
        """Whether the pretraining net maps states to vocabulary scores with ``.logits``."""
        return bool({"lm", "plm"} & self.heads)


@dataclass(frozen=True)
class HFLayout:
    """How ``transformers`` lays out this architecture's checkpoints (config.json + weights).

    The fields are the name tables every architecture has; the methods are conversion hooks an
    architecture overrides in a subclass in its own module where its checkpoints need more than
    renaming (GPT-2's transposed Conv1D weights, T5's gated feed-forward names), so
    ``lit_models/interop/hf.py`` names no architecture."""

    model_type: str  # config.json "model_type"
    prefix: str  # the encoder's prefix inside transformers' task models, e.g. "bert."
    names: NameTable  # encoder and pretraining-head modules; head names are not prefixed
    head_prefixes: tuple[str, ...]  # transformers' pretraining-head prefixes, e.g. ("cls.",)
    classifier_names: Mapping[str, str]  # our classification-head modules -> theirs
    #: "encoder" | "pretraining" | "mlm" | "classifier" | "qa" | "multiple_choice" -> class
    classes: Mapping[str, str]
    skipped: str  # regex of checkpoint entries that are no weights of their own (buffers, ties)
    task_head_prefixes: tuple[str, ...] = ("classifier.", "qa_outputs.")  # ignored on import
    #: regex of transformers' names of pretraining weights its class has no place for (ELECTRA's
    #: generator, SpanBERT's span boundary head): exported beside the checkpoint's weights
    #: (``lit_models/interop/hf.py``'s ``BESIDE_FILE``), so transformers loads no unexpected key
    beside: str = ""
    config_only_ours: tuple[str, ...] = ()  # our config fields transformers has no key for
    unsupported: Callable[[dict], str | None] = lambda config: None  # why we cannot convert it
    #: our multiple-choice head's modules -> those of transformers' ``*ForMultipleChoice``;
    #: None: ``classifier_names`` (the same head with one output)
    multiple_choice_names: Mapping[str, str] | None = None
    #: whether transformers' token-level task classes (``*ForTokenClassification``,
    #: ``*ForQuestionAnswering``) are one Linear over the encoder's states, as plmbench's tagger
    #: and reader heads are; False: they are not, and those exports are refused
    token_head_classes: bool = True

    def names_of(self, config) -> NameTable:
        """The name table of a net of ``config`` (a hook: T5's depends on its feed-forward)."""
        return self.names

    def optional(self) -> tuple[str, ...]:
        """Prefixes of weights (transformers' names) a checkpoint may lack: kept as initialised."""
        return ("pooler.", *self.head_prefixes)

    def import_weight(self, name: str, tensor: Tensor) -> Tensor:
        """Their tensor ``name`` as our module holds it (a hook: GPT-2 transposes Conv1D)."""
        return tensor

    def export_weight(self, name: str, tensor: Tensor) -> Tensor:
        """Our tensor as their ``name`` holds it (the inverse of ``import_weight``)."""
        return tensor

    def config_of(self, hf_config: dict) -> dict:
        """config.json's values under our config's keys (a hook: ModernBERT's transformers 5
        configs state per-layer ``layer_types`` and ``rope_parameters``); called after
        ``unsupported`` has accepted it."""
        return hf_config

    def export_state(self, net: nn.Module, weights: dict[str, Tensor]) -> dict[str, Tensor]:
        """``net``'s weights under transformers' names as exported, where one of theirs is a
        function of several of ours (a hook: DeBERTa-v3's discriminator embeddings, the sum of
        the generator's and a residual of its own)."""
        return weights

    def import_state(self, net: nn.Module, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """The inverse of ``export_state``, on a checkpoint's canonical names (no encoder
        prefix) about to load into ``net``."""
        return state

    def weights_config(self, names: set[str]) -> dict:
        """Config values the checkpoint's weight names imply beyond config.json (a hook)."""
        return {}


@dataclass(frozen=True)
class Arch:
    """An architecture: its nets, vocabulary, checkpoint layout, classification pooling and what
    its nets can do."""

    name: str  # model presets' `arch`
    config: type  # dataclass whose field names are transformers' config.json keys
    encoder: type  # the backbone (module docstring)
    pretraining: type  # the backbone with its pretraining heads
    tokenizer: TokenizerSpec  # family, special-token roles and templates of scratch vocabularies
    hf: HFLayout
    capabilities: Capabilities = Capabilities()
    #: (config, num_labels, dropout) -> module mapping the encoder output to label scores;
    #: None where the architecture has no classification head here
    classification_head: Callable[..., nn.Module] | None = None
    #: (config, 1, dropout) -> module scoring one (context, choice) sequence, as transformers'
    #: ``*ForMultipleChoice`` does; None: ``classification_head`` with one output
    multiple_choice_head: Callable[..., nn.Module] | None = None
    kind: str = "encoder"  # one of TRANSFORMER_KINDS
    #: other architectures whose checkpoints can start this one: their name -> (their pretraining
    #: net, with_heads) -> our net (DistilBERT: every other layer of a BERT teacher)
    init_from_arch: Mapping[str, Callable[[nn.Module, bool], nn.Module]] = field(
        default_factory=dict)
    #: the net of transformers' ``classes["mlm"]`` checkpoints where that is not ``pretraining``
    #: (ELECTRA's generator); None: ``pretraining`` loads them
    masked_lm: type | None = None

    def __post_init__(self) -> None:
        if self.kind not in TRANSFORMER_KINDS:
            raise ValueError(f"{self.name}: kind {self.kind!r} is not one of {TRANSFORMER_KINDS}")

    @property
    def encoder_decoder(self) -> bool:
        """Whether the pretraining net encodes and decodes (``.encode``, ``.decode``)."""
        return self.kind == "encoder-decoder"


class Model(NamedTuple):
    """A built net with its architecture and tokenizer: what ``build_net`` and ``from_hf``
    return and task families, objectives and exports receive."""

    arch: Arch
    net: nn.Module
    tokenizer: TextTokenizer


#: every registered architecture, by its presets' ``arch``
ARCHS: dict[str, Arch] = {}


def register_arch(arch: Arch) -> Arch:
    """Add ``arch`` to the registry under its (new) name; returns it."""
    if arch.name in ARCHS:
        raise ValueError(f"architecture {arch.name!r} is registered twice")
    ARCHS[arch.name] = arch
    return arch


def get_arch(name: str) -> Arch:
    if name not in ARCHS:
        raise PlmbenchError(f"model.arch={name!r} is not implemented: use one of {list(ARCHS)}")
    return ARCHS[name]


def arch_of_model_type(model_type: str | None) -> Arch:
    """The (first registered) architecture of a transformers config.json's ``model_type``."""
    for arch in ARCHS.values():
        if arch.hf.model_type == model_type:
            return arch
    known = list(dict.fromkeys(arch.hf.model_type for arch in ARCHS.values()))
    raise PlmbenchError(
        f"checkpoint has model_type {model_type!r}; plmbench imports {known}: point init_from at "
        "a checkpoint of one of those"
    )


def archs_with(test: Callable[[Arch], bool]) -> list[str]:
    """The names of the registered architectures ``test`` accepts (for error messages)."""
    return sorted(arch.name for arch in ARCHS.values() if test(arch))


@dataclass(frozen=True)
class Baseline:
    """A model family that is no Transformer (static word vectors, ELMo's biLM, the GLUE
    baselines' BiLSTMs): no sub-word vocabulary, no Hugging Face layout, no pretraining heads,
    so it is no ``Arch``. Its presets name it as ``arch``; the task families of its ``kind``
    build its nets from the preset's fields (``TaskFamily.build_net``)."""

    name: str  # model presets' `arch`
    kind: str  # one of BASELINE_KINDS
    description: str  # what it is, for listings and errors
