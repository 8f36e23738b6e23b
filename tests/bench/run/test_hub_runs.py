"""``plmbench run init_from=hf:<org>/<name>@<revision>`` through ``huggingface_hub``, offline, on
a hub cache of tiny checkpoints of every architecture in their published layout
(``tests/hub_cache.py``), issue 27:

- each run loads its checkpoint from the cache and its record names the id, the revision, the
  commit the revision resolved to and the weights' sha256 (recomputed here with hashlib); the
  encoder the same resolution gives equals transformers' ``AutoModel.from_pretrained`` of the
  same id and revision on the same input, to 1e-5;
- a missing id offline, a missing revision, a checkpoint of an architecture plmbench lacks
  (one that needs remote code) and one with a weight no net of its architecture has a place
  for are each refused in one line, exit 2, with no run directory left.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from datamodules.init_from import InitFrom
from lit_models.interop.hf import from_hf
from tests.bench.invoke import plmbench, read, records_under
from tests.conftest import require, tiny_preset_name
from tests.hub_cache import ARCHS, ORG, TAG, lay_into_cache, offline_cache, session_hub_cache

transformers = require("transformers")

TINY = ["task=glue/rte", "task.max_train_samples=8", "task.max_eval_samples=4",
        "trainer.max_steps=1", "trainer.enable_progress_bar=false"]
#: the presets each checkpoint runs with: its architecture's tiny one (SpanBERT's is BERT's)
PRESETS = {**{arch: arch for arch in ARCHS}, "spanbert": "bert"}


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory) -> tuple[Path, dict]:
    return session_hub_cache(tmp_path_factory)


@pytest.fixture
def offline(hub_cache, monkeypatch, mirror):
    """The hub cache, offline, and the real data mirror."""
    root, built = hub_cache
    offline_cache(monkeypatch, root)
    return root, built


def _leaves_nothing(results: Path, result) -> str:
    """The run's one error line; the run left no directory under ``results``."""
    assert result.rc == 2, result.err
    errors = [line for line in result.err_lines if line.startswith("error:")]
    assert len(errors) == 1 and result.err_lines[-1] == errors[0], result.err
    assert not results.exists(), list(results.rglob("*"))  # not even an empty results dir
    return errors[0]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_run_from_a_hub_id_loads_the_cached_commit_and_records_it(preset, offline, tmp_path):
    root, built = offline
    cached = built[PRESETS[preset]]
    results = tmp_path / "results"
    result = plmbench("run", f"model={tiny_preset_name(preset)}", f"init_from={cached.spec()}",
                      *TINY, f"results_dir={results}")
    assert result.rc == 0, result.err
    (path,) = records_under(results)
    record = read(path.parent)
    weights = cached.snapshot / "model.safetensors"
    assert record["status"] == "ok" and record["init_from"] == cached.spec()
    assert record["checkpoint"] == {
        "id": cached.repo_id, "revision": TAG, "commit": cached.commit,
        "weights": "model.safetensors",
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}
    assert record["config"]["model"]["arch"] == preset  # the net built is the preset's arch

    # the same resolution gives our encoder; transformers' from_pretrained of the same id
    directory = InitFrom.parse(cached.spec()).directory()
    assert directory == cached.snapshot and directory.is_relative_to(root)
    _, net, tokenizer = from_hf(directory)
    theirs = transformers.AutoModel.from_pretrained(cached.repo_id, revision=TAG).eval()
    ids = torch.tensor([tokenizer.backend.encode("the quick brown fox jumped", "a cat").ids])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if net.config.__class__.__name__ in ("T5Config", "BartConfig"):  # encoder-decoders
        inputs["decoder_input_ids"] = ids
    with torch.no_grad():
        ours = net.eval()(**inputs).last_hidden_state
        reference = theirs(**inputs).last_hidden_state
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-5)


def test_an_id_the_cache_lacks_offline_is_one_line_and_no_run_directory(offline, tmp_path):
    root, _ = offline
    results = tmp_path / "results"
    line = _leaves_nothing(results, plmbench(
        "run", "model=bert-tiny-scratch", f"init_from=hf:{ORG}/no-such-model", *TINY,
        f"results_dir={results}"))
    assert f"init_from=hf:{ORG}/no-such-model:" in line
    assert str(root) in line and "HF_HUB_OFFLINE" in line
    assert f"plmbench models fetch {ORG}/no-such-model" in line
    assert line.endswith(f"(no local directory {ORG}/no-such-model either)")


def test_a_revision_the_cache_lacks_is_one_line_and_no_run_directory(offline, tmp_path):
    _, built = offline
    results = tmp_path / "results"
    spec = f"hf:{built['bert'].repo_id}@no-such-tag"
    line = _leaves_nothing(results, plmbench("run", "model=bert-tiny-scratch", f"init_from={spec}",
                                             *TINY, f"results_dir={results}"))
    assert f"init_from={spec}:" in line
    assert "--revision no-such-tag" in line


def test_a_malformed_id_is_refused_by_the_config_check(offline, tmp_path):
    results = tmp_path / "results"
    line = _leaves_nothing(results, plmbench("run", "model=bert-tiny-scratch",
                                             "init_from=hf:a/b/c..d",
                                             *TINY, f"results_dir={results}"))
    assert "init_from=hf:a/b/c..d: no directory a/b/c..d" in line and "hf:<org>/<name>" in line


@pytest.fixture(scope="session")
def remote_code(hub_cache, tmp_path_factory) -> str:
    """A checkpoint of a family that needs remote code (its own ``model_type`` and an
    ``auto_map`` to modules in the repository, as nomic-bert's): the tiny BERT's files under
    that config.json."""
    import json

    root, built = hub_cache
    source = tmp_path_factory.mktemp("remote-code")
    for file in built["bert"].snapshot.iterdir():
        shutil.copyfile(file, source / file.name)
    config = json.loads((source / "config.json").read_text())
    config |= {"model_type": "nomic_bert", "architectures": ["NomicBertModel"],
               "auto_map": {"AutoModel": "modeling_hf_nomic_bert.NomicBertModel"}}
    (source / "config.json").write_text(json.dumps(config))
    repo_id = f"{ORG}/tiny-nomic-bert"
    lay_into_cache(root, repo_id, source)
    return repo_id


def test_a_checkpoint_of_an_architecture_plmbench_lacks_is_refused(offline, remote_code,
                                                                   tmp_path):
    results = tmp_path / "results"
    line = _leaves_nothing(results, plmbench(
        "run", "model=bert-tiny-scratch", f"init_from=hf:{remote_code}", *TINY,
        f"results_dir={results}"))
    assert "model_type 'nomic_bert'" in line
    assert all(name in line for name in ("'bert'", "'deberta-v2'", "'t5'"))  # what it reads


@pytest.fixture(scope="session")
def bert_with_extra_weights(hub_cache, tmp_path_factory) -> str:
    """The tiny BERT with two weights no BERT net has a place for: one inside the encoder, one
    under the pretraining heads' prefix (which an encoder-only load would otherwise pass
    over)."""
    root, built = hub_cache
    source = tmp_path_factory.mktemp("bert-extra")
    for file in built["bert"].snapshot.iterdir():
        shutil.copyfile(file, source / file.name)
    weights = load_file(source / "model.safetensors")
    weights["bert.encoder.layer.0.adapter.weight"] = torch.zeros(4, 4)
    weights["cls.predictions.extra.bias"] = torch.zeros(4)
    save_file(weights, source / "model.safetensors", metadata={"format": "pt"})
    repo_id = f"{ORG}/tiny-bert-extra"
    lay_into_cache(root, repo_id, source)
    return repo_id


def test_a_weight_no_net_has_a_place_for_is_refused_by_name(offline, bert_with_extra_weights,
                                                            tmp_path):
    results = tmp_path / "results"
    line = _leaves_nothing(results, plmbench(
        "run", "model=bert-tiny-scratch", f"init_from=hf:{bert_with_extra_weights}", *TINY,
        f"results_dir={results}"))
    assert "encoder.layer.0.adapter.weight" in line and "cls.predictions.extra.bias" in line
    assert "no plmbench net has a place for" in line


def test_a_hub_id_in_any_checkpoint_setting_is_resolved_before_the_run(offline, tmp_path):
    """Not init_from alone: a task's checkpoint setting (here perplexity's vocabulary reference)
    names a hub id the cache lacks: refused before the run has a directory."""
    _, built = offline
    results = tmp_path / "results"
    line = _leaves_nothing(results, plmbench(
        "run", "model=bert-tiny-scratch", f"init_from={built['bert'].spec()}",
        "task=perplexity/domains",
        f"task.vocabulary_reference=hf:{ORG}/absent", f"results_dir={results}"))
    assert f"task.vocabulary_reference=hf:{ORG}/absent: {ORG}/absent is not in" in line


def test_a_completed_point_is_skipped_offline_without_its_checkpoint(offline, tmp_path,
                                                                    monkeypatch):
    """A re-run sweep skips a point whose record says ok before resolving anything: offline with
    the checkpoint gone from the cache, it still skips, and only a forced re-run asks for it."""
    _, built = offline
    results = tmp_path / "results"
    args = ["run", "model=bert-tiny-scratch", f"init_from={built['bert'].spec()}", *TINY,
            f"results_dir={results}"]
    assert plmbench(*args).rc == 0
    (path,) = records_under(results)
    first = read(path.parent)["run_id"]
    offline_cache(monkeypatch, tmp_path / "empty-cache")
    again = plmbench(*args)
    assert again.rc == 0, again.err
    assert read(path.parent)["run_id"] == first
    forced = plmbench(*args, "skip_completed=false")
    assert forced.rc == 2 and "is not in the Hugging Face cache" in forced.err_lines[-1]
    assert read(path.parent)["run_id"] == first  # refused before the run: the record stands
