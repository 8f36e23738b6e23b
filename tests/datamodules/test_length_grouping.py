"""Length-grouped fine-tuning batches (datamodules/sampling.py, LengthGroupedSampler): every
example once per epoch, an order fixed by (seed, epoch), batches of similar lengths that cut
SST-2's padding against random batches, and under DDP each global batch split over the ranks
(``GlobalBatches``), every rank's batches grouped and the ranks' step counts equal."""

import random

import pytest
import torch

from datamodules.collate import token_mask
from datamodules.glue import GlueDataModule
from datamodules.sampling import EpochSampler, GlobalBatches, LengthGroupedSampler
from datamodules.tokenization import load_tokenizer

BATCH = 8


def lengths(n: int = 1000) -> list[int]:
    rng = random.Random(0)
    return [rng.randint(4, 120) for _ in range(n)]


def padding(order: list[int], sizes: list[int], batch_size: int = BATCH) -> float:
    """Share of padding when ``order`` is cut into batches of ``batch_size`` and padded to the
    longest."""
    slots = tokens = 0
    for start in range(0, len(order), batch_size):
        batch = [sizes[i] for i in order[start:start + batch_size]]
        slots += max(batch) * len(batch)
        tokens += sum(batch)
    return 1 - tokens / slots


def test_every_example_once_per_epoch_in_an_order_fixed_by_seed_and_epoch():
    sizes = lengths(1003)  # a last batch of 3
    sampler = LengthGroupedSampler(sizes, BATCH, seed=1, mega_batches=10)
    first = list(sampler)
    assert sorted(first) == list(range(1003)) and len(sampler) == 1003
    assert list(LengthGroupedSampler(sizes, BATCH, seed=1, mega_batches=10)) == first
    sampler.set_epoch(1)
    second = list(sampler)
    assert sorted(second) == sorted(first) and second != first
    assert list(LengthGroupedSampler(sizes, BATCH, seed=2, mega_batches=10)) != first
    # batches as the DataLoader cuts them: each of similar lengths, the short one last
    batches = [first[i:i + BATCH] for i in range(0, 1003, BATCH)]
    assert len(batches[-1]) == 3 and all(len(b) == BATCH for b in batches[:-1])
    random_order = list(EpochSampler(1003, seed=1))
    assert padding(first, sizes) < 0.25 * padding(random_order, sizes)
    # the batches' order is random: their longest lengths do not run down a mega-batch
    longest = [max(sizes[i] for i in b) for b in batches[:20]]
    assert longest != sorted(longest, reverse=True)


def test_a_resumed_epoch_continues_the_same_order():
    sizes = lengths()
    full = list(LengthGroupedSampler(sizes, BATCH, seed=0))
    resumed = LengthGroupedSampler(sizes, BATCH, seed=0)
    resumed.resume_at(0, 5 * BATCH)
    assert list(resumed) == full[5 * BATCH:]


def test_ranks_split_whole_batches_and_take_equal_steps():
    sizes = lengths(1001)
    share = BATCH // 4  # 4 ranks: a quarter of every global batch each
    ranks = [GlobalBatches(LengthGroupedSampler(sizes, BATCH, seed=0), share, 4, r)
             for r in range(4)]
    assert all(isinstance(s, torch.utils.data.DistributedSampler) for s in ranks)  # not rewrapped
    orders = [list(s) for s in ranks]
    assert len({len(order) for order in orders}) == 1  # equal steps
    assert set().union(*orders) == set(range(1001))
    assert sum(map(len, orders)) - 1001 < 4  # only the short last batch is padded
    single = padding(list(LengthGroupedSampler(sizes, BATCH, seed=0)), sizes)
    for order in orders:  # a rank's batches of 2 are as grouped as the global ones
        assert padding(order, sizes, share) <= single


@pytest.fixture
def tokenizer(minilm_path):
    return load_tokenizer(minilm_path)


def test_grouping_cuts_sst2_padding(mirror, tokenizer):
    """An epoch of 4,000 SST-2 sentences in batches of 32, through the real collate."""
    task = dict(name="glue/sst2", dataset="glue", config="sst2", hub_id="nyu-mll/glue",
                label_field="label", text_fields=["sentence"], num_labels=2,
                splits={"train": "train", "eval": []}, max_length=128,
                max_train_samples=4000, batch_size=32)
    measured = {}
    for grouped in (False, True):
        dm = GlueDataModule({**task, "group_by_length": grouped}, tokenizer, seed=0)
        dm.setup("fit")
        tokens = slots = rows = 0
        for batch in dm.train_dataloader():
            tokens += int(token_mask(batch).sum())
            slots += batch["input_ids"].numel()
            rows += len(batch["input_ids"])
        assert rows == 4000
        measured[grouped] = 1 - tokens / slots
    assert measured[False] > 0.4  # SST-2's sentences vary: random batches are half padding
    assert measured[True] < 0.1 * measured[False]
