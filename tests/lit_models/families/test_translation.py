"""Translation end to end on a WMT fixture in the hub's schema (tests/hub_fixtures.py): a tiny T5
run through the ``plmbench`` command leaves a record whose BLEU is what sacreBLEU (its Python API
and its command line) computes from the run's predictions file, sacreBLEU's signature beside it,
and a row on the translation board; the source is T5's "translate English to Romanian: " prefix
and the pair can be read the other way round; a missing WMT split offline is one line naming the
mirror command, which fills the mirror from the hub."""

import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import sacrebleu
from hydra import compose, initialize_config_dir

from bench.boards.table import build_table
from bench.record import iter_records
from bench.run.execute import CONF_DIR
from datamodules import sources
from datamodules.errors import PlmbenchError
from datamodules.tokenization import train_tokenizer
from datamodules.translation import TranslationDataModule
from lit_models.archs import get_arch
from lit_models.metrics import build_metrics
from tests import hub_fixtures
from tests.bench.invoke import plmbench, read, records_under

RUN = ["model=t5-tiny-scratch", "task=translation/wmt16_en_ro", "trainer.max_steps=3",
       "trainer.enable_progress_bar=false", "task.generation.num_beams=2",
       "task.generation.max_new_tokens=12", "task.generation.min_new_tokens=3"]


@pytest.fixture(scope="module")
def wmt_mirror(tmp_path_factory):
    root = hub_fixtures.linked_mirror(tmp_path_factory.mktemp("mirror"), *hub_fixtures.WMT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(root))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.mktemp("hf")))
        yield root


@pytest.fixture(scope="module")
def t5_run(wmt_mirror, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    result = plmbench("run", *RUN, f"results_dir={results}")
    assert result.rc == 0, result.err[-2000:]
    [record] = records_under(results)
    return results, read(record.parent)


def texts(record: dict, split: str) -> tuple[list[dict], list[str], list[str]]:
    path = Path(record["run_dir"]) / record["predictions"][split]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return rows, [r["prediction"] for r in rows], [r["reference"] for r in rows]


def test_recorded_bleu_is_sacrebleu_on_the_predictions_file(t5_run, tmp_path):
    _, record = t5_run
    assert record["status"] == "ok" and set(record["metrics"]) == {"test", "validation"}
    for split, metrics in record["metrics"].items():
        rows, hypotheses, references = texts(record, split)
        assert len(rows) == 8 and all(r["prediction"] for r in rows)  # min_new_tokens
        theirs = sacrebleu.corpus_bleu(hypotheses, [references])
        assert metrics["bleu"] == theirs.score
        assert metrics["bleu_brevity_penalty"] == theirs.bp
        assert metrics["bleu_precision_1"] == theirs.precisions[0]
        # the command line, on the same texts as files (one segment a line)
        (tmp_path / "hyp.txt").write_text("".join(h.replace("\n", " ") + "\n" for h in hypotheses))
        (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in references))
        cli = subprocess.run(
            [str(Path(sys.executable).parent / "sacrebleu"), str(tmp_path / "ref.txt"), "-i",
             str(tmp_path / "hyp.txt"), "-m", "bleu", "-w", "10", "-f", "text"],
            capture_output=True, text=True, check=True).stdout
        signature, score = cli.split(" = ")[0].removeprefix("BLEU|"), cli.split(" = ")[1]
        assert metrics["bleu"] == pytest.approx(float(score.split()[0]), abs=1e-9)
        assert record["metric_signatures"][split] == {"bleu": signature}
        assert signature == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" \
                            f"{sacrebleu.__version__}"


def test_sources_carry_t5s_prefix_and_references_are_the_raw_targets(t5_run, wmt_mirror):
    _, record = t5_run
    rows, _, references = texts(record, "test")
    raw = datasets.Dataset.from_parquet(str(wmt_mirror / "wmt16/ro-en/test.parquet"))
    pairs = raw["translation"]
    assert [r["source"] for r in rows] == [
        "translate English to Romanian: " + pair["en"] for pair in pairs]
    assert references == [pair["ro"] for pair in pairs]
    assert [r["id"] for r in rows] == [str(i) for i in range(len(pairs))]


def test_the_translation_board_has_the_runs_bleu(t5_run):
    results, record = t5_run
    table = build_table(list(iter_records(results)), "translation")
    row = {r.label: r for r in table.rows}["t5-tiny-scratch"]
    assert row.cells["translation/wmt16_en_ro BLEU"].mean == record["metrics"]["test"]["bleu"]
    assert row.cells["translation/wmt16_en_ro beams"].mean == 2


def task_config(*overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=["model=t5-tiny-scratch", "task=translation/wmt16_en_ro",
                                            *overrides]).task


def test_the_other_direction_is_a_config_choice(wmt_mirror):
    task = task_config("task.source_lang=ro", "task.target_lang=en")
    assert task.name == "translation/wmt16_ro_en"
    task.splits.train = None
    tokenizer = train_tokenizer(get_arch("t5").tokenizer, ["a b c"] * 20, vocab_size=120,
                                lowercase=False)
    dm = TranslationDataModule(task, tokenizer, decoder_start_token_id=0)
    dm.setup("validate")
    raw = datasets.Dataset.from_parquet(str(wmt_mirror / "wmt16/ro-en/validation.parquet"))
    pairs = raw["translation"]
    assert dm.texts["validation"]["source"] == [
        "translate Romanian to English: " + pair["ro"] for pair in pairs]
    assert dm.texts["validation"]["reference"] == [pair["en"] for pair in pairs]


@pytest.mark.parametrize(("overrides", "message"), [
    (["task.source_lang=en", "task.target_lang=en"], "must be two different languages"),
    (["task.target_lang=xx"], "must be two different languages of language_names"),
    (["+task.bleu.tokenizer=13a"], r"task.bleu: unknown keys \['tokenizer'\]"),
    (["task.bleu.tokenize=nope"], "sacreBLEU refuses it"),
])
def test_bad_settings_are_one_line(wmt_mirror, overrides, message):
    task = task_config(*overrides)
    with pytest.raises(PlmbenchError, match=message) as info:
        build_metrics(task.metrics, "texts", bleu=task.bleu)
        TranslationDataModule(task, None, decoder_start_token_id=0)
    assert "\n" not in str(info.value)


def test_missing_wmt_offline_names_the_mirror_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path / "empty"))
    result = plmbench("run", *RUN, f"results_dir={tmp_path / 'results'}")
    assert result.rc == 2
    errors = [line for line in result.err_lines if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.err
    assert "wmt16/ro-en split train not found" in errors[0]
    assert "`plmbench data mirror wmt16 ro-en --hub-id wmt/wmt16`" in errors[0]


def test_data_mirror_fetches_wmt_from_the_hub_into_the_mirror(tmp_path, monkeypatch):
    """`plmbench data mirror wmt16 ro-en --hub-id wmt/wmt16` loads the hub's repository and
    writes every split under the task's dataset name, where the task then finds it."""
    hub = tmp_path / "hub"
    for split in ("train", "test"):
        hub_fixtures.write(hub, "wmt16", "ro-en", split, n=8)
    asked = []

    def load_dataset(path, name):
        asked.append((path, name))
        return datasets.DatasetDict({split: datasets.Dataset.from_parquet(
            str(hub / f"wmt16/ro-en/{split}.parquet")) for split in ("train", "test")})

    monkeypatch.setattr(sources, "hub_unreachable_reason", lambda: None)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path / "mirror"))
    result = plmbench("data", "mirror", "wmt16", "ro-en", "--hub-id", "wmt/wmt16")
    assert result.rc == 0 and asked == [("wmt/wmt16", "ro-en")]
    written = tmp_path / "mirror/wmt16/ro-en"
    assert sorted(p.name for p in written.iterdir()) == ["test.parquet", "train.parquet"]
    task = task_config()
    assert sources.load_split(task.dataset, task.config, "test", ["translation"])[
        "translation"] == datasets.Dataset.from_parquet(
            str(hub / "wmt16/ro-en/test.parquet"))["translation"]
