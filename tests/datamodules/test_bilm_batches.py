"""The biLM's training batches (datamodules/bilm.py) are grouped by length: every sentence once
per epoch, reproducibly, with far less padding than shuffled batches, unless the task turns it
off."""

import random

import torch

from datamodules.bilm import BiLMDataModule
from datamodules.sampling import EpochSampler, LengthGroupedSampler
from datamodules.words import WordVocabulary

TASK = {"name": "pretrain/toy", "dataset": "toy", "config": None, "text_field": "text",
        "splits": {"train": "train", "eval": []}, "document_format": "article",
        "max_length": 64, "batch_size": 8}


def sentences() -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choices(["the", "cat", "sat", "on", "a", "mat"], k=rng.randint(1, 60)))
            for _ in range(400)]


def padding_share(dm: BiLMDataModule) -> float:
    slots = real = 0
    for batch in dm.train_dataloader():
        slots += batch["input_ids"].numel()
        real += int(batch["char_ids"].any(dim=-1).sum())
    return 1 - real / slots


def module(**task) -> BiLMDataModule:
    text = sentences()
    vocab = WordVocabulary.count([s.split() for s in text], None, 1, False)
    dm = BiLMDataModule({**TASK, **task}, vocab, seed=1, sentences=("toy", {"train": text}))
    dm.setup("fit")
    return dm


def test_training_batches_are_grouped_by_length_with_little_padding():
    grouped, shuffled = module(), module(group_by_length=False)
    assert isinstance(grouped._sampler(grouped.train_data), LengthGroupedSampler)
    assert type(shuffled._sampler(shuffled.train_data)) is EpochSampler
    order = list(grouped._sampler(grouped.train_data))
    assert sorted(order) == list(range(len(grouped.train_data)))  # each sentence once
    assert order == list(grouped._sampler(grouped.train_data))  # reproducible
    assert padding_share(shuffled) > 0.35 and padding_share(grouped) < 0.05
    # the same examples, the same targets: grouping only reorders
    words = sorted(e["words"] for e in grouped.train_data)
    assert words == sorted(e["words"] for e in shuffled.train_data)
    first = next(iter(grouped.train_dataloader()))
    assert torch.equal(first["input_ids"] != 0, first["char_ids"].any(dim=-1))
