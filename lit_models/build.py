"""Build a net and its tokenizer from a model preset and ``init_from``.

``init_from`` is one of:
- ``scratch``: a fresh net of the preset's sizes and a WordPiece vocabulary trained on the run's
  own training text (the caller passes it in);
- ``hf:<dir>``: a Hugging Face checkpoint directory, imported by ``lit_models.hf.from_hf``;
- ``ckpt:<dir>``: a plmbench pretraining run directory (or its ``model/`` export), which holds
  the same Hugging Face layout.
"""

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import tokenizers
from torch import nn

from datamodules.errors import PlmbenchError
from datamodules.tokenization import SpecialTokens, train_wordpiece
from lit_models.hf import from_hf
from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel

#: arch name -> (config dataclass, encoder class, encoder-with-pretraining-heads class)
ARCHS = {"bert": (BertConfig, BertModel, BertForPreTraining)}

#: the subdirectory a pretraining run exports its net and tokenizer to (Hugging Face layout)
EXPORT_DIR = "model"


def net_config(model_cfg: Mapping, vocab_size: int, pad_token_id: int):
    """The arch's config dataclass from the preset's fields of the same names."""
    config_cls = ARCHS[model_cfg["arch"]][0]
    names = {f.name for f in dataclasses.fields(config_cls)}
    values = {k: v for k, v in model_cfg.items() if k in names}
    values.update(vocab_size=vocab_size, pad_token_id=pad_token_id)
    return config_cls(**values)


def checkpoint_dir(init_from: str) -> Path:
    """The Hugging Face layout directory that ``hf:`` or ``ckpt:`` points at."""
    kind, _, where = init_from.partition(":")
    path = Path(where).expanduser()
    if kind == "ckpt" and (path / EXPORT_DIR).is_dir():
        path = path / EXPORT_DIR
    if not path.is_dir():
        raise PlmbenchError(
            f"init_from={init_from}: no directory {path}; point it at a Hugging Face checkpoint "
            f"(hf:<dir>) or a finished plmbench pretraining run (ckpt:<run dir>)"
        )
    return path


def build_net(
    model_cfg: Mapping,
    init_from: str,
    with_heads: bool,
    training_texts: Callable[[], Iterable[str]],
) -> tuple[nn.Module, tokenizers.Tokenizer]:
    """(net, tokenizer): an encoder, or with ``with_heads`` the encoder and pretraining heads."""
    arch = model_cfg["arch"]
    if arch not in ARCHS:
        raise PlmbenchError(f"model.arch={arch!r} is not implemented yet: use one of {list(ARCHS)}")
    kind = init_from.partition(":")[0]
    if kind in ("hf", "ckpt"):
        return from_hf(checkpoint_dir(init_from), with_heads=with_heads)
    if init_from != "scratch":
        raise PlmbenchError(f"init_from={init_from!r}: use scratch, ckpt:<run dir> or hf:<dir>")
    tokenizer = train_wordpiece(
        training_texts(), vocab_size=model_cfg["vocab_size"], lowercase=model_cfg["lowercase"]
    )
    config = net_config(model_cfg, tokenizer.get_vocab_size(), SpecialTokens.of(tokenizer).pad)
    _, encoder_cls, pretraining_cls = ARCHS[arch]
    return (pretraining_cls if with_heads else encoder_cls)(config), tokenizer
