"""Multi-task mixing against its definition (Raffel et al. 2020, §3.5.2): examples-proportional
rates min(e_m, K) / sum_n min(e_n, K), temperature-scaled rates r_m^(1/T) renormalised, a sampler
whose task frequencies follow the rates, that goes through a task's examples before repeating
them, and whose order a resumed run continues."""

from collections import Counter

import pytest

from datamodules.errors import PlmbenchError
from datamodules.mixture import MixtureSampler, mixing_rates

SIZES = [1000, 300, 50, 8]


def test_examples_proportional_rates_with_a_cap():
    assert mixing_rates(SIZES) == pytest.approx([1000 / 1358, 300 / 1358, 50 / 1358, 8 / 1358])
    # K = 200: the two large tasks count as 200 examples each
    assert mixing_rates(SIZES, cap=200) == pytest.approx([200 / 458, 200 / 458, 50 / 458,
                                                          8 / 458])
    assert mixing_rates(SIZES, cap=8) == pytest.approx([0.25] * 4)  # K below every size: equal


def test_temperature_scaled_rates():
    proportional = mixing_rates(SIZES, cap=500)
    for temperature in (1.0, 2.0, 8.0):
        scaled = [r ** (1 / temperature) for r in proportional]
        expected = [r / sum(scaled) for r in scaled]
        assert mixing_rates(SIZES, 500, temperature) == pytest.approx(expected)
    hot = mixing_rates(SIZES, None, 1000.0)
    assert max(hot) - min(hot) < 0.01  # T -> infinity: equal mixing
    with pytest.raises(PlmbenchError, match="temperature > 0"):
        mixing_rates(SIZES, None, 0.0)


def test_sampler_frequencies_follow_the_rates():
    rates = mixing_rates(SIZES, cap=200, temperature=2.0)
    sampler = MixtureSampler(SIZES, rates, seed=3)
    assert len(sampler) == sum(SIZES)
    offsets = [0, 1000, 1300, 1350, 1358]
    counts = Counter()
    for epoch in range(20):
        sampler.set_epoch(epoch)
        for index in sampler:
            counts[next(t for t in range(4) if index < offsets[t + 1])] += 1
    draws = 20 * sum(SIZES)
    for task, rate in enumerate(rates):
        assert counts[task] / draws == pytest.approx(rate, abs=0.01)


def test_a_task_repeats_only_after_all_its_examples():
    sampler = MixtureSampler([5, 40], [0.5, 0.5], seed=0)
    small = [i for i in sampler.order(0).tolist() if i < 5]
    assert len(small) > 10  # drawn ~22 times: four passes and a half
    for start in range(0, len(small) - 4, 5):
        assert sorted(small[start:start + 5]) == list(range(5))


def test_a_resumed_epoch_continues_the_order():
    sampler = MixtureSampler(SIZES, mixing_rates(SIZES), seed=1)
    sampler.set_epoch(2)
    full = list(sampler)
    sampler.resume_at(2, 100)
    assert list(sampler) == full[100:]
    sampler.set_epoch(3)
    assert list(sampler) != full
