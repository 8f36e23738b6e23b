"""ModernBERT and the models on its architecture end to end (issue 34), offline, on checkpoints
transformers saves: an ettin-style checkpoint in shards at a revision ``step...`` fine-tuned by
hub id through a hub cache in huggingface_hub's layout, a transformers classifier directory
fine-tuned by ``init_from=hf:<dir>``, the released tokenizers (ModernBERT's OLMo BPE, mmBERT's
Gemma 2) read as transformers reads them, the presets listed with their hub ids and sizes, and a
checkpoint of a family plmbench lacks refused in one line."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch

from datamodules.tokenization import load_tokenizer
from lit_models.archs import get_arch
from tests.bench.invoke import plmbench, read, records_under
from tests.conftest import require
from tests.hub_cache import lay_into_cache, modernbert_tokenizer, offline_cache
from tests.lit_models.interop.test_sharded_checkpoints import save_sharded

transformers = require("transformers")

TINY = ["task=glue/rte", "task.max_train_samples=8", "task.max_eval_samples=4",
        "trainer.max_steps=1", "trainer.enable_progress_bar=false"]
#: an intermediate checkpoint's branch, as the ettin repositories name them
STEP = "step1000"
TEXTS = [("The quick brown fox jumped over the lazy dog.", "A cat sat on the mat!"),
         ("Hello, world: it was a bright cold day in April.", None)]


def tiny_config(vocab_size: int, ids: dict, **values):
    """A transformers ModernBertConfig of a few layers, a window shorter than RTE's inputs."""
    return transformers.ModernBertConfig(
        vocab_size=vocab_size, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
        num_attention_heads=3, local_attention=6, global_attn_every_n_layers=2,
        max_position_embeddings=256, **ids, **values)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A masked-LM checkpoint saved in shards and a sequence classifier (mean pooling, two
    labels), both saved by transformers with ModernBERT's tokenizer files."""
    root = tmp_path_factory.mktemp("modernbert")
    whole, sharded, classifier = root / "whole", root / "sharded", root / "classifier"
    for directory in (whole, classifier):
        directory.mkdir()
        vocab_size, ids = modernbert_tokenizer(directory)
    torch.manual_seed(0)
    transformers.ModernBertForMaskedLM(tiny_config(vocab_size, ids)).save_pretrained(whole)
    save_sharded(whole, sharded)
    config = tiny_config(vocab_size, ids, classifier_pooling="mean",
                         id2label={0: "entailment", 1: "not_entailment"})  # RTE's
    transformers.ModernBertForSequenceClassification(config).save_pretrained(classifier)
    return sharded, classifier


def test_a_sharded_checkpoint_at_a_revision_fine_tunes_by_hub_id_offline(checkpoints, mirror,
                                                                         monkeypatch, tmp_path):
    """``model=ettin-encoder-150m init_from=hf:jhu-clsp/ettin-encoder-150m@step...`` on a cache
    holding a tiny stand-in under that id: the revision resolves offline to its commit, every
    shard is read, and the record pins the commit and the shards' sha256."""
    sharded, _ = checkpoints
    cache = tmp_path / "hub"
    repo_id = "jhu-clsp/ettin-encoder-150m"
    commit, snapshot = lay_into_cache(cache, repo_id, sharded, revisions=("main", STEP))
    offline_cache(monkeypatch, cache)
    results = tmp_path / "results"
    spec = f"hf:{repo_id}@{STEP}"
    result = plmbench("run", "model=ettin-encoder-150m", f"init_from={spec}", *TINY,
                      f"results_dir={results}")
    assert result.rc == 0, result.err
    (path,) = records_under(results)
    record = read(path.parent)
    assert record["status"] == "ok" and record["config"]["model"]["arch"] == "modernbert"
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    shards = list(dict.fromkeys(index["weight_map"].values()))
    lines = "".join(f"{name} {hashlib.sha256((sharded / name).read_bytes()).hexdigest()}\n"
                    for name in shards)
    assert record["checkpoint"] == {
        "id": repo_id, "revision": STEP, "commit": commit,
        "weights": "model.safetensors.index.json",
        "weights_sha256": hashlib.sha256(lines.encode()).hexdigest()}
    assert record["encoder_parameters"] == sum(
        p.numel() for p in transformers.ModernBertModel.from_pretrained(snapshot).parameters())


def test_a_transformers_classifier_directory_fine_tunes(checkpoints, mirror, tmp_path):
    _, classifier = checkpoints
    results = tmp_path / "results"
    result = plmbench("run", "model=modernbert-tiny-scratch", f"init_from=hf:{classifier}",
                      *TINY, "save_model=true", f"results_dir={results}")
    assert result.rc == 0, result.err
    (path,) = records_under(results)
    assert read(path.parent)["status"] == "ok"
    # the fine-tuned export is transformers' classifier again, with its pooling
    again = transformers.AutoModelForSequenceClassification.from_pretrained(path.parent / "model")
    assert type(again).__name__ == "ModernBertForSequenceClassification"
    assert again.config.classifier_pooling == "mean"


def gemma_tokenizer(directory) -> None:
    """mmBERT's Gemma 2 tokenizer files at toy size: a byte-fallback BPE over text whose spaces
    the normalizer writes as "▁" (no pre-tokenizer), <pad> <eos> <bos> <unk> <mask> first,
    "<bos> A <eos>" and "<bos> A <eos> B <eos>" as its post-processor."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, processors, trainers
    from tokenizers.models import BPE

    from tests.lit_models.interop.test_hf_layouts import CORPUS

    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    backend = Tokenizer(BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    backend.normalizer = normalizers.Replace(" ", "▁")
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse()])
    alphabet = [f"<0x{byte:02X}>" for byte in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=[*specials, *alphabet],
                                  show_progress=False)
    backend.train_from_iterator([text.replace(" ", "▁") for text in CORPUS], trainer)
    backend.add_special_tokens([AddedToken(t, normalized=False) for t in specials])
    bos, eos = backend.token_to_id("<bos>"), backend.token_to_id("<eos>")
    backend.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", pair="<bos> $A <eos> $B <eos>",
        special_tokens=[("<bos>", bos), ("<eos>", eos)])
    backend.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
         "cls_token": "<bos>", "sep_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
         "mask_token": "<mask>"}))


@pytest.mark.parametrize("family", ["modernbert", "mmbert"])
def test_the_released_tokenizers_read_as_transformers_reads_them(family, tmp_path):
    """ModernBERT's and mmBERT's tokenizer.json, read by ``tokenizers`` (no transformers at run
    time), give transformers' ids for texts and pairs, with the roles their configs name."""
    if family == "modernbert":
        modernbert_tokenizer(tmp_path)
    else:
        gemma_tokenizer(tmp_path)
    ours = load_tokenizer(tmp_path, get_arch("modernbert").tokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    for first, second in TEXTS:
        assert ours.backend.encode(first, second).ids == theirs(first, second)["input_ids"]
    assert ours.special.pad == theirs.pad_token_id and ours.special.cls == theirs.cls_token_id
    assert ours.special.sep == theirs.sep_token_id and ours.special.mask == theirs.mask_token_id


def test_the_presets_are_listed_with_their_hub_ids_and_sizes(monkeypatch, tmp_path):
    offline_cache(monkeypatch, tmp_path / "empty")
    result = plmbench("models", "list")
    assert result.rc == 0, result.err
    rows = {line.split()[0]: line.split() for line in result.out.splitlines()[3:]}
    expected = {"ModernBERT-base": ("answerdotai/ModernBERT-base", "149M"),
                "ModernBERT-large": ("answerdotai/ModernBERT-large", "395M"),
                "ettin-encoder-17m": ("jhu-clsp/ettin-encoder-17m", "17M"),
                "ettin-encoder-150m": ("jhu-clsp/ettin-encoder-150m", "150M"),
                "ettin-encoder-1b": ("jhu-clsp/ettin-encoder-1b", "1B"),
                "mmBERT-small": ("jhu-clsp/mmBERT-small", "140M"),
                "mmBERT-base": ("jhu-clsp/mmBERT-base", "307M")}
    for name, (hub_id, size) in expected.items():
        assert rows[name][1:4] == ["modernbert", hub_id, size], rows[name]


def test_a_checkpoint_needing_remote_code_is_one_line_and_nothing_written(checkpoints, mirror,
                                                                          tmp_path):
    """A family plmbench lacks (a config whose auto_map names modelling code of its own, as
    Alibaba's "new" models): exit 2, one line naming its model_type and what plmbench reads."""
    _, classifier = checkpoints
    remote = tmp_path / "remote"
    shutil.copytree(classifier, remote)
    config = json.loads((remote / "config.json").read_text())
    config |= {"model_type": "new", "auto_map": {"AutoModel": "modeling.NewModel"}}
    (remote / "config.json").write_text(json.dumps(config))
    results = tmp_path / "results"
    result = plmbench("run", "model=modernbert-tiny-scratch", f"init_from=hf:{remote}", *TINY,
                      f"results_dir={results}")
    assert result.rc == 2, result.err
    errors = [line for line in result.err_lines if line.startswith("error:")]
    assert len(errors) == 1 and result.err_lines[-1] == errors[0], result.err
    assert "model_type 'new'" in errors[0] and "'modernbert'" in errors[0]
    assert "auto_map" in errors[0]
    assert not results.exists()
