"""Build a net and its tokenizer from a model preset and ``init_from``.

``init_from`` is one of:
- ``scratch``: a fresh net of the preset's sizes and a vocabulary of the architecture's tokenizer
  family (or of the preset's ``vocabulary_family``, so architectures can share one vocabulary
  algorithm in a comparison) trained on the run's own (capped) training text, cached by a
  fingerprint of the corpus;
- ``hf:<dir>``: a Hugging Face checkpoint directory, imported by ``lit_models.interop.hf.from_hf``;
- ``ckpt:<dir>``: a plmbench run directory (or its ``model/`` export), which holds the same
  Hugging Face layout
(parsed once, by ``datamodules.init_from.InitFrom``). The architecture is the run's (the
preset's ``arch``, resolved once by the run); a checkpoint's ``model_type`` must agree with it,
unless the preset's architecture starts from the checkpoint's (a DistilBERT student from a BERT
teacher, with its vocabulary).
"""

import dataclasses
from collections.abc import Callable, Iterable, Mapping

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.keys import check_keys
from datamodules.tokenization import FAMILIES, TokenizerSpec, scratch_tokenizer
from lit_models.archs import Arch, Model
from lit_models.interop.hf import from_hf, read_config, untrained_like

#: what a model preset holds besides its architecture's config fields, and who reads it
PRESET_KEYS = frozenset({
    "name",                 # the preset's name: the default label (conf/config.yaml)
    "arch",                 # the architecture's registered name (lit_models/archs)
    "init_from",            # the default init_from (conf/config.yaml)
    "objective",            # the preset's pretraining objective (bench/run/execute.py normalize)
    "finetune_lr",          # fine-tuning tasks' lr (conf/task/*/_base.yaml)
    "finetune_batch_size",  # a released checkpoint's paper recipe, read by the GLUE tasks
    "finetune_epochs",      # (conf/task/glue/_base.yaml; warmup and layer-wise decay also by
    "finetune_max_length",  # SQuAD's): batch size, epochs, input length, warmup share and
    "finetune_warmup_ratio",  # layer-wise lr decay (ELECTRA, Clark et al. 2020, Table 7)
    "finetune_layerwise_lr_decay",
    "parameters",           # a released checkpoint's published parameter count (plmbench models)
    "pretrain_lr",          # pretraining tasks' lr and batch size (conf/task/pretrain/_base.yaml)
    "pretrain_batch_size",
    "pretrain_max_length",  # the paper's pretraining recipe (conf/task/pretrain/_base.yaml):
    "pretrain_length_schedule",  # input length, length phases, warmup share
    "pretrain_warmup_ratio",
    "summarize_prefix",     # prepended to summarization sources (conf/task/summarization)
    "translate_prefix",     # prepended to translation sources (conf/task/translation)
    "vocabulary_family",    # a scratch vocabulary's family (vocabulary_spec)
    "lowercase",            # a scratch vocabulary's normalisation (build_net)
})


def check_preset(arch: Arch, model_cfg: Mapping) -> None:
    """A preset (with its overrides) holds only keys something reads: its architecture's config
    fields and ``PRESET_KEYS``; a misspelled one is an error naming the nearest."""
    known = {f.name for f in dataclasses.fields(arch.config)} | PRESET_KEYS
    check_keys(model_cfg, known, f"model={model_cfg.get('name')} ({arch.name})", "model.")


def net_config(arch: Arch, model_cfg: Mapping, vocab_size: int, pad_token_id: int):
    """The arch's config dataclass from the preset's fields of the same names (``check_preset``
    refuses any other key but ``PRESET_KEYS``)."""
    check_preset(arch, model_cfg)
    names = {f.name for f in dataclasses.fields(arch.config)}
    values = {k: v for k, v in model_cfg.items() if k in names}
    values.update(vocab_size=vocab_size, pad_token_id=pad_token_id)
    return arch.config(**values)


def vocabulary_spec(arch: Arch, model_cfg: Mapping) -> TokenizerSpec:
    """The spec of a scratch vocabulary: the arch's own, or, with the preset's
    ``vocabulary_family`` (wordpiece | bpe | unigram), that family with the arch's special tokens
    and templates. Its transformers class then reads tokenizer.json as it is
    (PreTrainedTokenizerFast): the arch's own class would rebuild its own family's pipeline."""
    family = model_cfg.get("vocabulary_family")
    if family is None or family == arch.tokenizer.family:
        return arch.tokenizer
    if family not in FAMILIES:
        raise PlmbenchError(f"model.vocabulary_family={family!r}: use null (the architecture's "
                            f"own) or one of {', '.join(FAMILIES)}")
    return dataclasses.replace(arch.tokenizer, family=family,
                               tokenizer_class="PreTrainedTokenizerFast")


def pretrained_net(checkpoint: str, role: str = "init_from", with_heads: bool = True) -> Model:
    """A pretrained net (with its pretraining heads, or the encoder alone: ``with_heads``), its
    architecture and tokenizer, from ``hf:<dir>`` or ``ckpt:<run dir>``: what the task YAMLs
    and objectives name by ``_target_`` when they need one besides the run's net (DistilBERT's
    teacher, a task distillation's fine-tuned teacher). ``role`` names the setting in errors."""
    return from_hf(InitFrom.parse(checkpoint, role, pretrained=True).directory(role),
                   with_heads=with_heads)


def released_preset(model_cfg: Mapping) -> bool:
    """A preset of a released checkpoint (its ``init_from`` names one, its sizes are the
    checkpoint's: no ``vocab_size`` of its own). ``init_from=scratch`` on it builds that
    checkpoint's architecture untrained rather than a preset's."""
    own = str(model_cfg.get("init_from") or "scratch")
    return "vocab_size" not in model_cfg and not InitFrom.parse(own, "model.init_from").scratch


def build_net(
    arch: Arch,
    model_cfg: Mapping,
    init_from: InitFrom,
    with_heads: bool,
    vocabulary_corpus: Callable[[], tuple[str, Iterable[str]]],
) -> Model:
    """An ``arch`` (the run's, resolved once) encoder, or with ``with_heads`` the encoder and
    pretraining heads, with its tokenizer.

    ``vocabulary_corpus()`` gives (a key for the corpus, its texts) for scratch vocabularies.
    """
    check_preset(arch, model_cfg)
    if not init_from.scratch:
        directory = init_from.directory()
        found, _ = read_config(directory, arch)
        if found is arch:
            return from_hf(directory, with_heads=with_heads, arch=arch)
        if found.name not in arch.init_from_arch:
            raise PlmbenchError(
                f"init_from={init_from} is a {found.name} checkpoint but model={model_cfg['name']} "
                f"is a {arch.name} preset; pick a {found.name} preset"
            )
        other = from_hf(directory, with_heads=True)
        try:
            return Model(arch, arch.init_from_arch[found.name](other.net, with_heads),
                         other.tokenizer)
        except ValueError as err:
            raise PlmbenchError(f"model={model_cfg['name']} from {init_from}: {err}") from None
    if released_preset(model_cfg):  # its sizes and vocabulary are its checkpoint's
        return untrained_like(InitFrom.parse(model_cfg["init_from"]).directory("model.init_from"),
                              with_heads, arch)
    key, texts = vocabulary_corpus()
    tokenizer = scratch_tokenizer(vocabulary_spec(arch, model_cfg), lambda: texts,
                                  model_cfg["vocab_size"],
                                  model_cfg.get("lowercase", False), key)
    config = net_config(arch, model_cfg, tokenizer.vocab_size, tokenizer.special.pad)
    try:
        return Model(arch, (arch.pretraining if with_heads else arch.encoder)(config), tokenizer)
    except ValueError as err:  # nets reject impossible sizes with plain errors
        raise PlmbenchError(f"model={model_cfg['name']}: {err}") from None
