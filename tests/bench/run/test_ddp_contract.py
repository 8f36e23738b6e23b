"""The DDP contract of every registered task family: the same untrained model evaluated by 1, 2
and 3 gloo processes on CPU records the same metrics, outputs and analysis, and writes the same
prediction files, byte for byte (docs/gpu.md, "What DDP guarantees").

The families are found, not listed: every task YAML's family (a ``ByKind``'s family of each kind)
is one class, and each class is evaluated on its first task (by name) with the first registered
architecture of its first kind, as the smoke test composes them, plus the paths of ``EXTRA`` and
``EXTRA_MODELS`` (STS-B's regression, GloVe's vectors). A new family is in the contract as soon as a
task YAML names it. Each evaluation set holds ``EVAL_EXAMPLES`` examples (7: divisible by neither
2 nor 3) in batches of ``EVAL_BATCH`` (3: the last batch short, and on 2 processes one rank holds
two batches and the other one); the global training batch is 12, which 1, 2 and 3 divide. What is
measured rather than computed (timings, rates) is left out of the comparison.

Each world size is one set of processes that runs every case in turn (``ddp_ranks.py``, the
ranks of a torchrun launch): the processes start once, not once per case. One process and two
processes run every case in the default suite; three run ``THREE`` (the families that gather,
look up by index or sync a metric's list state) there and every case under ``-m benchmark``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import hydra
import pytest

from bench.run.execute import execute
from lit_models.archs import ARCHS, BASELINES
from lit_models.core.family import ByKind
from tests.bench.run.ddp_ranks import launch
from tests.bench.run.test_smoke import (  # noqa: F401 - the mirror fixture, used by name
    ANALYSIS,
    TASKS,
    compose_run,
    mirror_with_stand_ins,
)

EVAL_EXAMPLES, EVAL_BATCH = 7, 3
#: code paths of a family that its first task does not take
EXTRA = ("glue/stsb",)
#: (task, model) paths of a family that its first model does not take: GloVe's word vectors,
#: trained in torch (word2vec trains in gensim, in one process: refused on several, one line)
EXTRA_MODELS = (("embeddings/wikipedia", "glove"),)
#: the families whose first model runs in one process only, and the line that says so
ONE_PROCESS = {"WordVectors": "word2vec trains in one process"}
#: what a case composes with besides the smoke test's tiny settings
COMMON = [f"task.max_eval_samples={EVAL_EXAMPLES}", f"++task.eval_batch_size={EVAL_BATCH}",
          "++task.batch_size=12"]
#: what names a measurement (latency_ms, build_s, queries_per_s), not a computed value
MEASURED = ("_ms", "_s")


#: the task a targeted task (an analysis, a compression) works on, saved untrained
TARGET = "glue/rte"
SAVED = "{saved}"  # where a case names the saved target run (filled in by ``evaluate``)


def needs(task: str) -> list[str]:
    """What a task needs beyond the smoke test's tiny settings to run at all (the smoke test
    gives the same): a fine-tuned model and its task for a task on a target (the distillation's
    teacher too; head importance's rows), REALM's salient-span masking for its pretraining."""
    if task.startswith(("analysis/", "compression/")):
        cfg = compose_run("bert", task)
        target = [f"task.target={TARGET}"] if "target" in cfg.task else []
        teacher = ["task.teacher=ckpt:" + SAVED] if "teacher" in cfg.task else []
        # the named target holds no record of the rows the saved run trained on: say from which
        # training row head importance may read (the saved run is untrained)
        held_out = ["task.importance.skip=0"] if "importance" in cfg.task else []
        return [*target, "init_from=ckpt:" + SAVED, *teacher, *held_out]
    if task.startswith("pretrain/realm_"):
        return ["objective=ssm"]
    return []


def first_arch(kind: str) -> str:
    """The architecture a kind's cases run on: BERT for an encoder (the saved target's, which
    the analyses and compressions start from), else the first registered (or baseline model) of
    ``kind`` (the registry's name order)."""
    if kind == ARCHS["bert"].kind:
        return "bert"
    return next(name for name, spec in {**ARCHS, **BASELINES}.items() if spec.kind == kind)


def cases() -> dict[str, dict]:
    """name -> case (arch, task, overrides): one per family class of every task YAML, plus
    ``EXTRA``."""
    chosen: dict[str, dict] = {}
    for task in TASKS:
        family = hydra.utils.instantiate(compose_run("bert", task).task.family)
        members = family.families.items() if isinstance(family, ByKind) \
            else [(family.kinds[0], family)]
        for kind, member in members:
            name = type(member).__qualname__
            if name not in chosen or task in EXTRA:
                key = name if name not in chosen else f"{name}-{task.replace('/', '-')}"
                chosen[key] = {"name": key, "arch": first_arch(kind), "task": task,
                               "overrides": [*COMMON, *ANALYSIS.get(task, []), *needs(task)]}
    for task, arch in EXTRA_MODELS:
        key = f"{arch}-{task.replace('/', '-')}"
        chosen[key] = {"name": key, "arch": arch, "task": task,
                       "overrides": [*COMMON, *ANALYSIS.get(task, []), *needs(task)]}
    return chosen


CASES = cases()
#: what three processes evaluate in the default suite
THREE = ("Classification", "Classification-glue-stsb", "Tagging", "Probing",
         "BiEncoderTraining")


def evaluate(results: Path, names: list[str], world: int, mirror: Path) -> None:
    """Every case of ``names`` on ``world`` processes, under ``results/world<world>``."""
    saved = results / "saved"
    if not (saved / "model").is_dir():  # the untrained target model, saved once
        cfg = compose_run("bert", TARGET, "save_model=true", *COMMON)
        cfg.trainer.max_steps = 0
        execute(cfg, saved)
    launch([{**CASES[n], "overrides": [o.replace(SAVED, str(saved))
                                       for o in CASES[n]["overrides"]]} for n in names],
           results, world, mirror)


def computed(value):
    """``value`` without what is measured rather than computed (timings and rates: keys ending
    in ``MEASURED``), which differs between any two runs."""
    if isinstance(value, dict):
        return {k: computed(v) for k, v in value.items() if not k.endswith(MEASURED)}
    if isinstance(value, list):
        return [computed(v) for v in value]
    return value


def comparable(record: dict) -> dict:
    """What a record says about the evaluation itself (metrics, outputs, analysis, prediction
    files), without what is measured."""
    return computed({key: record[key] for key in ("status", "error", "metrics", "outputs",
                                                   "analysis", "predictions")})


def assert_same(results: Path, name: str, world: int) -> None:
    one, many = results / "world1" / name, results / f"world{world}" / name
    first = json.loads((one / "record.json").read_text())
    second = json.loads((many / "record.json").read_text())
    assert first["status"] == "ok", (name, first["error"])
    if name in ONE_PROCESS:  # refused before anything ran, in one line
        assert second["failure_kind"] == "input" and ONE_PROCESS[name] in second["error"]
        return
    assert second["batching"]["world_size"] == world
    assert comparable(second) == comparable(first), name
    for path in first["predictions"].values():
        assert (many / path).read_bytes() == (one / path).read_bytes(), (name, path)


@pytest.fixture(scope="module")
def evaluated(mirror_with_stand_ins, tmp_path_factory) -> Path:  # noqa: F811
    """Every case on one process and on two."""
    results = tmp_path_factory.mktemp("ddp")
    for world in (1, 2):
        evaluate(results, sorted(CASES), world, mirror_with_stand_ins)
    return results


@pytest.fixture(scope="module")
def three(evaluated, mirror_with_stand_ins) -> Path:  # noqa: F811
    """``THREE`` on three processes."""
    evaluate(evaluated, list(THREE), 3, mirror_with_stand_ins)
    return evaluated


@pytest.fixture(scope="module")
def three_all(evaluated, mirror_with_stand_ins) -> Path:  # noqa: F811
    """Every case on three processes."""
    results = evaluated / "all"
    results.mkdir()
    (results / "world1").symlink_to(evaluated / "world1")
    (results / "saved").symlink_to(evaluated / "saved")
    evaluate(results, sorted(CASES), 3, mirror_with_stand_ins)
    return results


def test_the_contract_covers_every_family_of_every_task_yaml():
    assert len(CASES) >= 25 and set(THREE) <= set(CASES)
    assert math.gcd(EVAL_EXAMPLES, 2 * 3) == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_processes_record_what_one_process_records(evaluated, name):
    assert_same(evaluated, name, 2)


@pytest.mark.parametrize("name", THREE)
def test_three_processes_record_what_one_process_records(three, name):
    assert_same(three, name, 3)


@pytest.mark.benchmark
@pytest.mark.parametrize("name", sorted(CASES))
def test_three_processes_record_what_one_process_records_for_every_family(three_all, name):
    assert_same(three_all, name, 3)
