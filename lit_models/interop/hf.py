"""Hugging Face checkpoint interop for every registered architecture: ``from_hf`` and ``to_hf``.

A Hugging Face checkpoint directory holds ``config.json`` (its ``model_type`` names the
architecture, its keys are the fields of the architecture's config dataclass), weights in
``model.safetensors`` or ``pytorch_model.bin`` (or shards of either, named by
``<file>.index.json``) named after transformers' modules, and tokenizer files. The architecture's
registration (``lit_models/archs``) holds the whole mapping: its ``HFLayout.names`` table
(``names_of`` a net's config) maps our module names to theirs; a tuple there is one of our tensors
made of several of theirs (a fused qkv projection), concatenated along the output dimension on
import and split on export; the layout's hooks convert what renaming cannot (``import_weight`` /
``export_weight``: GPT-2's transposed Conv1D weights), so nothing here names an architecture. Tied
copies (an MLM decoder tied to the token embeddings, Devlin et al. 2019 §3.1) are skipped on import
and not written on export, as transformers' ``save_pretrained`` does. An export holds exactly the
weights of the class its config.json names (transformers loads it with no missing or unexpected
key): no pooler under a task head that reads none, and pretraining weights the class has no place
for in ``BESIDE_FILE``, read back by ``from_hf``. ``transformers`` itself is never imported here.
"""

import json
import re
import shutil
from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import staging_dir
from datamodules.hub import weight_shards
from datamodules.init_from import (
    EVERY_FILE,
    TOKENIZER_FILES,
    WEIGHT_FILES,
    check_hf_directory,
)
from datamodules.tokenization import load_tokenizer, save_tokenizer
from lit_models.archs import Arch, HFLayout, Model, arch_of_model_type
from lit_models.nets.heads import PooledClassifier

#: pretraining weights transformers' class has no place for (``HFLayout.beside``), kept beside
#: the checkpoint's own so that transformers loads it without an unexpected key
BESIDE_FILE = "plmbench_beside.safetensors"
LAYER_INDEX = re.compile(r"\.(\d+)\.")


def hf_names(name: str, layout: HFLayout, config) -> tuple[str, ...]:
    """transformers' name(s) of our parameter ``name``, relative to the encoder for encoder
    weights (no "bert." prefix) and absolute for pretraining-head weights, in the layout's
    names for a net of ``config``."""
    names = layout.names_of(config)
    name = name.removeprefix(layout.prefix)
    index = LAYER_INDEX.search(name)
    template = LAYER_INDEX.sub(".{i}.", name, count=1)
    module, _, param = template.rpartition(".")
    if module in names:
        theirs, suffix = names[module], "." + param
    elif template in names:
        theirs, suffix = names[template], ""
    else:
        raise PlmbenchError(
            f"parameter {name} has no transformers {layout.model_type} equivalent (pre_norm=True "
            "has none: transformers' encoders are post-LN); use the architecture's own layout"
        )
    theirs = (theirs,) if isinstance(theirs, str) else theirs
    i = index.group(1) if index else None
    return tuple(n.format(i=i) + suffix for n in theirs)


def _canonical(hf_state: dict[str, Tensor], layout: HFLayout) -> dict[str, Tensor]:
    """Strip the task models' encoder prefix, drop buffers and tied copies, rename the
    ``gamma``/``beta`` LayerNorm parameters of checkpoints converted from TensorFlow, and
    convert each tensor as the layout's ``import_weight`` says."""
    skipped = re.compile(layout.skipped)
    state = {}
    for key, tensor in hf_state.items():
        key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
        key = key.removeprefix(layout.prefix)
        if not skipped.search(key):
            state[key] = layout.import_weight(key, tensor)
    return state


def _placed(net: nn.Module, state: dict[str, Tensor], layout: HFLayout
            ) -> tuple[list[tuple[Tensor, Tensor]], list[str], list[str], set[str]]:
    """Where ``state`` (canonical names) goes in ``net``: (parameter, tensor) pairs, the
    checkpoint names of parameters it lacks (not ``optional``), those of other shapes, and the
    names it places."""
    optional = layout.optional()
    pairs, missing, mismatched, used = [], [], [], set()
    for name, param in net.named_parameters():  # tied parameters are listed once
        theirs = hf_names(name, layout, net.config)
        if not all(n in state for n in theirs):
            if not theirs[0].startswith(optional):
                missing += [n for n in theirs if n not in state]
            continue
        used.update(theirs)
        tensor = torch.cat([state[n] for n in theirs])
        if tensor.shape != param.shape:
            mismatched.append(f"{theirs[0]} of shape {tuple(tensor.shape)}, "
                              f"not {tuple(param.shape)}")
            continue
        pairs.append((param, tensor))
    return pairs, missing, mismatched, used


def _refuse(problems: dict[str, list[str]], what: str, layout: HFLayout) -> None:
    for problem, names in problems.items():
        if names:
            raise PlmbenchError(
                f"checkpoint {problem} {names[:5]}{' ...' if len(names) > 5 else ''} for {what}; "
                f"check that config.json matches the weights and that the checkpoint is a "
                f"{layout.model_type} model"
            )


def load_hf_state_dict(net: nn.Module, hf_state: dict[str, Tensor], layout: HFLayout) -> None:
    """Copy weights named as in transformers (with or without the encoder prefix) into ``net``,
    a net of the architecture whose ``layout`` this is.

    The pooler and the pretraining heads keep their initialisation when the checkpoint lacks
    them; their weights, and fine-tuned task heads, are ignored when ``net`` has no place for
    them (``hf_check.check_checkpoint`` has made sure some net of the architecture has). Any other
    missing or leftover weight raises ``PlmbenchError`` naming it.
    """
    state = layout.import_state(net, _canonical(hf_state, layout))
    pairs, missing, mismatched, used = _placed(net, state, layout)
    with torch.no_grad():
        for param, tensor in pairs:
            param.copy_(tensor)
    excused = layout.optional() + layout.task_head_prefixes
    unknown = [k for k in state if k not in used and not k.startswith(excused)]
    _refuse({"lacks weights": missing, "has unknown weights": unknown, "has": mismatched},
            f"a {type(net).__name__}", layout)


def _pretraining_net(arch: Arch, directory: Path, config) -> nn.Module:
    """The architecture's pretraining net for a checkpoint (its ``masked_lm`` net for one saved
    as its transformers masked-LM class: ELECTRA's generator)."""
    if arch.masked_lm and _architectures(directory) == [arch.hf.classes["mlm"]]:
        return arch.masked_lm(config)
    return arch.pretraining(config)


def read_weight_files(file: Path, read) -> dict[str, Tensor]:
    """The tensors of a weights file, or of every shard a sharded checkpoint's index names
    (``datamodules.hub.weight_shards``), each file read by ``read(file, safetensors)``; one line
    naming a file that does not read."""
    state = {}
    for shard in weight_shards(file):
        try:
            state |= read(shard, shard.suffix == ".safetensors")
        except Exception as err:  # any reader failure means a corrupt or foreign file
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise PlmbenchError(f"cannot read {shard}: {reason}; re-export the checkpoint"
                                ) from err
    return state


def _read_weights(file: Path) -> dict[str, Tensor]:
    return read_weight_files(file, lambda shard, safetensors: load_file(shard) if safetensors
                             else torch.load(shard, map_location="cpu", weights_only=True))


def _weights_file(directory: Path) -> Path | None:
    return next((directory / f for f in WEIGHT_FILES if (directory / f).is_file()), None)


def read_config(directory: str | Path, arch: Arch | None = None) -> tuple[Arch, object]:
    """(architecture, our config dataclass) of a checkpoint directory's config.json; ``arch``
    reads it as that architecture instead of the first one of its ``model_type`` (SpanBERT's
    checkpoints are BERT's)."""
    directory = Path(directory)
    config_file = directory / "config.json"
    if not config_file.is_file():
        check_hf_directory(directory, EVERY_FILE)  # names every file it lacks
    try:
        hf_config = json.loads(config_file.read_text())
    except json.JSONDecodeError as err:
        raise PlmbenchError(f"cannot read {config_file}: {err}; re-export the checkpoint") from err
    # the architecture first: a checkpoint of one plmbench lacks is named as such, whatever
    # files it ships
    try:
        found = arch_of_model_type(hf_config.get("model_type"))
    except PlmbenchError as err:
        remote = (" (its auto_map names modelling code of its own, which plmbench does not run)"
                  if hf_config.get("auto_map") else "")
        raise PlmbenchError(f"{config_file}: {err}{remote}") from None
    if arch is None or arch.hf.model_type != found.hf.model_type:
        arch = found
    reason = arch.hf.unsupported(hf_config)
    if reason:
        raise PlmbenchError(f"{config_file}: {reason}")
    check_hf_directory(directory, (WEIGHT_FILES, TOKENIZER_FILES))
    known = {f.name for f in fields(arch.config)}
    values = {k: v for k, v in arch.hf.config_of(hf_config).items() if k in known}
    if "pad_token_id" in known and values.get("pad_token_id") is None and isinstance(
            hf_config.get("eos_token_id"), int):  # GPT-2 has no pad: its end pads, masked
        values["pad_token_id"] = hf_config["eos_token_id"]
    return arch, arch.config(**values)


def _architectures(directory: Path) -> list[str]:
    """config.json's ``architectures``: the transformers classes the checkpoint was saved from."""
    return json.loads((directory / "config.json").read_text()).get("architectures") or []


def has_pretraining_heads(directory: str | Path) -> bool:
    """Whether a checkpoint was saved with its pretraining heads (config.json's ``architectures``
    names its architecture's pretraining or masked-LM class); a sentence encoder such as
    all-MiniLM-L6-v2 (``BertModel``) has none, so a masked-LM head on it starts untrained."""
    arch, _ = read_config(directory)
    heads = {arch.hf.classes.get("pretraining"), arch.hf.classes.get("mlm")}
    return bool(heads & set(_architectures(Path(directory))))


def from_hf(directory: str | Path, with_heads: bool = False, arch: Arch | None = None) -> Model:
    """Load a transformers checkpoint directory as our encoder (``with_heads=False``; with a
    pooler only if the checkpoint has one) or our pretraining net (heads taken from the
    checkpoint when present, else freshly initialised; the architecture's ``masked_lm`` net for
    a checkpoint of its transformers masked-LM class), with its architecture and tokenizer.
    ``arch``: as in ``read_config``."""
    directory = Path(directory)
    arch, config = read_config(directory, arch)
    state = _read_weights(_weights_file(directory))
    if with_heads and (directory / BESIDE_FILE).is_file():
        state |= _read_weights(directory / BESIDE_FILE)
    config = replace(config, **arch.hf.weights_config(set(state)))
    if with_heads:
        net = _pretraining_net(arch, directory, config)
    elif arch.kind == "encoder":
        has_pooler = any(k.removeprefix(arch.hf.prefix).startswith("pooler.") for k in state)
        net = arch.encoder(config, add_pooling_layer=has_pooler)
    else:
        net = arch.encoder(config)
    load_hf_state_dict(net, state, arch.hf)
    return Model(arch, net, _fitting_tokenizer(directory, arch, config))


def _fitting_tokenizer(directory: Path, arch: Arch, config):
    """The checkpoint's tokenizer, checked against its embedding: a tokenizer that can emit an
    id with no embedding row (another model's tokenizer files beside these weights) is one
    line now, not an IndexError on the first input holding such a token."""
    tokenizer = load_tokenizer(directory, arch.tokenizer)
    rows = getattr(config, "vocab_size", None)
    ids = max(tokenizer.backend.get_vocab(with_added_tokens=True).values(), default=-1) + 1
    if isinstance(rows, int) and ids > rows:
        raise PlmbenchError(
            f"{directory}: its tokenizer emits ids up to {ids - 1}, but the model's embedding has "
            f"{rows} rows (config.json vocab_size): the tokenizer files are another model's; "
            "put the checkpoint's own tokenizer beside its weights")
    return tokenizer


def untrained_like(directory: str | Path, with_heads: bool = False, arch: Arch | None = None
                   ) -> Model:
    """The net of a checkpoint directory's architecture and sizes (its config.json) with its
    tokenizer, every weight freshly initialised: a released model's untrained floor (a probe on
    random features, Hewitt & Liang 2019's and Tenney et al. 2019's baseline)."""
    directory = Path(directory)
    arch, config = read_config(directory, arch)
    net = _pretraining_net(arch, directory, config) if with_heads else arch.encoder(config)
    return Model(arch, net, _fitting_tokenizer(directory, arch, config))


def hf_state_dict(arch: Arch, net: nn.Module, prefix: str | None = None) -> dict[str, Tensor]:
    """``net``'s (a net of ``arch``) weights under transformers' names (fused tensors split
    back), as transformers' encoder or pretraining model names them; ``prefix`` overrides the
    encoder's prefix (as inside transformers' task models)."""
    layout = arch.hf
    if prefix is None:  # a pretraining net holds the encoder under transformers' prefix
        prefix = "" if type(net) is arch.encoder else layout.prefix
    weights = {}
    for name, param in net.named_parameters():
        theirs = hf_names(name, layout, net.config)
        for hf_name, part in zip(theirs, param.detach().cpu().chunk(len(theirs)), strict=True):
            key = hf_name if hf_name.startswith(layout.head_prefixes) else prefix + hf_name
            weights[key] = layout.export_weight(hf_name, part).clone()
    return layout.export_state(net, weights)


#: transformers' extractive-QA head, the same in every encoder's ``*ForQuestionAnswering``: one
#: Linear to (start, end) logits
QA_HEAD_NAMES = {"qa_outputs": "qa_outputs"}
#: transformers' token-classification head, the same in every encoder's
#: ``*ForTokenClassification``: one Linear to each token's tag scores
TAGGER_HEAD_NAMES = {"classifier": "classifier"}
#: task heads over an encoder that are the same in every architecture: task -> (transformers'
#: class suffix, our head modules -> theirs)
TASK_HEADS = {"qa": ("ForQuestionAnswering", QA_HEAD_NAMES),
              "tagger": ("ForTokenClassification", TAGGER_HEAD_NAMES)}


def task_class(layout: HFLayout, task: str) -> str | None:
    """transformers' class of an encoder with the ``task`` head: the layout's (``classes``),
    else, for a ``TASK_HEADS`` head, the encoder's name with its suffix (BertModel ->
    BertForTokenClassification); None where transformers has none for the architecture."""
    if task in layout.classes:
        return layout.classes[task]
    if task in TASK_HEADS and layout.token_head_classes:
        return layout.classes["encoder"].removesuffix("Model") + TASK_HEADS[task][0]
    return None


def check_task_export(cfg, arch: Arch, task: str) -> None:
    """Refuse, before a run starts, ``save_model=true`` for a ``task`` model transformers has no
    class of the architecture for (``task_class``)."""
    if cfg["save_model"] and task_class(arch.hf, task) is None:
        raise PlmbenchError(f"task {cfg['task']['name']}: transformers has no {task} model of "
                            f"{arch.hf.model_type} that plmbench's {task} head exports to; run "
                            "without save_model=true")


def task_head_names(layout: HFLayout, task: str) -> Mapping[str, str]:
    """Our ``task`` head's modules -> transformers' names of them."""
    if task in TASK_HEADS:
        return TASK_HEADS[task][1]
    if task == "multiple_choice" and layout.multiple_choice_names is not None:
        return layout.multiple_choice_names
    return layout.classifier_names


def has_task_head(directory: str | Path, task: str) -> bool:
    """Whether a checkpoint was saved as the ``task`` model (config.json's ``architectures``
    name ``task_class``), so ``init_from`` of it keeps its head."""
    arch, _ = read_config(directory)
    return _architectures(Path(directory)) == [task_class(arch.hf, task)]


def task_labels(directory: str | Path, task: str) -> list[str] | None:
    """The label names, in id order, of a checkpoint saved as the ``task`` model (config.json's
    ``architectures`` name ``task_class``); None for any other checkpoint."""
    if not has_task_head(directory, task):
        return None
    id2label = json.loads((Path(directory) / "config.json").read_text()).get("id2label") or {}
    return [id2label[str(i)] for i in range(len(id2label))]


def _head_state(head: nn.Module, directory: str | Path, names: Mapping[str, str]
                ) -> dict[str, Tensor] | None:
    """The checkpoint's weights of ``head`` (``names``: our submodules -> the checkpoint's), by
    our names; None when the checkpoint has no such head."""
    file = _weights_file(Path(directory))
    state = _read_weights(file) if file else {}
    theirs = {f"{ours}.{param}": f"{name}.{param}"
              for ours, name in names.items()
              for param in getattr(head, ours).state_dict()}  # a head may have no bias
    if not all(name in state for name in theirs.values()):
        return None
    return {ours: state[name] for ours, name in theirs.items()}


def head_mismatch(head: nn.Module, directory: str | Path, names: Mapping[str, str]) -> str | None:
    """Why the checkpoint's head cannot be ``head`` ("out.weight is (2, 128), the task's
    (1, 128)": another label count); None when it fits or the checkpoint has none."""
    weights = _head_state(head, directory, names)
    ours = head.state_dict()
    wrong = [f"{key} is {tuple(weights[key].shape)}, the task's {tuple(value.shape)}"
             for key, value in ours.items() if weights and weights[key].shape != value.shape]
    return "; ".join(wrong) or None


def load_head(head: nn.Module, directory: str | Path, names: Mapping[str, str]) -> bool:
    """Load a fine-tuned task head from a checkpoint into ``head``, whose submodules ``names``
    maps to the checkpoint's (``HFLayout.classifier_names``, ``QA_HEAD_NAMES``); False (``head``
    untouched) when the checkpoint has none or one of other shapes (another label count:
    ``head_mismatch`` says which)."""
    weights = _head_state(head, directory, names)
    if weights is None or any(weights[k].shape != v.shape for k, v in head.state_dict().items()):
        return False
    head.load_state_dict(weights)
    return True


def _label_config(labels: list[str]) -> dict:
    return {"id2label": dict(enumerate(labels)),
            "label2id": {name: i for i, name in enumerate(labels)}}


def export_problem(arch: Arch, net: nn.Module) -> str | None:
    """Why ``net``'s configuration has no transformers counterpart (None: it has one)."""
    return arch.hf.unsupported(asdict(net.config))


def hf_config(arch: Arch, config) -> dict:
    """config.json's values of our ``config`` (a net of ``arch``) as an export writes them: its
    fields but those transformers has no key for, and the layout's ``model_type``."""
    values = {k: v for k, v in asdict(config).items() if k not in arch.hf.config_only_ours}
    return values | {"model_type": arch.hf.model_type}


def hf_checkpoint(arch: Arch, net: nn.Module, head: nn.Module | None = None,
                  label_names: list[str] | None = None, task: str = "classifier"
                  ) -> tuple[dict, dict[str, Tensor]]:
    """(config.json's contents, weights) of ``net`` (a net of ``arch``) in transformers' layout,
    as ``to_hf`` writes them: its ``architectures`` name the transformers class that loads
    them."""
    layout = arch.hf
    reason = export_problem(arch, net)
    if reason:
        raise PlmbenchError(f"cannot export {type(net).__name__} to transformers: {reason}")
    config = hf_config(arch, net.config)
    if head is None:
        kinds = {arch.pretraining: "pretraining", arch.masked_lm: "mlm"}
        class_name = layout.classes[kinds.get(type(net), "encoder")]
        weights = hf_state_dict(arch, net)
        if layout.beside:
            weights = {k: v for k, v in weights.items() if not re.search(layout.beside, k)}
    else:
        class_name = task_class(layout, task)
        if class_name is None:
            raise PlmbenchError(f"transformers has no {task} model of {layout.model_type}: "
                                "run without save_model=true")
        weights = hf_state_dict(arch, net, prefix=layout.prefix)
        if task in TASK_HEADS or not isinstance(head, PooledClassifier):
            # transformers' task classes whose head reads no pooled output have no pooler
            pooler = layout.prefix + "pooler."
            weights = {k: v for k, v in weights.items() if not k.startswith(pooler)}
        for ours, theirs in task_head_names(layout, task).items():
            for param, tensor in getattr(head, ours).state_dict().items():
                weights[f"{theirs}.{param}"] = tensor.detach().cpu().clone()
        if task == "tagger":  # the tags, as transformers' pipelines read them
            config |= _label_config(label_names)
        elif task == "classifier":
            num_labels = head.out.out_features
            config |= _label_config(label_names or [f"LABEL_{i}" for i in range(num_labels)])
            config["problem_type"] = ("regression" if num_labels == 1
                                      else "single_label_classification")
    config["architectures"] = [class_name]
    return config, weights


def to_hf(
    model: Model,
    directory: str | Path,
    head: nn.Module | None = None,
    label_names: list[str] | None = None,
    task: str = "classifier",
) -> Path:
    """Write ``model`` (its net, an encoder or a pretraining net, and its tokenizer) as a
    directory that ``transformers``' Auto classes load. With a ``head`` over an encoder: for ``task=
    "classifier"`` the architecture's ``*ForSequenceClassification`` (one output = regression),
    for ``task="qa"`` its ``*ForQuestionAnswering`` (``head.qa_outputs``), for ``task="tagger"``
    its ``*ForTokenClassification`` (``head.classifier``; ``label_names``, the tags, are required),
    for ``task="multiple_choice"`` its ``*ForMultipleChoice`` (the multiple-choice head).
    The directory appears complete or not at all (written beside it, then renamed)."""
    arch, net, tokenizer = model
    config, weights = hf_checkpoint(arch, net, head, label_names, task)
    layout = arch.hf
    beside = {k: v for k, v in hf_state_dict(arch, net).items()
              if head is None and layout.beside and re.search(layout.beside, k)}
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise PlmbenchError(f"{directory} is a file; to_hf writes a directory, pick another path")
    tmp = staging_dir(directory)
    try:
        save_file(weights, tmp / "model.safetensors", metadata={"format": "pt"})
        if beside:
            save_file(beside, tmp / BESIDE_FILE, metadata={"format": "pt"})
        (tmp / "config.json").write_text(strict_json.dumps(config, indent=2) + "\n")
        save_tokenizer(tokenizer, tmp, net.config.max_length, arch.tokenizer)
        if directory.exists():  # replace a previous export: move it aside, then swap
            old = tmp.with_name(tmp.name + ".old")
            directory.rename(old)
            tmp.rename(directory)
            shutil.rmtree(old)
        else:
            tmp.rename(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory
