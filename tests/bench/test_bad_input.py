"""The project's own bad-input suite (issue 18): one row per kind of bad input a user can give,
each checked for its one line (``error: ...`` naming the input and the fix, no traceback), its
exit status (2) and what it leaves on disk. Most rows fail before anything trains: the whole
table runs on a 64-row copy of RTE that the module makes once.

Then the cases that are no error but must say what they did: a re-run after the input is fixed,
a configuration that diverges (skipped until --rerun-failed), a checkpoint's head that does not
fit the task, records a board cannot use, max_steps past the epochs, and two sweeps of the same
points at once.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.run.run_dir import LOCK_NAME
from tests.bench.invoke import Result, plmbench, read, records_under, reset_cli_state
from tests.bench.invoke import run_dir as run_path
from tests.conftest import MIRROR_CANDIDATES, in_ci

TINY = ["model=bert-tiny-scratch", "task=glue/rte", "task.max_train_samples=48",
        "task.max_eval_samples=16", "trainer.max_steps=2", "trainer.enable_progress_bar=false"]


# ----------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def small_mirror(tmp_path_factory) -> Path:
    """glue/rte's first 64 training and 32 validation rows, in the hub's schema."""
    real = next((p for p in MIRROR_CANDIDATES if (p / "glue/rte").is_dir()), None)
    if real is None:
        (pytest.fail if in_ci() else pytest.skip)("the real data mirror is needed")
    root = tmp_path_factory.mktemp("mirror")
    (root / "glue/rte").mkdir(parents=True)
    for split, rows in (("train", 64), ("validation", 32)):
        table = pq.read_table(real / f"glue/rte/{split}.parquet").slice(0, rows)
        pq.write_table(table, root / f"glue/rte/{split}.parquet")
    return root


@pytest.fixture
def env(small_mirror, tmp_path, monkeypatch) -> Path:
    """A fresh work dir, PLMBENCH_DATA at a private copy of the small mirror (rows may break
    it), a private `datasets` cache."""
    import datasets

    mirror = tmp_path / "mirror"
    shutil.copytree(small_mirror, mirror)
    monkeypatch.setenv("PLMBENCH_DATA", str(mirror))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_datasets"))
    reset_cli_state()
    return tmp_path


def key_of(arg: str) -> str:
    return arg.lstrip("+~").partition("=")[0]


def run_args(*groups: list[str]) -> list[str]:
    """``plmbench run`` arguments: Hydra's flags first, then the overrides of every group, a
    later group's value of a key replacing an earlier one's (Hydra refuses a key given twice)."""
    flags, overrides = [], {}
    for group in groups:
        args = list(group)
        while args:
            arg = args.pop(0)
            if arg.startswith("-"):
                flags += [arg, args.pop(0)] if arg == "--config-dir" else [arg]
            else:
                overrides.pop(key_of(arg), None)
                overrides[key_of(arg)] = arg
    return ["run", *flags, *overrides.values()]


def one_error_line(result: Result) -> str:
    """The only ``error:`` line, last on stderr, with no traceback anywhere."""
    errors = [line for line in result.err_lines if line.startswith("error:")]
    assert len(errors) == 1, result.err
    assert result.err_lines[-1] == errors[0], result.err
    assert "Traceback" not in result.err + result.out
    return errors[0]


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ------------------------------------------------------------------------- the table of kinds


def config_dir(env: Path, group: str, name: str, text: str) -> list[str]:
    """A YAML of one's own in ``<env>/conf/<group>/<name>.yaml``, passed with --config-dir."""
    path = env / "conf" / group / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return ["--config-dir", str(env / "conf")]


OWN_TASK = """defaults:
  - /task/glue/_base@_here_
  - _self_
name: {name}
config: rte
{fields}: [sentence1, sentence2]
num_labels: 2
label_names: [entailment, not_entailment]
{metrics}: [accuracy]
"""


def own_task(env: Path, name="mine/rte", fields="text_fields", metrics="metrics") -> list[str]:
    text = OWN_TASK.format(name=name, fields=fields, metrics=metrics)
    return [*config_dir(env, "task/mine", "rte", text), "task=mine/rte"]


def own_preset(env: Path) -> list[str]:
    preset = (Path(__file__).parents[2] / "conf/model/bert-tiny-scratch.yaml").read_text()
    text = preset.replace("name: bert-tiny-scratch", "name: my-bert").replace("hidden_size:",
                                                                       "hiden_size:")
    return [*config_dir(env, "model", "my-bert", text), "model=my-bert"]


def break_train(env: Path, write: Callable[[Path, pa.Table], None]) -> list[str]:
    train = env / "mirror/glue/rte/train.parquet"
    write(train, pq.read_table(train))
    return []


def latin1_row(path: Path, table: pa.Table) -> None:
    """sentence1 stored as bytes, row 3 in latin-1 (a file written by a tool that did not
    encode its text as UTF-8)."""
    texts = [s.encode() for s in table.column("sentence1").to_pylist()]
    texts[3] = "café au lait".encode("latin-1")
    index = table.schema.get_field_index("sentence1")
    pq.write_table(table.set_column(index, "sentence1", pa.array(texts, pa.binary())), path)


@dataclass
class Kind:
    """One kind of bad input: what to run (``args``, after ``setup(env)`` adds its own), the
    fragments its error line holds, and what it leaves: nothing at all (``record=None``), or
    the failed record of the run, whose error and kind are checked."""

    args: list[str]
    fragments: list[str]
    setup: Callable[[Path], list[str]] = lambda env: []
    record: str | None = None  # the failure's kind in the record it leaves
    run: bool = True  # a `plmbench run` of TINY, else the command as given
    extra: Callable[[Path, Result], None] | None = field(default=None)


def outside(env: Path, result: Result) -> None:
    assert not (env.parent / "escaped").exists() and not Path("/escaped").exists()


KINDS = {
    "unknown model preset": Kind(
        ["model=bert-huge-scratch"],
        [
            "model=bert-huge-scratch: there is no conf/model/bert-huge-scratch.yaml",
            "did you mean model=bert-large-scratch?",
            "bert-tiny-scratch",
        ],
    ),
    "unknown task": Kind(["task=glue/rtee"], ["task=glue/rtee", "did you mean task=glue/rte?"]),
    "unknown trainer preset": Kind(["trainer=cpus"], ["did you mean trainer=cpu?"]),
    "unknown launcher": Kind(["hydra/launcher=lokal"], ["did you mean hydra/launcher=local?"]),
    "global batch the processes do not divide": Kind(
        ["task.batch_size=32", "trainer.accumulate_grad_batches=3"],
        ["task.batch_size=32 (the global batch", "trainer.accumulate_grad_batches=3",
         "a multiple of 3 (such as 30)"]),
    "misspelled key": Kind(
        ["trainer.max_step=3"],
        ["trainer.max_step=3: unknown key trainer.max_step (did you mean trainer.max_steps?)"],
    ),
    "misspelled key with +": Kind(
        ["+trainer.max_step=3"], ["unknown key trainer.max_step (did you mean trainer.max_steps?)"]
    ),
    "misspelled model key": Kind(
        ["model.hiden_size=64"], ["unknown key model.hiden_size (did you mean model.hidden_size?)"]
    ),
    "misspelled model key with +": Kind(
        ["+model.hiden_size=64"],
        [
            "model=bert-tiny-scratch (bert): unknown key model.hiden_size "
            "(did you mean model.hidden_size?)"
        ],
    ),
    "misspelled key in a preset of one's own": Kind(
        [],
        ["model=my-bert (bert): unknown key model.hiden_size (did you mean model.hidden_size?)"],
        setup=own_preset,
    ),
    "misspelled keys in a task YAML of one's own": Kind(
        [],
        [
            "task mine/rte: unknown keys task.metircs (did you mean task.metrics?); "
            "task.text_fileds (did you mean task.text_fields?)"
        ],
        setup=lambda env: own_task(env, fields="text_fileds", metrics="metircs"),
    ),
    "misspelled objective key": Kind(
        ["task=pretrain/wikitext", "objective=mlm", "objective.mlm_probabilty=0.2"],
        ["unknown key objective.mlm_probabilty (did you mean objective.mlm_probability?)"]),
    "a step count that is no number": Kind(["trainer.max_steps=abc"], [
        "trainer.max_steps='abc' is not of type int"]),
    "no threads": Kind(["trainer.threads=0"], [
        "trainer.threads=0: give a number of threads >= 1, or null for torch's default"]),
    "epochs below -1": Kind(["trainer.max_epochs=-5"], ["trainer.max_epochs=-5",
                                                        "-1 for no limit"]),
    "a seed that is no number": Kind(["seed=first"], ["seed='first': a seed is a whole number"]),
    "a model size that is no number": Kind(
        ["model.num_hidden_layers=two"], ["model.num_hidden_layers='two' is not of type int"]
    ),
    "negative learning rate": Kind(
        ["optim.lr=-1e-4"], ["optim.lr=-0.0001: a learning rate is a positive number"]
    ),
    "zero learning rate": Kind(["optim.lr=0"], ["optim.lr=0:", "0 trains nothing"]),
    "nothing to evaluate": Kind(
        ["task.max_eval_samples=0"], ["task.max_eval_samples=0 leaves nothing to evaluate"]
    ),
    "nothing to train on": Kind(
        ["task.max_train_samples=0"], ["task.max_train_samples=0 leaves nothing to train on"]
    ),
    "a label that leaves results_dir": Kind(
        ["label=../../../escaped"],
        ["label='../../../escaped' would place the run outside results_dir"],
        extra=outside,
    ),
    "an absolute label": Kind(
        ["label=/escaped"], ["label='/escaped' would place the run"], extra=outside
    ),
    "a task name that leaves results_dir": Kind(
        [],
        ["task.name='../../escaped' would place the run outside results_dir"],
        setup=lambda env: own_task(env, name="../../escaped"),
        extra=outside,
    ),
    "a split name that leaves the run directory": Kind(
        ["task.splits.eval=[../../../escaped]"],
        ["task.splits='../../../escaped' would place the run outside results_dir"],
        extra=outside,
    ),
    "a checkpoint directory that is not there": Kind(
        ["init_from=ckpt:/no/such/run"], ["init_from=ckpt:/no/such/run: no directory /no/such/run"]
    ),
    "a checkpoint run saved without its model": Kind(
        [], ["was saved without its model (no ", "run it again with save_model=true"],
        setup=lambda env: _unsaved_run(env)),
    "unknown init_from": Kind(["init_from=bert"], ["init_from='bert': use scratch"]),
    "unknown resume mode": Kind(["resume=always"], [
        "resume='always' is unknown: use auto or never"]),
    "unwritable results directory": Kind([], ["is not writable", "results_dir=DIR"],
                                         setup=lambda env: _afile(env)),
    "dataset missing offline": Kind(["task=glue/mrpc"], [  # found by the config check
        "glue/mrpc split train not found", "plmbench data mirror glue mrpc"]),
    "corrupt Parquet file": Kind([], ["cannot read", "train.parquet",
                                      "plmbench data mirror glue rte"], record="input",
                                 setup=lambda env: break_train(
                                     env, lambda p, t: p.write_bytes(b"not parquet" * 50))),
    "a Parquet file with no rows": Kind([], ["train.parquet has no rows"], record="input",
                                        setup=lambda env: break_train(
                                            env, lambda p, t: pq.write_table(t.slice(0, 0), p))),
    "text that is not UTF-8": Kind([], [
        "train.parquet column sentence1 row 3 is not UTF-8 text", "re-encode"], record="input",
        setup=lambda env: break_train(env, latin1_row)),
    "a data file lacking a column": Kind([], ["lacks columns ['sentence1']"], record="input",
                                         setup=lambda env: break_train(
                                             env, lambda p, t: pq.write_table(
                                                 t.drop_columns(["sentence1"]), p))),
    "an override key given twice": Kind(["run", *TINY, "results_dir={results}", "seed=1", "seed=2"],
                                        ["seed is given twice (seed=1 and seed=2)",
                                         "give each key once"], run=False),
    "a task key given twice": Kind(
        ["run", *TINY, "results_dir={results}", "task.max_length=8", "task.max_length=16"],
        ["task.max_length is given twice (task.max_length=8 and task.max_length=16)"], run=False),
    "a key added twice": Kind(["run", *TINY, "results_dir={results}", "+x=", "+x=1"],
                              ["x is given twice (+x= and +x=1)"], run=False),
    "a key deleted and set": Kind(["run", *TINY, "results_dir={results}", "~label", "label=a"],
                                  ["label is given twice (~label and label=a)"], run=False),
    "a study's key given twice": Kind(["study", "experiment=domain_tiny", "seed=1", "seed=2"],
                                      ["seed is given twice (seed=1 and seed=2)"], run=False),
    "a seed below NumPy's range": Kind(["seed=-1"], [
        "seed=-1 is out of the range NumPy's RNG accepts: use a seed from 0 to 4294967295"]),
    "a seed above NumPy's range": Kind([f"seed={2**32}"], [f"seed={2**32} is out of the range"]),
    "a task's seed out of NumPy's range": Kind(["task=probing/sentence_length", "task.seed=-3"],
                                               ["task.seed=-3 is out of the range"]),
    "a bootstrap seed out of NumPy's range": Kind(
        ["significance", "a", "b", "{results}", "--seed", "-1"],
        ["argument --seed: '-1' is no integer from 0 to 4294967295"], run=False),
    "a label longer than a file name": Kind(['label="' + "é" * 130 + '"'], [
        "label: its part 'éééé", "is 260 bytes, longer than a file system's names take (255 "
        "bytes); use a shorter label"]),
    "a results_dir part longer than a file name": Kind(["results_dir={results}/" + "r" * 256], [
        "results_dir: its part", "is 256 bytes"]),
    "a split name longer than a file name with its suffix": Kind(
        ["task.splits.eval=[" + "v" * 230 + "]"], ["task.splits: its part", "32 of them kept"]),
    "a non-ASCII path as a shell passes it": Kind(["results_dir={results}/ü"], [
        "is no override Hydra can parse", "type it as 'results_dir=\"", "/ü\"' (the value in "
        "Hydra's double quotes, the whole override in the shell's single quotes)"]),
    "a quote in a path as a shell passes it": Kind(["results_dir={results}/it's"], [
        "type it as 'results_dir=\"", "/it'\"'\"'s\"'"]),
    "a parenthesis in a label": Kind(["label=run(2)"], [
        "'label=run(2)' is no override Hydra can parse", "type it as 'label=\"run(2)\"'"]),
    "a null in a text column": Kind([], [
        "train.parquet column sentence1 row 5 is null (2 null rows in all)", "fill them in"],
        record="input", setup=lambda env: break_train(env, _null_texts)),
    "a label outside the task's labels": Kind([], [
        "train.parquet column label row 3 holds label 7, outside task glue/rte's labels (ids 0 "
        "to 1 (entailment, not_entailment))", "fix the row"], record="input",
        setup=lambda env: break_train(env, _label_seven)),
    "a label outside the task's labels in an eval split": Kind([], [
        "validation.parquet column label row 0 holds label -1"], record="input",
        setup=lambda env: _unlabelled_validation(env)),
    "a tag outside a tagging task's labels": Kind(["task=ner/ncbi_disease"], [
        "train.parquet column ner_tags row 2 word 4 holds tag 9, outside task ner/ncbi_disease's "
        "labels (ids 0 to 2: O, B-Disease, I-Disease)"], record="input",
        setup=lambda env: _ncbi_with_tag(env, 9)),
    "a pair task's max_length below its special tokens": Kind(["task.max_length=4"], [
        "task glue/rte: task.max_length=4 leaves no room for text: this tokenizer adds 3 special "
        "tokens to a pair of texts ([CLS] [SEP] [SEP]), so it must be at least 5"],
        record="input"),
    "unknown board": Kind(["leaderboard", "{results}", "--board", "glu"], [
        "unknown board 'glu'; did you mean glue?"], run=False),
    "leaderboard of a directory that is not there": Kind(["leaderboard", "{results}/nope"], [
        "results directory", "does not exist"], run=False),
    "leaderboard --out where nothing can be written": Kind(
        ["leaderboard", "{results}", "--out", "{unwritable}/board.md"],
        ["cannot write", "board.md", "pass --out a path in a writable directory"],
        run=False,
    ),
    "leaderboard --out into a read-only directory": Kind(
        ["leaderboard", "{results}", "--out", "{readonly}/board.md"],
        ["cannot write", "board.md (Permission denied)", "pass --out a path in a writable"],
        run=False,
    ),
    "rerun of a file that is no record": Kind(
        ["rerun", "{results}"], ["is no readable run record"], run=False
    ),
    "an unknown command": Kind(
        ["bogus"],
        ["plmbench: argument cmd: invalid choice: 'bogus'", "see plmbench --help"],
        run=False,
    ),
    "an option value argparse refuses": Kind(
        ["leaderboard", "{results}", "--stat", "mode"],
        ["argument --stat: invalid choice: 'mode'", "see plmbench leaderboard --help"],
        run=False,
    ),
    "an unknown board score": Kind(
        ["leaderboard", "{results}", "--aggregate", "nope"],
        ["board 'glue' has no aggregate 'nope'; use one of glue, bert_table1"],
        run=False,
    ),
    "references a board does not have": Kind(
        ["leaderboard", "{results}", "--board", "pretrain", "--references"],
        ["board 'pretrain' names no published references", "leave out --references"],
        run=False,
    ),
    "significance on a board without a score": Kind(
        ["significance", "a", "b", "{results}", "--board", "pretrain"],
        ["board 'pretrain' has no score to compare rows by"],
        run=False,
    ),
    "significance of rows the board lacks": Kind(
        ["significance", "a", "b", "{results}"],
        ["no row 'a' on board 'glue'; it has no rows"],
        run=False,
    ),
    "significance with no resamples": Kind(
        ["significance", "a", "b", "{results}", "--resamples", "0"],
        ["argument --resamples: '0' is no integer >= 1"],
        run=False,
    ),
    "submission of results without predictions": Kind(
        ["submit", "glue", "{results}"],
        ["results has GLUE predictions; run the tasks with task.predict_splits=[test]"],
        run=False,
        setup=lambda env: _truncated_record(env),
        extra=lambda env, result: _warned(env, result),
    ),
    "claims of an experiment without claims": Kind(
        ["claims", "experiment=domain_tiny"],
        ["holds no claims: pass experiment=claims_small or experiment=claims_tiny"],
        run=False,
    ),
    "claims that are not there": Kind(
        ["claims", "experiment=claims_tiny", "study.claims=[nope]"],
        ["study.claims names ['nope'], which are no claims"],
        run=False,
    ),
    "unknown study": Kind(
        ["study", "experiment=domian"], ["did you mean experiment=domain?"], run=False
    ),
}


def _truncated_record(env: Path) -> list[str]:
    run = env / "results/glue/rte/bert-tiny-scratch/seed0"
    run.mkdir(parents=True)
    (run / "record.json").write_text('{"status": "ok", "task": "glue/r')
    return []


def _warned(env: Path, result: Result) -> None:
    """The record it could not read is named, not left out in silence."""
    record = f"{env}/results/glue/rte/bert-tiny-scratch/seed0/record.json"
    assert f"warning: {record}: not used" in result.err


def _null_texts(path: Path, table: pa.Table) -> None:
    texts = table.column("sentence1").to_pylist()
    texts[5] = texts[9] = None
    index = table.schema.get_field_index("sentence1")
    pq.write_table(table.set_column(index, "sentence1", pa.array(texts, pa.string())), path)


def _label_seven(path: Path, table: pa.Table) -> None:
    labels = table.column("label").to_pylist()
    labels[3] = 7
    index = table.schema.get_field_index("label")
    pq.write_table(table.set_column(index, "label", pa.array(labels, table.schema.field(
        "label").type)), path)


def _ncbi_with_tag(env: Path, tag: int) -> list[str]:
    """NCBI-disease's first 32 training and 16 validation sentences, word 4 of training row 2
    tagged ``tag``."""
    real = next((p for p in MIRROR_CANDIDATES if (p / "ncbi_disease").is_dir()), None)
    if real is None:
        (pytest.fail if in_ci() else pytest.skip)("the real data mirror is needed")
    where = env / "mirror/ncbi_disease/ncbi_disease"
    where.mkdir(parents=True)
    for split, rows in (("train", 32), ("validation", 16)):
        table = pq.read_table(real / f"ncbi_disease/ncbi_disease/{split}.parquet").slice(0, rows)
        if split == "train":
            tags = table.column("ner_tags").to_pylist()
            tags[2][4] = tag
            table = table.set_column(table.schema.get_field_index("ner_tags"), "ner_tags",
                                     pa.array(tags, table.schema.field("ner_tags").type))
        pq.write_table(table, where / f"{split}.parquet")
    return []


def _unlabelled_validation(env: Path) -> list[str]:
    """validation labelled -1, as GLUE's test splits are: fine to predict, not to score."""
    path = env / "mirror/glue/rte/validation.parquet"
    table = pq.read_table(path)
    index = table.schema.get_field_index("label")
    pq.write_table(table.set_column(index, "label", pa.array([-1] * len(table), table.schema.field(
        "label").type)), path)
    return []


def _unsaved_run(env: Path) -> list[str]:
    """A finished run's directory with its record but no exported model (save_model=false)."""
    run = env / "unsaved"
    run.mkdir()
    (run / "record.json").write_text('{"status": "ok"}')
    return [f"init_from=ckpt:{run}"]


def test_a_list_override_is_suggested_quoted_item_by_item_and_stays_a_list():
    """``study.feature_run=[task.max_train_samples=4000]`` does not parse ("=" in an item); the
    quoting the error suggests parses, and to the list of the same items, not to one string."""
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from bench.compose import parse_overrides
    from datamodules.errors import PlmbenchError

    given = "study.feature_run=[task.max_train_samples=4000,trainer.max_epochs=2]"
    with pytest.raises(PlmbenchError, match="is no override Hydra can parse") as err:
        parse_overrides([given])
    suggested = str(err.value).split("type it as ", 1)[1].split(" (the value", 1)[0]
    (override,) = OverridesParser.create().parse_overrides(shlex.split(suggested))
    assert override.value() == ["task.max_train_samples=4000", "trainer.max_epochs=2"]


def _afile(env: Path) -> list[str]:
    (env / "afile").write_text("a file\n")
    return [f"results_dir={env / 'afile' / 'results'}"]


def test_the_table_covers_the_kinds_the_issue_lists():
    assert len(KINDS) >= 26


def test_every_model_key_a_yaml_reads_is_a_preset_key():
    """What conf/ reads from a preset (``${oc.select:model.finetune_lr,...}``) is never refused
    as a misspelling: each such key is an architecture's config field or a preset key."""
    import dataclasses
    import re

    from bench.run.config_check import known_tree
    from lit_models.archs import ARCHS
    from lit_models.core.build import PRESET_KEYS

    fields = {f.name for arch in ARCHS.values() for f in dataclasses.fields(arch.config)}
    fields |= set(known_tree("model"))  # the models that are no Transformer: their presets' keys
    conf = Path(__file__).parents[2] / "conf"
    read = {m for path in conf.rglob("*.yaml")
            for m in re.findall(r"\bmodel\.([a-z_]+)", path.read_text())}
    assert read and read <= fields | PRESET_KEYS, read - fields - PRESET_KEYS


@pytest.mark.parametrize("name", list(KINDS))
def test_bad_input_is_one_line_exit_2_and_leaves_nothing_behind(name, env):
    kind = KINDS[name]
    results = env / "results"
    results.mkdir()
    unwritable = env / "afile"
    unwritable.write_text("a file, not a directory\n")
    readonly = env / "readonly"
    readonly.mkdir(mode=0o555)
    if os.access(readonly, os.W_OK):  # root writes into any directory, but not into sysfs
        readonly = Path("/sys")
    extra = kind.setup(env)
    fill = {"results": str(results), "unwritable": str(unwritable), "readonly": str(readonly)}
    args = [a.format(**fill) for a in kind.args]
    if kind.run:
        args = run_args(TINY, [f"results_dir={results}"], extra, args)
    before = files_under(env)
    result = plmbench(*args)
    assert result.rc == 2, result.err
    line = one_error_line(result)
    for fragment in kind.fragments:
        assert fragment in line, line
    if kind.record is None:  # refused before anything was written
        assert files_under(env) == before
    else:  # the run had started: a complete failed record, and why
        (path,) = records_under(results)
        record = read(path.parent)
        assert record["status"] == "failed" and record["failure_kind"] == kind.record
        assert line.endswith(record["error"])
        assert sorted(p.name for p in path.parent.iterdir() if p.is_file()) == [
            "record.json", "run.log"]  # no lock, no temp file
        assert "[run failed]\nTraceback" in (path.parent / "run.log").read_text()
    if kind.extra:
        kind.extra(env, result)


# ------------------------------------------------------------- what a re-run does after a failure


def test_a_run_failed_by_bad_input_runs_again_once_the_input_is_fixed(env):
    results = env / "results"
    train = env / "mirror/glue/rte/train.parquet"
    good = train.read_bytes()
    train.write_bytes(b"not parquet" * 50)
    args = run_args(TINY, [f"results_dir={results}"])
    assert plmbench(*args).rc == 2
    (path,) = records_under(results)
    assert read(path.parent)["failure_kind"] == "input"
    train.write_bytes(good)  # the fix
    again = plmbench(*args)
    assert again.rc == 0, again.err
    record = read(path.parent)
    assert record["status"] == "ok" and record["metrics"]["validation"]["accuracy"] >= 0
    assert "failed before" in again.out + again.err


def test_a_diverging_configuration_is_skipped_until_rerun_failed(env):
    results = env / "results"
    args = run_args(TINY, ["optim.lr=1e12", "trainer.gradient_clip_val=null",
                           "trainer.max_steps=6", f"results_dir={results}"])
    first = plmbench(*args)
    line = one_error_line(first)
    assert first.rc == 2 and "training loss is nan" in line and "the run diverged" in line
    assert "lower optim.lr" in line
    (path,) = records_under(results)
    record = read(path.parent)
    assert record["failure_kind"] == "configuration"
    again = plmbench(*args)  # the same configuration fails the same way: not run again
    assert again.rc == 0 and read(path.parent)["run_id"] == record["run_id"]
    assert "--rerun-failed runs it again" in again.out + again.err
    forced = plmbench(*args[:1], "--rerun-failed", *args[1:])
    assert forced.rc == 2 and read(path.parent)["run_id"] != record["run_id"]


# --------------------------------------------------------------------- what a run must say it did


def test_a_checkpoint_whose_head_does_not_fit_says_a_new_head_starts(env):
    """init_from a 2-label RTE run on 1-label STS-B: said in the log and the record."""
    results = env / "results"
    stsb = env / "mirror/glue/stsb"
    stsb.mkdir(parents=True)
    scores = pa.array([float(i % 6) for i in range(64)], pa.float32())
    for split, rows in (("train", 48), ("validation", 16)):
        table = pq.read_table(env / f"mirror/glue/rte/{split}.parquet").slice(0, rows)
        pq.write_table(table.set_column(table.schema.get_field_index("label"), "label",
                                        scores[:rows]), stsb / f"{split}.parquet")
    assert plmbench(*run_args(TINY, ["save_model=true", f"results_dir={results}"])).rc == 0
    (rte,) = [p.parent for p in records_under(results)]
    result = plmbench(*run_args(TINY, ["task=glue/stsb", f"init_from=ckpt:{rte}",
                                       f"results_dir={results}"]))
    assert result.rc == 0, result.err
    (stsb_run,) = [p.parent for p in records_under(results / "glue/stsb")]
    (note,) = read(stsb_run)["notes"]
    assert note.startswith(f"init_from=ckpt:{rte}: its classifier head does not fit the 1 "
                           "label(s) of glue/stsb (out.weight is (2, 128), the task's (1, 128)")
    assert note.endswith("a new head starts untrained")
    assert note in (stsb_run / "run.log").read_text()


def test_max_steps_past_the_epochs_trains_every_step_and_says_so(env):
    results = env / "results"
    # 48 rows in batches of 16: 3 steps an epoch, so 3 epochs (the preset's) would stop at 9
    result = plmbench(*run_args(TINY, ["task.batch_size=16", "trainer.max_steps=12",
                                       f"results_dir={results}"]))
    assert result.rc == 0, result.err
    (path,) = records_under(results)
    record = read(path.parent)
    assert record["steps"] == 12 and record["epochs"] >= 3
    assert ("trainer.max_steps=12 overrides trainer.max_epochs=3: training stops after 12 "
            "steps") in (path.parent / "run.log").read_text()


def test_an_override_equal_to_the_default_names_no_directory(env):
    results = env / "results"
    plain = plmbench(*run_args(TINY, [f"results_dir={results}"]))
    same = plmbench(*run_args(TINY, ["optim.lr=1e-4", "trainer=cpu", f"results_dir={results}"]))
    assert plain.rc == same.rc == 0
    (path,) = records_under(results)  # one directory, trained once: the second was skipped
    assert path.parent == run_path(results, "glue/rte", *TINY[2:])
    assert "its record says ok for this configuration" in same.out + same.err


def test_a_point_another_live_process_runs_is_skipped_and_a_stale_lock_taken_over(env):
    results = env / "results"
    where = run_path(results, "glue/rte", *TINY[2:])
    where.mkdir(parents=True)
    (where / LOCK_NAME).write_text(json.dumps({"pid": os.getppid(), "host": os.uname().nodename,
                                               "since": 0}))
    busy = plmbench(*run_args(TINY, [f"results_dir={results}"]))
    assert busy.rc == 0 and records_under(results) == []
    assert f"pid {os.getppid()} on {os.uname().nodename} is running it" in busy.out + busy.err
    # the same lock, its owner gone (a pid that no process has)
    (where / LOCK_NAME).write_text(json.dumps({"pid": 2**22 + 7, "host": os.uname().nodename}))
    taken = plmbench(*run_args(TINY, [f"results_dir={results}"]))
    assert taken.rc == 0 and read(where)["status"] == "ok"
    assert not (where / LOCK_NAME).exists()


# ----------------------------------------------------------------- records a board cannot use


def test_a_board_lists_records_it_cannot_use_and_never_stops(env):
    results = env / "results"
    assert plmbench("run", "-m", *TINY, "seed=0,1,2", f"results_dir={results}").rc == 0
    paths = records_under(results)
    assert len(paths) == 3
    truncated, string_metric, evaluated_nothing = paths
    truncated.write_text(truncated.read_text()[:200])
    record = json.loads(string_metric.read_text())
    record["metrics"]["validation"]["accuracy"] = "0.75"
    string_metric.write_text(json.dumps(record))
    record = json.loads(evaluated_nothing.read_text())  # as task.max_eval_samples=0 left them
    record["metrics"] = {}
    record["config"]["task"]["max_eval_samples"] = 0
    evaluated_nothing.write_text(json.dumps(record))
    for fmt in ("md", "csv", "json", "html"):
        board = plmbench("leaderboard", str(results), "--format", fmt)
        assert board.rc == 0, board.err
        warnings = [line for line in board.err_lines if line.startswith("warning:")]
        assert len(warnings) == 3 and all("not used on board glue" in w for w in warnings)
    assert '<h2>Records not used (3)</h2><ul id="unused">' in board.out  # the HTML page's list
    board = plmbench("leaderboard", str(results))
    assert "### Records not used (3)" in board.out
    assert f"- {truncated}: is not valid JSON" in board.out
    assert f"- {string_metric}: metrics.validation.accuracy is '0.75', not a finite number" \
        in board.out
    assert f"- {evaluated_nothing}: an ok record with no metric on ['validation']: the run " \
           "evaluated nothing" in board.out
    assert "| bert-tiny-scratch " not in board.out  # no usable run: no row, but the board stands
    listed = json.loads(plmbench("leaderboard", str(results), "--format", "json").out)["unused"]
    assert [u["source"] for u in listed] == [str(p) for p in paths]


def test_the_claims_report_names_the_records_it_could_not_use():
    from bench.record import Unused
    from bench.studies.claims import render_html, render_markdown

    unused = [Unused("r/glue/rte/x/seed0/record.json", "is not valid JSON")]
    assert "## Records not used (1)\n\n- r/glue/rte/x/seed0/record.json: is not valid JSON\n" in \
        render_markdown([], "claims", unused)
    assert ('<ul id="unused"><li><code>r/glue/rte/x/seed0/record.json</code>: is not valid JSON'
            in render_html([], "claims", unused))


# ------------------------------------------------------------------ paths as a shell user types


def test_a_results_dir_with_spaces_and_non_ascii_characters_holds_the_run(env):
    """``results_dir="my results"`` reaches plmbench as ``results_dir=my results`` and runs
    there; non-ASCII needs Hydra's quotes too (``'results_dir="ü dir/ß"'``), and runs there."""
    spaced = env / "my results"
    assert plmbench(*run_args(TINY, [f"results_dir={spaced}"])).rc == 0
    quoted = env / "ü dir" / "ß"
    result = plmbench(*run_args(TINY, [f'results_dir="{quoted}"']))
    assert result.rc == 0, result.err
    for where in (spaced, quoted):
        (path,) = records_under(where)
        record = read(path.parent)
        assert record["status"] == "ok" and record["run_dir"].startswith(f"{where}/glue/rte/")


# ---------------------------------------------------------- a metric undefined on its eval set


def strict_loads(text: str):
    """JSON as strict parsers read it: NaN, Infinity and -Infinity are refused."""
    def refuse(constant: str):
        raise ValueError(f"{constant} is no JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_metric_undefined_on_the_eval_set_is_null_with_a_note_and_the_run_ok(env):
    """RTE scored by AUROC on a dev set of one class (every pair entailed): AUROC is undefined
    (scikit-learn refuses it). The record is strict JSON with null there and a note saying why;
    the run is ok (its accuracy and loss are defined), and the board's JSON is strict too."""
    from sklearn.metrics import roc_auc_score

    results = env / "results"
    path = env / "mirror/glue/rte/validation.parquet"
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label", pa.array(
        [0] * len(table), table.schema.field("label").type)), path)
    with pytest.warns(UserWarning, match="Only one class"):  # the oracle: undefined, NaN
        assert math.isnan(roc_auc_score([0] * 16, [i / 16 for i in range(16)]))
    result = plmbench(*run_args(TINY, ["task.metrics=[accuracy,auroc]",
                                       f"results_dir={results}"]))
    assert result.rc == 0, result.err
    (path,) = records_under(results)
    record = strict_loads(path.read_text())
    assert record["status"] == "ok"
    validation = record["metrics"]["validation"]
    undefined = sorted(key for key, value in validation.items() if value is None)
    assert undefined == ["auroc"] and math.isfinite(validation["accuracy"])
    notes = [n for n in record["notes"] if "is undefined on this evaluation set" in n]
    assert sorted(n.split()[0] for n in notes) == [f"metrics.validation.{k}" for k in undefined]
    assert all(note in (path.parent / "run.log").read_text() for note in notes)
    board = plmbench("leaderboard", str(results), "--format", "json")
    assert board.rc == 0, board.err
    strict_loads(board.out)

