"""The typed run record (bench/record.py): every record version plmbench wrote loads, writes back
the same bytes, and boards the same as before the type existed; a file that is not a record is
one line naming it.

``tests/fixtures/records/results`` holds records written by the run as it was at 0c985b5 (a GLUE
classification with kept baselines and a checkpoint identity, SQuAD, translation with sacreBLEU
signatures, a failed run with no result keys, a fine-tuning-method run from before records kept
baselines) and one in the first writer's form (bench/run.py at 245e09e: no overrides, variant,
notes, predictions, baselines ...; no versions.git_dirty). ``tests/fixtures/records/boards``:
the boards rendered from them by that commit's code, with an empty data mirror."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.record import (
    Baselines,
    Record,
    Throughput,
    as_record,
    record_at,
    record_paths,
    records_in,
    write_record,
)
from datamodules.errors import PlmbenchError
from tests.bench.invoke import plmbench

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
RESULTS = FIXTURES / "results"
PATHS = record_paths(RESULTS)


def test_the_fixtures_are_the_record_versions_named():
    assert {path.parent.name for path in PATHS} == {
        "glue_sst2_current", "glue_sst2_first_schema", "glue_sst2_finetune_methods",
        "squad_v1", "squad_v1_failed", "translation"}


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.parent.name)
def test_every_record_version_loads_and_writes_back_its_own_bytes(path, tmp_path):
    record = Record.from_json(path)
    assert record.path == str(path)
    assert record.to_json() == path.read_text(encoding="utf-8")
    assert record.write(tmp_path).read_bytes() == path.read_bytes()
    assert Record.from_json(tmp_path) == record  # a run directory names its record too
    assert Record.from_json(json.loads(path.read_text())) == record  # and an object read


def test_a_current_record_reads_through_typed_parts():
    record = Record.from_json(RESULTS / "glue_sst2_current/record.json")
    raw = json.loads((RESULTS / "glue_sst2_current/record.json").read_text())
    assert record.status == "ok" and record.task == "glue/sst2" and record.board == "glue"
    assert record.metrics["validation"]["accuracy"] == raw["metrics"]["validation"]["accuracy"]
    assert isinstance(record.throughput, Throughput)
    assert record.throughput.train_tokens == raw["throughput"]["train_tokens"]
    assert record.at("throughput.train_tokens_per_s") == raw["throughput"]["train_tokens_per_s"]
    assert record.at("metrics.validation.accuracy") == raw["metrics"]["validation"]["accuracy"]
    assert record.at("config.task.name") == "glue/sst2" == record.task_config["name"]
    assert record.at("metrics.test.accuracy") is None and record.at("no.such") is None
    assert isinstance(record.baselines, Baselines) and record.has("baselines")
    (row,) = record.baselines.rows
    assert row.name is None and row.metrics == raw["baselines"]["rows"][0]["metrics"]
    assert record.checkpoint.weights_sha256 == raw["checkpoint"]["weights_sha256"]
    assert record.versions.git_dirty is raw["versions"]["git_dirty"]
    assert record.overrides == tuple(raw["overrides"]) and record.notes == ()


def test_an_old_record_gets_defaults_for_the_keys_it_predates():
    record = Record.from_json(RESULTS / "glue_sst2_first_schema/record.json")
    assert (record.overrides, record.variant, record.notes) == ((), (), ())
    assert (record.predictions, record.outputs, record.metric_signatures) == ({}, {}, {})
    assert record.baselines is None and not record.has("baselines")  # never kept, not "none"
    assert record.checkpoint is None and record.epochs is None and record.recipe is None
    assert record.versions.git_dirty is None and not record.versions.has("git_dirty")
    assert "baselines" not in json.loads(record.to_json())


def test_a_failed_record_has_no_result_and_says_why():
    record = Record.from_json(RESULTS / "squad_v1_failed/record.json")
    assert record.status == "failed" and record.failure_kind == "input"
    assert "word2vec is of kind word-vectors" in record.error
    assert record.metrics == {} and not record.has("metrics") and record.throughput is None


def test_keys_it_does_not_know_are_kept():
    raw = json.loads((RESULTS / "squad_v1/record.json").read_text())
    raw["written_by_a_later_plmbench"] = {"x": [1, 2]}
    raw["throughput"]["eval_tokens"] = 7
    record = Record.from_json(raw)
    assert json.loads(record.to_json()) == raw
    assert record.at("throughput.eval_tokens") == 7


@pytest.mark.parametrize(("text", "why"), [
    ('{"name": "bert", "hidden_size": 128}', "is not a plmbench record: it has no status, task, "
                                             "board"),
    ('{"status": "ok", "task": "glue/rte", "bo', "is not valid JSON"),
    ('[1, 2]', "holds a JSON list, not a record object"),
    ('{"status": "ok", "task": "glue/rte", "board": "glue", "schema": 9}', "record schema 9"),
    ('{"status": "ok", "task": "glue/rte", "board": "glue", "metrics": [1]}',
     ".metrics is [1], not dict"),
    ('{"status": "ok", "task": "glue/rte", "board": "glue", "hardware": 3}',
     ".hardware is a JSON int, not an object"),
    ('{"status": "ok", "task": "glue/rte", "board": "glue", "baselines": {"rows": {}}}',
     ".baselines.rows is a JSON dict, not a list"),
])
def test_a_file_that_is_no_record_is_one_line_naming_it(tmp_path, text, why):
    path = tmp_path / "record.json"
    path.write_text(text)
    with pytest.raises(PlmbenchError) as err:
        Record.from_json(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and why in message


def test_a_missing_file_is_one_line_too(tmp_path):
    with pytest.raises(PlmbenchError, match=r"record\.json cannot be read"):
        Record.from_json(tmp_path / "nowhere" / "record.json")


@pytest.mark.parametrize(("board", "fmt"), [
    ("glue", "md"), ("glue", "csv"), ("glue", "json"), ("squad", "md"), ("translation", "md"),
    ("finetune_methods", "md")])
def test_the_fixture_records_board_as_they_did_before_the_type(board, fmt, tmp_path,
                                                               monkeypatch):
    shutil.copytree(RESULTS, tmp_path / "results")
    empty = tmp_path / "mirror"
    empty.mkdir()
    monkeypatch.setenv("PLMBENCH_DATA", str(empty))  # a board reads records, never task data
    monkeypatch.chdir(tmp_path)
    result = plmbench("leaderboard", "results", "--board", board, "--format", fmt)
    assert result.rc == 0, result.err
    assert result.out == (FIXTURES / "boards" / f"{board}.{fmt}").read_text(encoding="utf-8")


def test_records_in_types_the_usable_records_and_lists_the_others(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "results")
    (tmp_path / "results/broken").mkdir()
    (tmp_path / "results/broken/record.json").write_text('{"status": "ok", "ta')
    (tmp_path / "results/typed_wrong").mkdir()
    (tmp_path / "results/typed_wrong/record.json").write_text(
        '{"status": "ok", "task": "glue/rte", "board": "glue", "metrics": {"validation": '
        '{"accuracy": 0.5}}, "notes": "not a list"}')
    records, unused = records_in(tmp_path / "results")
    assert all(isinstance(r, Record) for r in records)
    assert sorted(Path(r.path).parent.name for r in records) == sorted(
        p.parent.name for p in PATHS)
    assert sorted((Path(u.source).parent.name, u.why.split(" (")[0]) for u in unused) == [
        ("broken", "is not valid JSON"), ("typed_wrong", f"{u_path(tmp_path)}.notes is "
                                                        "'not a list', not list")]


def u_path(tmp_path: Path) -> str:
    return str(tmp_path / "results/typed_wrong/record.json")


def test_a_run_goes_by_a_record_only_where_there_is_one(tmp_path):
    assert record_at(tmp_path) is None  # no file
    (tmp_path / "record.json").write_text('{"config_hash": 7}')
    assert record_at(tmp_path) is None  # a value of the wrong type: nothing to go by
    (tmp_path / "record.json").write_text('{"overrides": ["model=x"], "config_hash": "ab"}')
    found = record_at(tmp_path)  # plmbench rerun needs no more than its overrides and hash
    assert found.overrides == ("model=x",) and found.config_hash == "ab" and found.status is None


def test_a_board_annotation_is_held_once_set():
    record = as_record({"status": "ok", "task": "glue/rte", "board": "glue"})
    assert not record.has("protocol_hash")
    chosen = record.updated(protocol_hash="best-on-dev", selected={"dev": 0.7})
    assert chosen.has("protocol_hash") and chosen.protocol_hash == "best-on-dev"
    assert chosen.selected == {"dev": 0.7} and record.selected is None  # frozen: a new record


def test_a_run_fills_its_record_typed_and_a_misspelt_field_fails():
    """What a run knows at its start, then its outcome: each value typed as its field holds it,
    only the fields given written, and a name that is no field an error, never a silent key."""
    started = Record.new(status=None, task="glue/rte", board="glue",
                         throughput={"train_tokens": 128})
    assert json.loads(started.to_json()) == {"board": "glue", "status": None, "task": "glue/rte",
                                             "throughput": {"train_tokens": 128}}
    assert started.throughput.train_tokens == 128  # a mapping given is read as its part
    done = started.updated(status="ok", notes=["a note"], metrics={"validation": {"f1": 0.5}})
    assert done.notes == ("a note",) and json.loads(done.to_json())["notes"] == ["a note"]
    with pytest.raises(TypeError, match="metric"):
        done.updated(metric={"validation": {"f1": 0.5}})
    with pytest.raises(TypeError, match="stauts"):
        Record.new(stauts="ok")
    with pytest.raises(PlmbenchError, match="record.steps is '3', not int"):
        done.updated(steps="3")


def test_the_pretraining_cost_is_summed_along_a_chain_and_unknown_where_it_loops(tmp_path):
    """A fine-tuning run's cost is its checkpoint's chain of runs: tokens and FLOPs summed, the
    run directories oldest first; a chain that returns to a run it passed is of unknown cost."""
    from bench.run.provenance import pretraining_costs
    from datamodules.init_from import InitFrom

    def run(name: str, init_from: str, flops: float, **extra) -> Path:
        write_record(tmp_path / name, {"status": "ok", "task": "pretrain/x", "board": "pretrain",
                                       "init_from": init_from, "run_dir": str(tmp_path / name),
                                       "throughput": {"train_tokens": 10, "train_flops": flops},
                                       "wall_time_s": 2.0, **extra})
        return tmp_path / name

    general = run("general", "scratch", 100.0, recipe={"objective": "mlm"})
    further = run("further", f"ckpt:{general}", 30.0)  # an older record: no pretraining kept
    cost = pretraining_costs([InitFrom.parse(f"ckpt:{further}")])
    assert (cost.tokens, cost.flops, cost.wall_time_s) == (20, 130.0, 4.0)
    assert cost.runs == (str(general), str(further)) and cost.recipe == {"objective": "mlm"}
    assert pretraining_costs([InitFrom.parse("scratch")]).flops == 0
    assert pretraining_costs([InitFrom.parse("hf:org/name")]) is None  # unknown cost
    looping = run("looping", f"ckpt:{tmp_path / 'looping'}", 5.0)
    assert pretraining_costs([InitFrom.parse(f"ckpt:{looping}")]) is None
