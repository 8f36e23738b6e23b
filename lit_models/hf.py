"""Hugging Face checkpoint interop for BERT: import (``from_hf``) and export (``to_hf``).

A Hugging Face checkpoint directory holds ``config.json`` (keys = ``BertConfig`` fields),
``model.safetensors`` or ``pytorch_model.bin`` (weights named after transformers' modules) and
``tokenizer.json`` or ``vocab.txt``. ``HF_NAMES`` is the whole weight mapping: our module names
to theirs. Our attention has one fused ``qkv`` projection (``attention.MultiHeadSelfAttention``)
where BERT has separate query/key/value matrices: they are concatenated along the output
dimension on import and split on export. The masked-LM decoder is tied to the token
embeddings (Devlin et al. 2019, §3.1 / ``run_pretraining.py``), so transformers' duplicate
``cls.predictions.decoder.*`` entries are skipped on import and not written on export, as
transformers' own ``save_pretrained`` does. ``transformers`` itself is never imported here.
"""

import json
import re
import shutil
import tempfile
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor, nn

from datamodules.errors import PlmbenchError
from datamodules.tokenization import SPECIAL_TOKENS, load_tokenizer
from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel

#: our module (or parameter) name -> transformers' name; "{i}" is the layer index; a tuple is
#: one of our tensors made of several of theirs, concatenated along dim 0. Names are relative
#: to the encoder: transformers' task models (and our BertForPreTraining) prefix it "bert.".
HF_NAMES: dict[str, str | tuple[str, ...]] = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.norm": "embeddings.LayerNorm",
    "encoder.layers.{i}.attention.qkv": (
        "encoder.layer.{i}.attention.self.query",
        "encoder.layer.{i}.attention.self.key",
        "encoder.layer.{i}.attention.self.value",
    ),
    "encoder.layers.{i}.attention.out": "encoder.layer.{i}.attention.output.dense",
    "encoder.layers.{i}.attention_norm": "encoder.layer.{i}.attention.output.LayerNorm",
    "encoder.layers.{i}.feed_forward.linear1": "encoder.layer.{i}.intermediate.dense",
    "encoder.layers.{i}.feed_forward.linear2": "encoder.layer.{i}.output.dense",
    "encoder.layers.{i}.ffn_norm": "encoder.layer.{i}.output.LayerNorm",
    "pooler": "pooler.dense",
    "mlm_head.dense": "cls.predictions.transform.dense",
    "mlm_head.norm": "cls.predictions.transform.LayerNorm",
    "mlm_head.bias": "cls.predictions.bias",
    "nsp_head": "cls.seq_relationship",
}
#: transformers' names for weights that may be absent (then freshly initialised).
OPTIONAL_PREFIXES = ("pooler.", "cls.")
#: fine-tuned task heads of transformers' BertFor{SequenceClassification, TokenClassification,
#: MultipleChoice, QuestionAnswering}: not part of the encoder, so importing skips them.
TASK_HEAD_PREFIXES = ("classifier.", "qa_outputs.")
#: checkpoint entries that are not weights of their own: buffers, and tied copies.
SKIPPED = re.compile(r"(^|\.)position_ids$|^cls\.predictions\.decoder\.(weight|bias)$")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
LAYER_INDEX = re.compile(r"\.(\d+)\.")


def hf_names(name: str) -> tuple[str, ...]:
    """transformers' name(s), without the "bert." prefix, of our parameter ``name``."""
    name = name.removeprefix("bert.")
    index = LAYER_INDEX.search(name)
    template = LAYER_INDEX.sub(".{i}.", name, count=1)
    module, _, param = template.rpartition(".")
    if module in HF_NAMES:
        theirs, suffix = HF_NAMES[module], "." + param
    elif template in HF_NAMES:
        theirs, suffix = HF_NAMES[template], ""
    else:
        raise PlmbenchError(
            f"parameter {name} has no transformers BERT equivalent (transformers' BERT is "
            "post-LN, so pre_norm=True has no counterpart); use pre_norm=False"
        )
    theirs = (theirs,) if isinstance(theirs, str) else theirs
    i = index.group(1) if index else None
    return tuple(n.format(i=i) + suffix for n in theirs)


def _canonical(hf_state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Strip the task models' "bert." prefix, drop buffers and tied copies, and rename the
    ``gamma``/``beta`` LayerNorm parameters of checkpoints converted from Google's TF code."""
    state = {}
    for key, tensor in hf_state.items():
        key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
        key = key.removeprefix("bert.")
        if not SKIPPED.search(key):
            state[key] = tensor
    return state


def load_hf_state_dict(net: BertModel | BertForPreTraining, hf_state: dict[str, Tensor]) -> None:
    """Copy weights named as in transformers (with or without "bert.") into ``net``.

    The pooler and the pretraining heads keep their initialisation when the checkpoint lacks
    them; their weights, and fine-tuned task heads, are ignored when ``net`` has no place for
    them. Any other missing or leftover weight raises ``PlmbenchError`` naming it.
    """
    state = _canonical(hf_state)
    missing, mismatched = [], []
    with torch.no_grad():
        for name, param in net.named_parameters():  # tied parameters are listed once
            theirs = hf_names(name)
            if not all(n in state for n in theirs):
                if not theirs[0].startswith(OPTIONAL_PREFIXES):
                    missing += [n for n in theirs if n not in state]
                continue
            tensor = torch.cat([state.pop(n) for n in theirs])
            if tensor.shape != param.shape:
                shapes = f"{tuple(tensor.shape)}, not {tuple(param.shape)}"
                mismatched.append(f"{theirs[0]} of shape {shapes}")
                continue
            param.copy_(tensor)
    unknown = [k for k in state if not k.startswith(OPTIONAL_PREFIXES + TASK_HEAD_PREFIXES)]
    problems = {"lacks weights": missing, "has unknown weights": unknown, "has": mismatched}
    for problem, names in problems.items():
        if names:
            raise PlmbenchError(
                f"checkpoint {problem} {names[:5]}{' ...' if len(names) > 5 else ''} for a "
                f"{type(net).__name__}; check that config.json matches the weights and that the "
                "checkpoint is a BERT encoder"
            )


def _read_weights(file: Path) -> dict[str, Tensor]:
    try:
        if file.suffix == ".safetensors":
            return load_file(file)
        return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # any reader failure means a corrupt or foreign file
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise PlmbenchError(f"cannot read {file}: {reason}; re-export the checkpoint") from err


def from_hf(directory: str | Path, with_heads: bool = False) -> tuple[nn.Module, Tokenizer]:
    """Load a transformers BERT checkpoint directory as our ``BertModel`` (``with_heads=False``,
    pooler only if the checkpoint has one) or ``BertForPreTraining`` (heads taken from
    ``cls.*`` when present, else freshly initialised), plus its tokenizer (padding and
    truncation off)."""
    directory = Path(directory)
    missing = [
        " or ".join(names)
        for names in (("config.json",), WEIGHT_FILES, TOKENIZER_FILES)
        if not any((directory / name).is_file() for name in names)
    ]
    if missing:
        raise PlmbenchError(
            f"{directory} is not a Hugging Face BERT checkpoint: it lacks {', '.join(missing)}; "
            "point init_from at a directory written by save_pretrained or `to_hf`"
        )
    config_file = directory / "config.json"
    try:
        hf_config = json.loads(config_file.read_text())
    except json.JSONDecodeError as err:
        raise PlmbenchError(f"cannot read {config_file}: {err}; re-export the checkpoint") from err
    if hf_config.get("model_type") != "bert":
        raise PlmbenchError(
            f"{config_file} has model_type {hf_config.get('model_type')!r}, not 'bert'; "
            "from_hf imports BERT checkpoints only"
        )
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise PlmbenchError(
            f"{config_file}: position_embedding_type {hf_config['position_embedding_type']!r} "
            "is not supported; only 'absolute' position embeddings (original BERT) are"
        )
    known = {f.name for f in fields(BertConfig)}
    config = BertConfig(**{k: v for k, v in hf_config.items() if k in known})
    state = _read_weights(next(directory / f for f in WEIGHT_FILES if (directory / f).is_file()))
    if with_heads:
        net: BertModel | BertForPreTraining = BertForPreTraining(config)
    else:
        has_pooler = any(k.removeprefix("bert.").startswith("pooler.") for k in state)
        net = BertModel(config, add_pooling_layer=has_pooler)
    load_hf_state_dict(net, state)
    return net, load_tokenizer(directory)


def _lowercases(tokenizer: Tokenizer) -> bool:
    """Whether the tokenizer's normalizer lowercases (BERT "uncased" vocabularies)."""
    normalizer = json.loads(tokenizer.to_str()).get("normalizer") or {}
    steps = normalizer.get("normalizers", [normalizer])
    return any(s["type"] == "Lowercase" or s.get("lowercase", False) for s in steps)


def _write_tokenizer(tokenizer: Tokenizer, max_length: int, directory: Path) -> None:
    """tokenizer.json plus the files transformers' BertTokenizer(Fast) reads beside it."""
    spec = json.loads(tokenizer.to_str())
    missing = [t for t in SPECIAL_TOKENS if tokenizer.token_to_id(t) is None]
    if spec["model"]["type"] != "WordPiece" or missing:
        raise PlmbenchError(
            f"to_hf needs a BERT WordPiece tokenizer (got a {spec['model']['type']} model, "
            f"missing special tokens {missing}); build it with datamodules.tokenization"
        )
    clean = Tokenizer.from_str(tokenizer.to_str())  # the caller's tokenizer stays untouched
    clean.no_padding()
    clean.no_truncation()
    clean.save(str(directory / "tokenizer.json"))
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    (directory / "vocab.txt").write_text("".join(token + "\n" for token, _ in vocab))
    special = {f"{t[1:-1].lower()}_token": t for t in SPECIAL_TOKENS}
    tokenizer_config = {
        "tokenizer_class": "BertTokenizerFast",
        "do_lower_case": _lowercases(tokenizer),
        "model_max_length": max_length,
        **special,
    }
    for name, content in (("tokenizer_config", tokenizer_config), ("special_tokens_map", special)):
        (directory / f"{name}.json").write_text(json.dumps(content, indent=2) + "\n")


def hf_state_dict(net: BertModel | BertForPreTraining, prefix: str | None = None
                  ) -> dict[str, Tensor]:
    """``net``'s weights under transformers' names (the fused qkv split back into three), as
    transformers' ``BertModel`` or ``BertForPreTraining`` / ``BertForMaskedLM`` name them;
    ``prefix`` overrides the encoder's prefix ("bert." inside transformers' task models)."""
    if prefix is None:
        prefix = "bert." if isinstance(net, BertForPreTraining) else ""
    weights = {}
    for name, param in net.named_parameters():
        theirs = hf_names(name)
        for hf_name, part in zip(theirs, param.detach().cpu().chunk(len(theirs)), strict=True):
            weights[hf_name if hf_name.startswith("cls.") else prefix + hf_name] = part.clone()
    return weights


def read_classifier(directory: str | Path) -> dict[str, Tensor]:
    """The ``classifier.weight`` / ``classifier.bias`` of a fine-tuned sequence classification
    checkpoint (transformers' BertForSequenceClassification layout); empty when it has none."""
    weights = [Path(directory) / f for f in WEIGHT_FILES if (Path(directory) / f).is_file()]
    state = _read_weights(weights[0]) if weights else {}
    return {k.removeprefix("classifier."): v for k, v in state.items()
            if k.startswith("classifier.")}


def to_hf(
    net: nn.Module,
    tokenizer: Tokenizer,
    directory: str | Path,
    classifier: nn.Linear | None = None,
    label_names: list[str] | None = None,
) -> Path:
    """Write ``net`` (``BertModel`` or ``BertForPreTraining``) and ``tokenizer`` as a directory
    that ``transformers.AutoModel`` / ``BertForPreTraining`` and ``AutoTokenizer`` load; with a
    ``classifier`` over a ``BertModel``'s pooled output, as a ``BertForSequenceClassification``
    (one output = regression). The directory appears complete or not at all (written beside
    it, then renamed)."""
    if not isinstance(net, (BertModel, BertForPreTraining)):
        raise PlmbenchError(
            f"to_hf exports BertModel or BertForPreTraining, not {type(net).__name__}"
        )
    architecture = type(net).__name__
    config = {k: v for k, v in asdict(net.config).items() if k != "pre_norm"}
    if classifier is None:
        weights = hf_state_dict(net)
    else:
        architecture = "BertForSequenceClassification"
        weights = hf_state_dict(net, prefix="bert.")
        weights |= {f"classifier.{k}": v.detach().cpu().clone()
                    for k, v in classifier.state_dict().items()}
        labels = label_names or [f"LABEL_{i}" for i in range(classifier.out_features)]
        config |= {
            "id2label": dict(enumerate(labels)),
            "label2id": {name: i for i, name in enumerate(labels)},
            "problem_type": "regression" if classifier.out_features == 1
            else "single_label_classification",
        }
    config |= {"model_type": "bert", "architectures": [architecture]}

    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise PlmbenchError(f"{directory} is a file; to_hf writes a directory, pick another path")
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the export is meant to be shared
    try:
        save_file(weights, tmp / "model.safetensors", metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        _write_tokenizer(tokenizer, net.config.max_position_embeddings, tmp)
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
