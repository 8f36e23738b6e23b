"""How an evaluation's and a training run's examples are dealt to DDP ranks
(``datamodules/eval_sampling.py``, ``datamodules/sampling.py``'s ``GlobalBatches``) and how the
recipe's global batch splits over them (``datamodules/batching.py``)."""

import itertools

import pytest

from datamodules.batching import Batching
from datamodules.errors import PlmbenchError
from datamodules.eval_sampling import EvaluationSampler
from datamodules.sampling import EpochSampler, GlobalBatches


def batches(indices: list[int], size: int) -> list[list[int]]:
    return [indices[i:i + size] for i in range(0, len(indices), size)]


@pytest.mark.parametrize(("size", "batch", "world"),
                         list(itertools.product((1, 2, 5, 7, 101, 277), (1, 3, 64), (1, 2, 3, 8))))
def test_every_example_once_in_one_process_batches(size, batch, world):
    if size < world:
        with pytest.raises(PlmbenchError, match=f"fewer than the {world} processes"):
            EvaluationSampler(size, batch, world, 0)
        return
    shares = [list(EvaluationSampler(size, batch, world, rank)) for rank in range(world)]
    assert sorted(sum(shares, [])) == list(range(size))  # no repeat, none left out
    assert all(shares) and [len(EvaluationSampler(size, batch, world, r)) for r in range(world)] \
        == [len(s) for s in shares]
    per_rank = [batches(share, batch) for share in shares]
    dealt = [per_rank[k % world][k // world] for k in range(sum(map(len, per_rank)))]
    assert sum(dealt, []) == list(range(size))  # the ranks' batches in turn: the examples in order
    if -(-size // batch) >= world:  # each batch is one a single process cuts
        assert dealt == batches(list(range(size)), batch)


def test_lightning_keeps_it_as_it_is():
    from torch.utils.data import DistributedSampler

    assert isinstance(EvaluationSampler(10, 3, 2, 1), DistributedSampler)


@pytest.mark.parametrize(("size", "share", "world"), [(64, 16, 2), (70, 8, 3), (33, 4, 4),
                                                     (5, 16, 2)])
def test_global_batches_are_one_process_batches(size, share, world):
    one = EpochSampler(size, seed=3).order(0).tolist()
    ranks = [GlobalBatches(EpochSampler(size, seed=3), share, world, r) for r in range(world)]
    streams = [list(r) for r in ranks]
    assert len({len(s) for s in streams}) == 1  # every rank steps as often
    width = share * world
    for step in range(len(one) // width):  # each full step: one process's global batch
        union = sum((s[step * share:(step + 1) * share] for s in streams), [])
        assert union == one[step * width:(step + 1) * width]
    assert set(sum(streams, [])) == set(one)  # the short last step: its examples, padded


def test_global_batches_resume_where_the_rank_stood():
    full = list(GlobalBatches(EpochSampler(40, seed=1), 4, 2, 1))
    resumed = GlobalBatches(EpochSampler(40, seed=1), 4, 2, 1)
    resumed.resume_at(0, 8)
    assert list(resumed) == full[8:]


@pytest.mark.parametrize(("batch", "world", "accumulate", "per_process"),
                         [(32, 1, 1, 32), (32, 2, 1, 16), (32, 2, 2, 8), (48, 3, 2, 8)])
def test_the_global_batch_splits_over_processes_and_accumulation(batch, world, accumulate,
                                                                 per_process):
    batching = Batching(batch, world, accumulate)
    assert batching.per_process_batch == per_process
    assert batching.as_record() == {"world_size": world, "per_process_batch": per_process,
                                    "accumulate_grad_batches": accumulate, "global_batch": batch}


@pytest.mark.parametrize(("batch", "world", "accumulate"), [(32, 3, 1), (30, 4, 1), (2, 2, 2)])
def test_a_global_batch_that_does_not_divide_is_one_line(batch, world, accumulate):
    with pytest.raises(PlmbenchError) as err:
        Batching(batch, world, accumulate)
    message = str(err.value)
    assert "\n" not in message and f"task.batch_size={batch}" in message
    assert f"multiple of {world * accumulate}" in message
