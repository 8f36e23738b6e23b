"""``plmbench perf``'s registry (lit_models/measure/perf_registry.py): the families fill it with the
same steps bench/perf/ had named itself (every Transformer architecture's three, ELMo's biLM's
and the BiLSTM's own), and a step is registered once, under a step ``plmbench perf`` knows."""

import pytest

from lit_models.families.perf_workloads import WORKLOADS
from lit_models.measure.perf_registry import BASELINE_WORKLOADS, STEPS, register_workload


def test_the_families_register_every_step_perf_measures():
    assert list(WORKLOADS) == list(STEPS)
    assert {model: sorted(steps) for model, steps in BASELINE_WORKLOADS.items()} == {
        "elmo": ["inference", "pretrain"], "bilstm": ["finetune", "inference"]}


def test_a_step_is_registered_once_under_a_known_name():
    with pytest.raises(ValueError, match="registered twice"):
        register_workload("pretrain")(lambda *args: None)
    with pytest.raises(ValueError, match="registered twice"):
        register_workload("pretrain", model="elmo")(lambda *args: None)
    with pytest.raises(ValueError, match="is not one of"):
        register_workload("generate", model="elmo")
    assert sorted(BASELINE_WORKLOADS["elmo"]) == ["inference", "pretrain"]
