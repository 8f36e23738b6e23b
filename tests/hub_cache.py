"""A Hugging Face hub cache written by the tests, holding a tiny checkpoint of every
architecture plmbench imports, in the layout ``huggingface_hub`` writes and reads
(``models--<org>--<name>/{refs/<revision>, snapshots/<commit>/<file>, blobs/<etag>}``, each
snapshot file a relative symlink to its blob, an LFS file's blob named by its sha256 and any
other's by its git blob sha1: ``huggingface_hub.file_download``), so ``snapshot_download`` and
``try_to_load_from_cache`` find them offline.

Each checkpoint is what its published repository holds, at tiny size: the weights transformers'
own pretraining class saves (``save_pretrained``, safetensors) from a transformers config of the
architecture's ``<arch>-tiny-scratch`` preset sizes, config.json as transformers writes it, and the
tokenizer files of the published checkpoints of that architecture: BERT's, DistilBERT's and
ELECTRA's ``vocab.txt``; RoBERTa's, Longformer's, DeBERTa's and BART's ``vocab.json`` +
``merges.txt`` (GPT-2's also its ``tokenizer.json``); ModernBERT's ``tokenizer.json`` alone
(``modernbert_tokenizer``); ALBERT's, T5's and XLNet's ``spiece.model``, DeBERTa-v3's
``spm.model`` (each trained here on a small corpus, ``tests.lit_models.interop.test_hf_layouts``).

``build_hub_cache(root)`` writes them all (``plmbench-tests/tiny-<arch>``, revisions ``main`` and
``v1``); ``lay_into_cache`` lays any directory into a cache as a repository;
``offline_cache(monkeypatch, root)`` points ``huggingface_hub`` at a cache, offline;
``session_hub_cache(tmp_path_factory)`` builds the cache once per test session, for the session
fixtures of every module that uses it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from lit_models.archs import get_arch
from tests.conftest import REPO, require, tiny_preset_name

ORG = "plmbench-tests"
#: the tag every tiny checkpoint has besides main
TAG = "v1"
#: the architectures of the published checkpoints (SpanBERT's are BERT's)
ARCHS = ("bert", "roberta", "albert", "distilbert", "electra", "deberta", "xlnet", "longformer",
         "gpt2", "t5", "bart", "deberta_v2", "modernbert")
#: the released DeBERTa-v3 spm.model's special pieces (``train_spm`` options)
DEBERTA_V3_SPM = dict(pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]",
                      eos_piece="[SEP]", unk_piece="[UNK]")
#: files the hub stores in LFS (their blobs are named by their sha256)
LFS_SUFFIXES = (".safetensors", ".bin", ".model")
#: a toy WordPiece vocabulary: BERT's special tokens first, as the tests' own (test_hf.py)
WORDPIECE = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
             *"the a cat dog sat on mat quick brown fox jump over lazy hello world it was and "
              "play sentence is not , . ! ? ##s ##ed ##ing".split()]


@dataclass(frozen=True)
class CachedCheckpoint:
    """One repository of the cache: its id, a revision that resolves to ``commit``, the
    snapshot directory and the sha256 of its weights file."""

    repo_id: str
    commit: str
    snapshot: Path
    weights_sha256: str
    arch: str

    def spec(self, revision: str = TAG) -> str:
        return f"hf:{self.repo_id}@{revision}"


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lay_into_cache(cache: Path, repo_id: str, source: Path, revisions=("main", TAG)
                   ) -> tuple[str, Path]:
    """``source``'s files as repository ``repo_id`` of the hub cache ``cache``, every one of
    ``revisions`` pointing at one commit (named by the files' hashes); (commit, snapshot)."""
    storage = cache / f"models--{repo_id.replace('/', '--')}"
    files = sorted(p for p in source.iterdir() if p.is_file())
    etags = {}
    for path in files:
        data = path.read_bytes()
        etags[path.name] = (hashlib.sha256(data).hexdigest() if path.suffix in LFS_SUFFIXES
                            else _git_blob_sha1(data))
        blob = storage / "blobs" / etags[path.name]
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
    commit = hashlib.sha1(json.dumps(etags, sort_keys=True).encode()).hexdigest()
    snapshot = storage / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, etag in etags.items():
        os.symlink(os.path.join("..", "..", "blobs", etag), snapshot / name)
    for revision in revisions:
        ref = storage / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
    return commit, snapshot


def _preset_config(arch_name: str, vocab_size: int, **ids):
    """transformers' config of the ``<arch>-tiny-scratch`` preset's sizes (its keys that are the
    architecture's config fields, which are transformers' names)."""
    transformers = require("transformers")
    arch = get_arch(arch_name)
    path = REPO / "conf/model" / f"{tiny_preset_name(arch_name)}.yaml"
    preset = OmegaConf.to_container(OmegaConf.load(path))
    names = {f for f in arch.config.__dataclass_fields__} - set(arch.hf.config_only_ours)
    values = {k: v for k, v in preset.items() if k in names} | {"vocab_size": vocab_size} | ids
    return transformers.AutoConfig.for_model(arch.hf.model_type, **values)


def _tokenizer_files(arch_name: str, directory: Path) -> tuple[int, dict]:
    """The published tokenizer files of ``arch_name``'s checkpoints into ``directory``:
    (vocabulary size, config.json's special ids)."""
    from tokenizers import processors
    from tokenizers.models import BPE

    from tests.lit_models.interop.test_hf_layouts import byte_level_bpe, train_spm

    if arch_name in ("bert", "distilbert", "electra"):
        (directory / "vocab.txt").write_text("".join(f"{t}\n" for t in WORDPIECE))
        (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
        return len(WORDPIECE), {"pad_token_id": 0}
    if arch_name == "modernbert":
        return modernbert_tokenizer(directory)
    if arch_name == "gpt2":
        backend = byte_level_bpe([], ["<|endoftext|>"])
        backend.post_processor = processors.ByteLevel(trim_offsets=False)
        backend.save(str(directory / "tokenizer.json"))
        backend.model.save(str(directory))
        end = backend.token_to_id("<|endoftext|>")
        return backend.get_vocab_size(), {"bos_token_id": end, "eos_token_id": end}
    if arch_name in ("roberta", "longformer", "bart", "deberta"):
        specials = (["[PAD]", "[CLS]", "[SEP]", "[UNK]"] if arch_name == "deberta"
                    else ["<s>", "<pad>", "</s>", "<unk>"])  # fairseq's dictionary order
        trained = json.loads(byte_level_bpe(specials, []).to_str())["model"]
        mask = "[MASK]" if arch_name == "deberta" else "<mask>"
        vocab = {**trained["vocab"], mask: len(trained["vocab"])}
        BPE(vocab, [tuple(merge) for merge in trained["merges"]]).save(str(directory))
        ids = ({"pad_token_id": 0} if arch_name == "deberta"
               else {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2})
        return len(vocab), ids | ({"decoder_start_token_id": 2} if arch_name == "bart" else {})
    if arch_name == "deberta_v2":  # DeBERTa-v3's spm.model: [PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3;
        sp = train_spm(directory / "spm.model", **DEBERTA_V3_SPM)  # [MASK] follows the pieces
        (directory / "tokenizer_config.json").write_text(json.dumps(
            {"do_lower_case": False, "vocab_type": "spm"}))
        return sp.get_piece_size() + 1, {"pad_token_id": 0}
    spiece = directory / "spiece.model"
    if arch_name == "t5":  # pad 0, </s> 1, <unk> 2; the 100 sentinels numbered after the pieces
        sp = train_spm(spiece, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
        return sp.get_piece_size() + 100, {"pad_token_id": 0, "eos_token_id": 1,
                                           "decoder_start_token_id": 0}
    if arch_name == "albert":  # <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4
        sp = train_spm(spiece, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                       control_symbols=["[CLS]", "[SEP]"], user_defined_symbols=["[MASK]"])
        return sp.get_piece_size(), {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
    # xlnet-base-cased's: <unk> 0, <s> 1, </s> 2, <cls> 3, <sep> 4, <pad> 5, <mask> 6
    sp = train_spm(spiece, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                   control_symbols=["<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"])
    return sp.get_piece_size(), {"pad_token_id": 5, "bos_token_id": 1, "eos_token_id": 2}


def modernbert_tokenizer(directory: Path) -> tuple[int, dict]:
    """ModernBERT's published tokenizer files into ``directory``: OLMo's byte-level BPE in a
    tokenizer.json whose [UNK] [CLS] [SEP] [PAD] [MASK] come after the merges (ids 50280-50284 in
    the released one; [MASK] eats the space before it), "[CLS] A [SEP] B [SEP]" as its
    post-processor, and a tokenizer_config.json naming PreTrainedTokenizerFast and the roles."""
    from tokenizers import AddedToken, processors

    from tests.lit_models.interop.test_hf_layouts import byte_level_bpe

    backend = byte_level_bpe([], ["[UNK]", "[CLS]", "[SEP]", "[PAD]"])
    backend.add_special_tokens([AddedToken("[MASK]", lstrip=True, normalized=False)])
    ids = {token: backend.token_to_id(token) for token in ("[CLS]", "[SEP]", "[PAD]")}
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    backend.save(str(directory / "tokenizer.json"))
    roles = {"unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
             "pad_token": "[PAD]", "mask_token": "[MASK]"}
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 8192,
         "model_input_names": ["input_ids", "attention_mask"], **roles}))
    return backend.get_vocab_size(), {
        "pad_token_id": ids["[PAD]"], "cls_token_id": ids["[CLS]"], "sep_token_id": ids["[SEP]"],
        "bos_token_id": ids["[CLS]"], "eos_token_id": ids["[SEP]"]}


def write_checkpoint(arch_name: str, directory: Path, seed: int = 0) -> None:
    """A tiny published-layout checkpoint of ``arch_name`` into ``directory``: transformers'
    pretraining class (its encoder class where it has none) with random weights drawn with
    ``seed`` saved by ``save_pretrained``, and the tokenizer files."""
    transformers = require("transformers")
    directory.mkdir(parents=True, exist_ok=True)
    vocab_size, ids = _tokenizer_files(arch_name, directory)
    config = _preset_config(arch_name, vocab_size, **ids)
    torch.manual_seed(seed)
    classes = get_arch(arch_name).hf.classes  # DeBERTa-v3's pretraining net has no class there
    model = getattr(transformers, classes["pretraining"], None) or getattr(
        transformers, classes["encoder"])
    model = model(config)
    model.save_pretrained(str(directory))


def build_hub_cache(root: Path, archs=ARCHS) -> dict[str, CachedCheckpoint]:
    """A hub cache at ``root`` with ``plmbench-tests/tiny-<arch>`` for each of ``archs``."""
    built = {}
    for arch_name in archs:
        source = root.parent / f"{root.name}-sources" / arch_name
        write_checkpoint(arch_name, source)
        repo_id = f"{ORG}/tiny-{arch_name}"
        commit, snapshot = lay_into_cache(root, repo_id, source)
        weights = hashlib.sha256((source / "model.safetensors").read_bytes()).hexdigest()
        built[arch_name] = CachedCheckpoint(repo_id, commit, snapshot, weights, arch_name)
    return built


def offline_cache(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """``huggingface_hub`` (and transformers through it) reading the cache at ``root`` only:
    ``HF_HUB_CACHE`` and ``HF_HUB_OFFLINE=1``, in the environment and in the constants the
    library read at import."""
    from huggingface_hub import constants

    from datamodules import hub

    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.resolve.cache_clear()  # resolutions of another cache



def session_hub_cache(tmp_path_factory: pytest.TempPathFactory
                      ) -> tuple[Path, dict[str, CachedCheckpoint]]:
    """(the cache's root, its checkpoints by architecture), built once per test session for
    every module's session fixture that asks."""
    base = tmp_path_factory.getbasetemp()
    if base not in _SESSIONS:
        root = tmp_path_factory.mktemp("hf") / "hub"
        _SESSIONS[base] = root, build_hub_cache(root)
    return _SESSIONS[base]


_SESSIONS: dict[Path, tuple[Path, dict[str, CachedCheckpoint]]] = {}
