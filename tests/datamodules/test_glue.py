"""GlueDataModule on the real mirror: tokenization, truncation, padding, labels, caching."""

import pyarrow.parquet as pq
import pytest
import torch
from omegaconf import OmegaConf
from tokenizers import Tokenizer

from datamodules.errors import PlmbenchError
from datamodules.glue import GlueDataModule
from datamodules.sources import mirror_path
from datamodules.tokenization import load_tokenizer, tokenizer_fingerprint

TASKS = {
    "rte": dict(text_fields=["sentence1", "sentence2"], num_labels=2),
    "stsb": dict(text_fields=["sentence1", "sentence2"], num_labels=1),
    "sst2": dict(text_fields=["sentence"], num_labels=2),
    "mnli": dict(
        text_fields=["premise", "hypothesis"], num_labels=3,
        splits={"train": "train", "eval": ["validation_matched", "validation_mismatched"]},
    ),
}


def glue_task(config: str, **overrides) -> dict:
    task = dict(
        name=f"glue/{config}", dataset="glue", config=config, hub_id="nyu-mll/glue",
        label_field="label", splits={"train": "train", "eval": ["validation"]}, max_length=128,
        max_train_samples=48, max_eval_samples=40, batch_size=8, eval_batch_size=16,
    )
    return {**task, **TASKS[config], **overrides}


@pytest.fixture
def tokenizer(minilm_path):
    return load_tokenizer(minilm_path)


def raw_rows(config: str, split: str, n: int) -> list[dict]:
    return pq.read_table(mirror_path("glue", config, split)).slice(0, n).to_pylist()


def test_rte_pairs_padding_and_labels(mirror, tokenizer) -> None:
    torch.manual_seed(0)
    before = tokenizer.backend.to_str()
    dm = GlueDataModule(OmegaConf.create(glue_task("rte")), tokenizer, seed=0)
    dm.setup("fit")
    assert tokenizer.backend.to_str() == before  # truncation went on a copy
    assert dm.num_train_examples == 48 and dm.eval_split_names == ["validation"]

    # first N rows, in file order, tokenized exactly as the tokenizer encodes the pair
    rows = raw_rows("rte", "train", 48)
    for example, row in zip(dm.train_data, rows, strict=True):
        expected = tokenizer.backend.encode(row["sentence1"], row["sentence2"])
        if len(expected.ids) > 128:  # truncation itself is checked below
            assert len(example["input_ids"]) == 128
            continue
        assert example["input_ids"] == expected.ids
        assert example["token_type_ids"] == expected.type_ids
        assert example["labels"] == row["label"]

    batch = next(iter(dm.train_dataloader()))
    # "index": each example's row in its split, what the predictions files are keyed by
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels", "index"}
    assert batch["labels"].dtype == torch.int64 and batch["input_ids"].dtype == torch.int64
    lengths = batch["attention_mask"].sum(1)
    assert batch["input_ids"].shape == (8, lengths.max().item())  # padded to the batch's longest
    pad = ~batch["attention_mask"].bool()
    assert (batch["input_ids"][pad] == 0).all() and (batch["token_type_ids"][pad] == 0).all()
    for ids, types, n in zip(batch["input_ids"], batch["token_type_ids"], lengths, strict=True):
        seps = (ids[:n] == 102).nonzero().flatten().tolist()
        assert ids[0] == 101 and len(seps) == 2 and seps[1] == n - 1
        assert (types[: seps[0] + 1] == 0).all() and (types[seps[0] + 1 : n] == 1).all()

    (val_loader,) = dm.val_dataloader()
    assert sum(len(b["labels"]) for b in val_loader) == 40


def test_shuffle_is_seeded(mirror, tokenizer) -> None:
    torch.manual_seed(0)

    def epoch(seed: int) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        dm = GlueDataModule(glue_task("rte", max_train_samples=200), tokenizer, seed=seed)
        dm.setup()
        seen = [tuple(ids[mask.bool()].tolist()) for b in dm.train_dataloader()
                for ids, mask in zip(b["input_ids"], b["attention_mask"], strict=True)]
        return seen, [tuple(ids) for ids in dm.train_data["input_ids"]]

    order, file_order = epoch(0)
    assert sorted(order) == sorted(file_order) and order != file_order  # a permutation
    assert epoch(0)[0] == order  # same seed, same order
    assert epoch(1)[0] != order


def test_longest_first_truncation(mirror, tokenizer) -> None:
    dm = GlueDataModule(glue_task("rte", max_length=24, max_train_samples=100), tokenizer)
    dm.setup()
    truncated = 0
    for example, row in zip(dm.train_data, raw_rows("rte", "train", 100), strict=True):
        a = tokenizer.backend.encode(row["sentence1"], add_special_tokens=False).ids
        b = tokenizer.backend.encode(row["sentence2"], add_special_tokens=False).ids
        ids, types = example["input_ids"], example["token_type_ids"]
        kept_a, kept_b = types.count(0) - 2, types.count(1) - 1
        assert len(ids) == min(24, len(a) + len(b) + 3)
        assert ids == [101, *a[:kept_a], 102, *b[:kept_b], 102]  # each side keeps a prefix
        if len(a) + len(b) > 21:
            truncated += 1
            # the longer side loses tokens first: only one side is cut, or both to within one
            cut_a, cut_b = kept_a < len(a), kept_b < len(b)
            assert (cut_a != cut_b and max(kept_a, kept_b) >= min(len(a), len(b)) or
                    abs(kept_a - kept_b) <= 1)
    assert truncated > 50


def test_stsb_regression_labels(mirror, tokenizer) -> None:
    dm = GlueDataModule(glue_task("stsb"), tokenizer)
    dm.setup()
    (val_loader,) = dm.val_dataloader()
    labels = torch.cat([b["labels"] for b in val_loader])
    assert labels.dtype == torch.float32 and labels.shape == (40,)
    expected = torch.tensor([row["label"] for row in raw_rows("stsb", "validation", 40)])
    torch.testing.assert_close(labels, expected)  # eval order is file order
    assert 0.0 <= labels.min() and labels.max() <= 5.0 and labels.std() > 0.5


def test_sst2_single_sentence_with_a_padding_tokenizer(mirror, minilm_path) -> None:
    padding = Tokenizer.from_file(str(minilm_path / "tokenizer.json"))  # pads everything to 128
    assert padding.padding is not None
    tokenizer = load_tokenizer(minilm_path)
    dm = GlueDataModule(glue_task("sst2", max_train_samples=16), tokenizer)
    dm.setup()
    assert max(len(ids) for ids in dm.train_data["input_ids"]) < 128  # examples are unpadded
    batch = next(iter(dm.train_dataloader()))
    assert (batch["token_type_ids"] == 0).all()
    lengths = batch["attention_mask"].sum(1).tolist()
    for ids, n in zip(batch["input_ids"].tolist(), lengths, strict=True):
        assert ids[0] == 101 and ids[n - 1] == 102 and 102 not in ids[1 : n - 1]
    assert set(batch["labels"].tolist()) <= {0, 1}


def test_tokenized_splits_are_cached_by_fingerprint(mirror, tokenizer, monkeypatch) -> None:
    calls = []
    encode = GlueDataModule._encode

    def counting_encode(self, batch):
        calls.append(len(batch["label"]))
        return encode(self, batch)

    monkeypatch.setattr(GlueDataModule, "_encode", counting_encode)

    before = tokenizer_fingerprint(tokenizer)
    first = GlueDataModule(glue_task("rte"), tokenizer)
    first.setup()
    assert calls  # tokenized once
    cache_file = first.train_data.cache_files[0]["filename"]
    assert tokenizer_fingerprint(tokenizer) == before  # truncation went on a copy

    calls.clear()
    second = GlueDataModule(glue_task("rte"), tokenizer)
    second.setup()
    assert calls == []  # same fingerprint: read back from the cache file
    assert second.train_data.cache_files[0]["filename"] == cache_file
    assert second.train_data["input_ids"] == first.train_data["input_ids"]

    shorter = GlueDataModule(glue_task("rte", max_length=32), tokenizer)
    shorter.setup()
    assert calls  # max_length changed: re-tokenized into a new cache file
    assert shorter.train_data.cache_files[0]["filename"] != cache_file
    assert max(len(ids) for ids in shorter.train_data["input_ids"]) == 32


def test_two_eval_splits_missing_offline_is_a_plmbench_error(mirror, tokenizer) -> None:
    dm = GlueDataModule(glue_task("mnli"), tokenizer)
    assert dm.eval_split_names == ["validation_matched", "validation_mismatched"]
    with pytest.raises(PlmbenchError, match=r"^glue/mnli split train not found: tried .*mnli"):
        dm.setup()


def test_bad_task_config(tokenizer) -> None:
    with pytest.raises(PlmbenchError, match="text_fields must name one or two columns"):
        GlueDataModule(glue_task("rte", text_fields=["a", "b", "c"]), tokenizer)
    with pytest.raises(PlmbenchError, match=r"lacks keys \['max_length'\]"):
        GlueDataModule({k: v for k, v in glue_task("rte").items() if k != "max_length"}, tokenizer)
    with pytest.raises(PlmbenchError, match="call setup"):
        GlueDataModule(glue_task("rte"), tokenizer).train_dataloader()


def scibert_task(config: str, label_names: list[str], **overrides) -> dict:
    task = dict(
        name=f"scibert_tc/{config}", dataset="scibert_tc", config=config, hub_id=None,
        text_fields=["text"], label_field="label", num_labels=len(label_names),
        label_names=label_names, splits={"train": "train", "eval": ["validation", "test"]},
        max_length=128, max_train_samples=60, max_eval_samples=30, batch_size=8,
    )
    return {**task, **overrides}


def test_string_labels_are_numbered_by_label_names(mirror, tokenizer) -> None:
    """SciBERT's jsonl schema: each row's string label becomes its index in label_names."""
    names = ["Background", "CompareOrContrast", "Extends", "Future", "Motivation", "Uses"]
    dm = GlueDataModule(OmegaConf.create(scibert_task("citation_intent", names)), tokenizer)
    dm.setup("fit")
    for data, split, n in ((dm.train_data, "train", 60), (dm.eval_data[1], "test", 30)):
        rows = pq.read_table(mirror_path("scibert_tc", "citation_intent", split)).slice(0, n)
        assert list(data["labels"]) == [names.index(r["label"]) for r in rows.to_pylist()]
    assert len(set(dm.train_data["labels"])) > 2


def test_a_label_outside_label_names_is_one_line(mirror, tokenizer) -> None:
    task = scibert_task("citation_intent", ["Background", "Uses", "Motivation", "Future",
                                            "Extends", "Other"])
    with pytest.raises(PlmbenchError, match=r"labels \['CompareOrContrast'\] .* not in label_"):
        GlueDataModule(OmegaConf.create(task), tokenizer).setup("fit")
    with pytest.raises(PlmbenchError, match="2 label_names for num_labels=3"):
        GlueDataModule(OmegaConf.create({**task, "label_names": ["a", "b"], "num_labels": 3}),
                       tokenizer)


def test_an_eval_split_of_another_config(mirror, tokenizer) -> None:
    """Cross-domain transfer: trained on books, evaluated on the test reviews of dvd."""
    task = dict(name="amazon/books", dataset="amazon_multidomain_sentiment", config="books",
                text_fields=["text"], label_field="label", num_labels=2,
                splits={"train": "train", "eval": ["validation", "dvd/test"]}, max_length=64,
                max_train_samples=8, max_eval_samples=12, batch_size=4)
    dm = GlueDataModule(OmegaConf.create(task), tokenizer)
    dm.setup("fit")
    dvd = pq.read_table(mirror_path("amazon_multidomain_sentiment", "dvd", "test"))
    rows = dvd.slice(0, 12).to_pylist()
    expected = [tokenizer.truncating(64).encode(r["text"]).ids for r in rows]
    assert [list(ids) for ids in dm.eval_data[1]["input_ids"]] == expected
    assert list(dm.eval_data[1]["labels"]) == [r["label"] for r in rows]
    assert set(dm.fingerprints) == {"train", "validation", "dvd/test"}


def test_held_out_rows_follow_the_training_cap(mirror, tokenizer) -> None:
    """``held_out(split, start, n)``: rows start..start+n of the file, the rows a run capped at
    ``start`` never trained on, encoded and labelled as training rows; clipped at its end."""
    dm = GlueDataModule(OmegaConf.create(glue_task("sst2")), tokenizer, seed=0)
    dm.setup("fit")
    held = dm.held_out("train", 48, 20)
    rows = raw_rows("sst2", "train", 68)[48:]
    assert [e["labels"] for e in held] == [r["label"] for r in rows]
    assert [e["input_ids"] for e in held] == [tokenizer.backend.encode(r["sentence"]).ids
                                              for r in rows]
    assert not {tuple(e["input_ids"]) for e in held} & {tuple(e["input_ids"])
                                                      for e in dm.train_data}
    total = pq.read_metadata(mirror_path("glue", "sst2", "train")).num_rows
    assert len(dm.held_out("train", total - 3, 20)) == 3
    assert len(dm.held_out("train", total, 20)) == 0
