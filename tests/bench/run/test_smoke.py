"""Every task YAML with the tiny preset of every registered architecture and baseline model
(word vectors, ELMo's biLM, the BiLSTMs): one training step and one evaluation each, through
``bench.run.execute.execute``, each leaving an ok record with metrics.

A task YAML that no longer composes or builds, or an architecture that cannot train on a task
family, fails here. Splits the offline mirror lacks (MNLI, QQP, QNLI train, WikiText train,
SQuAD v2.0 train, CoNLL-2003) are stand-ins written from the task's own column names into a copy
of the mirror, and those of SWAG, RACE, SuperGLUE, WMT and the Goodreads spoilers are small
fixtures in their sources' schemas (``tests/hub_fixtures.py``), so every YAML runs.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

import datasets
import hydra
import pytest
import torch
from hydra import compose, initialize_config_dir

from bench.run.execute import CONF_DIR, execute, normalize, resolve_target
from datamodules import goodreads, universal_dependencies
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tagging import PAD_VALUES, encode_words
from lit_models.archs import ARCHS, BASELINES, get_model
from lit_models.families.open_qa.family import OpenQA
from lit_models.families.tagging import LitTagger
from lit_models.interop.hf import QA_HEAD_NAMES, TAGGER_HEAD_NAMES, from_hf, load_head, task_labels
from tests import hub_fixtures
from tests.conftest import MIRROR_CANDIDATES, require, tiny_preset_name

TASKS = sorted(
    str(path.relative_to(CONF_DIR / "task").with_suffix(""))
    for path in (CONF_DIR / "task").rglob("*.yaml") if not path.name.startswith("_")
)
#: task YAMLs that give a code path the matrix covers other data (the domain studies' corpora and
#: end tasks; their datamodule features have tests of their own): they run with bert, and with
#: every architecture under `pytest -m benchmark`
DATA_ONLY = ("amazon/", "scibert_tc/", "pretrain/tapt/", "pretrain/pubmed", "pretrain/cs",
             "pretrain/realm_",
             # other data on a path the matrix covers: multiple choice (mc/swag), span pairs
             # (superglue/wic), the classifier's head and encoder call (glue/*, spoilers/*),
             # for candidate scoring (superglue/record, multirc) too
             "mc/race", "mc/copa", "superglue/copa", "superglue/boolq", "superglue/cb",
             "superglue/rte", "superglue/multirc", "superglue/record", "superglue/wsc",
             # compression/quantize's path without the quantization; probing/ner's family on
             # other data (parsed sentences, edges, sentences generated from text)
             "compression/measure", "probing/pos", "probing/dependencies",
             "probing/sentence_length", "probing/word_content", "probing/bigram_shift")
#: the tasks each baseline model runs on in the default suite; on its family's other tasks (the
#: same code paths on other data) with `pytest -m benchmark`; elsewhere (squad/v1 for all) refused
BASELINE_TASKS = {"bilstm": ("glue/rte", "glue/sst2", "glue/stsb", "ner/ncbi_disease"),
                  "elmo": ("pretrain/wikipedia",), "word2vec": ("embeddings/wikipedia",),
                  "glove": ("embeddings/wikipedia",)}
BASELINE_FAMILIES = ("glue/", "ner/", "pretrain/", "embeddings/")
#: architectures registered after the suite's time was spent (issue 34): a task of each family
#: (classification, regression, extractive QA, tagging, multiple choice, pretraining) in the
#: default suite, every task with `pytest -m benchmark`
_SIX = ("glue/rte", "glue/stsb", "ner/ncbi_disease", "mc/swag", "pretrain/wikipedia", "squad/v1")
REPRESENTATIVE = {"deberta_v2": _SIX, "modernbert": _SIX}
REFUSED = "squad/v1"
TINY = ["task.max_train_samples=24", "task.max_eval_samples=8", "trainer.max_steps=1",
        "trainer.enable_progress_bar=false"]
WORDS = "the a cat dog sat on mat quick brown fox jumped over lazy hello world it was".split()
#: tasks on a fine-tuned run's task (``task.target``)
TARGETED = ("analysis/head_pruning", "compression/")


def compose_run(arch: str, task: str, *overrides: str):
    if task.startswith(TARGETED) and not any(o.startswith("init_from=") for o in overrides):
        overrides = ("task.target=glue/rte", *overrides)  # no fine-tuned run named: its task
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"model={tiny_preset_name(arch)}", f"task={task}", *TINY,
                                           *overrides])
    resolve_target(cfg)  # a task's target, as a run resolves it before its checks
    normalize(cfg)
    if "eval_documents" in cfg.task:  # a held-out split carved from a capped corpus
        cfg.task.eval_documents = 3
    if "corpus" in cfg.task:  # open QA, REALM pre-training: a few documents per corpus source
        cfg.task.corpus.max_documents = 4
    if "retriever" in cfg.task:  # open QA: sparse retrieval
        cfg.task.retriever = "bm25"
        cfg.task.read_top_k = 2
    if "generation" in cfg.task:  # a random net may never end: a few tokens show the wiring
        cfg.task.generation.max_new_tokens = 8
    return cfg


#: what the analyses' and compression tasks run with: a few inputs, a quick latency
ANALYSIS = {
    "analysis/attention": ["task.text_examples=8", "task.text.max_train_samples=4",
                           "task.dependencies.max_sentences=8", "task.dependencies.min_count=1"],
    **{task: ["task.latency.batches=2", "task.latency.repeats=1"]
       for task in ("analysis/head_pruning", "compression/measure", "compression/quantize",
                    "compression/distill")},
    **{f"probing/{task}": ["task.text.max_train_samples=12", "task.train_examples=48",
                           "task.eval_examples=24", "task.probe.epochs=2"]
       for task in ("sentence_length", "word_content", "bigram_shift")},
    **{f"probing/{task}": ["task.probe.epochs=2"] for task in ("ner", "pos", "dependencies")},
}
ANALYSIS["probing/word_content"] += ["task.words=8", "task.first_rank=20"]
ANALYSIS["analysis/head_pruning"] += ["task.importance.samples=16"]  # of its 1,000 by default


def fine_tuned(results: Path, arch: str, task: str) -> Path:
    """The run directory of ``arch`` fine-tuned on ``task`` and saved (run once per module)."""
    run_dir = results / arch / task / "saved"
    if not (run_dir / "model").is_dir():
        execute(compose_run(arch, task, "save_model=true"), run_dir)
    return run_dir


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))).capitalize() + "."


def stand_in(task, path: Path) -> None:
    """A small split with the task's own columns, where the real mirror has none."""
    rng = random.Random(path.name)
    dataset, config = path.parent.parent.name, path.parent.name
    if (dataset, config) in hub_fixtures.WRITERS:  # SWAG, RACE, SuperGLUE, WMT: hub schemas
        hub_fixtures.write(path.parents[2], dataset, config, path.stem, n=40)
        return
    if dataset == universal_dependencies.DATASET:  # CoNLL-U fixtures, converted
        hub_fixtures.write_universal_dependencies(path.parents[2], sentences=12)
        return
    if dataset == goodreads.DATASET:  # the raw file, converted: all three splits at once
        goodreads.convert(hub_fixtures.write_goodreads(path.parents[2] / "goodreads.json.gz"),
                          path.parents[2])
        return
    if "source_field" in task:  # summarization: a few sentences -> one
        rows = {task.source_field: [" ".join(sentence(rng) for _ in range(4)) for _ in range(40)],
                task.target_field: [sentence(rng) for _ in range(40)]}
        if task.id_field:
            rows[task.id_field] = [f"stand-in-{i}" for i in range(40)]
    elif "context_field" in task:  # extractive QA (SQuAD schema); every third unanswerable
        contexts = [" ".join(sentence(rng) for _ in range(4)) for _ in range(40)]
        words = [context.split()[rng.randrange(3)] for context in contexts]
        rows = {
            task.id_field: [str(i) for i in range(40)],
            "title": ["stand-in"] * 40,
            task.context_field: contexts,
            task.question_field: [sentence(rng) + "?" for _ in contexts],
            task.answers_field: [
                {"text": [] if i % 3 == 2 else [word], "answer_start": []
                 if i % 3 == 2 else [context.index(word)]}
                for i, (context, word) in enumerate(zip(contexts, words, strict=True))
            ],
        }
    elif "tokens_field" in task:  # sequence labelling: words and tag ids
        tokens = [sentence(rng).split() for _ in range(40)]
        rows = {task.tokens_field: tokens,
                task.tags_field: [[rng.randrange(len(task.label_names)) for _ in words]
                                  for words in tokens]}
    elif "text_fields" in task:
        regression = task.num_labels == 1
        rows = {field: [sentence(rng) for _ in range(40)] for field in task.text_fields}
        rows[task.label_field] = [rng.uniform(0, 5) if regression
                                  else rng.randrange(task.num_labels) for _ in range(40)]
    else:  # a corpus: WikiText's title lines + text lines, or one article per row
        lines = []
        for article in range(12):
            if task.document_format == "wikitext":
                lines.append(f" = Article {article} = \n")
            lines.append(" ".join(sentence(rng) for _ in range(6)) + "\n")
        rows = {task.text_field: lines}
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict(rows).to_parquet(str(path))


@pytest.fixture(scope="module")
def mirror_with_stand_ins(tmp_path_factory) -> Path:
    """The real mirror (linked) plus stand-ins for every split a task names that it lacks."""
    real = next((path for path in MIRROR_CANDIDATES if (path / "glue").is_dir()), None)
    if real is None:
        pytest.fail(f"real data mirror not found (tried {[str(p) for p in MIRROR_CANDIDATES]})")
    root = tmp_path_factory.mktemp("mirror")
    for dataset in real.iterdir():
        if dataset.is_dir():
            for config in dataset.iterdir():
                (root / dataset.name / config.name).mkdir(parents=True)
                for split in config.glob("*.parquet"):
                    (root / dataset.name / config.name / split.name).symlink_to(split)
    for task in TASKS:
        cfg = compose_run("bert", task)
        for t in [cfg.task, *cfg.task.get("members", {}).values()]:  # a mixture's members
            if "dataset" not in t:  # a mixture, or an evaluation of other tasks' corpora
                continue
            for split in [t.splits.train, *t.splits.eval]:
                config, _, name = (split or "").rpartition("/")  # "<config>/<split>": another's
                path = root / t.dataset / (config or t.config) / f"{name}.parquet"
                if split and split != "heldout" and not path.exists():
                    stand_in(t, path)
        if cfg.task.get("dependencies"):  # the attention analysis: English-EWT's CoNLL-U
            hub_fixtures.write_universal_dependencies(root, sentences=12)
        for source in (cfg.task.get("corpus") or {}).get("sources", []):  # open QA: wiki_dpr
            path = root / source.dataset / source.config / f"{source.split}.parquet"
            if not path.exists():
                rng = random.Random(source.dataset)
                path.parent.mkdir(parents=True, exist_ok=True)
                datasets.Dataset.from_dict({
                    source.id_field: [str(i) for i in range(12)], source.title_field: ["t"] * 12,
                    source.text_field: [" ".join(sentence(rng) for _ in range(5))
                                        for _ in range(12)]}).to_parquet(str(path))
    return root


@pytest.fixture(scope="module")
def smoke_env(mirror_with_stand_ins, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(mirror_with_stand_ins))
        patch.setenv("PLMBENCH_CACHE", str(cache / "plmbench"))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache / "datasets"))
        yield tmp_path_factory.mktemp("results")


def test_every_registered_architecture_has_a_tiny_preset():
    presets = {path.stem for path in (CONF_DIR / "model").glob("*.yaml")}
    assert {tiny_preset_name(arch) for arch in [*ARCHS, *BASELINES]} <= presets


def expected_metrics(cfg, arch: str, split: str) -> set[str]:
    """What a run of ``cfg`` records per eval split: the task's (or its target's) metrics (an
    open-QA reader that retrieves nothing: those of its answers), the loss of generation tasks,
    the share of invalid generations for mixtures, the objective's losses and perplexity for
    pretraining (a biLM's per-word losses), a word set's scores for word vectors."""
    if "intrinsic" in cfg.task:
        similarity = split in (cfg.task.intrinsic.similarity or {})
        return {"spearman", "pearson", "oov"} if similarity else {"accuracy", "oov"}
    if get_model(arch).kind == "bilm":
        return {"forward_loss", "backward_loss", "loss", "perplexity"}
    if "members" in cfg.task:
        return {"invalid", "loss"}
    if "target" in cfg.task:  # a task on a fine-tuned run's task: the target's metrics
        return set(cfg.task.target.metrics)
    if "readers" in cfg.task:
        retrieves = OpenQA().reader(cfg.task, ARCHS[arch].kind).retrieves
        return set(cfg.task.metrics) if retrieves else {"exact_match"}
    if "metrics" in cfg.task:
        return set(cfg.task.metrics) | ({"loss"} if "generation" in cfg.task else set())
    return {*hydra.utils.instantiate(cfg.objective).eval_metrics, "perplexity"}


def slow(task: str, arch: str) -> bool:
    """Run with `pytest -m benchmark` only: the domain data with architectures beyond BERT, a
    baseline on its families' tasks beyond its representative ones, and a ``REPRESENTATIVE``
    architecture's other tasks."""
    if arch in BASELINES:
        return task not in (*BASELINE_TASKS[arch], REFUSED)
    if arch in REPRESENTATIVE:
        return task not in REPRESENTATIVE[arch]
    return task.startswith(DATA_ONLY) and arch != "bert"


#: every architecture on every task; a baseline on the tasks of its families and on one it is
#: refused (the refusal is check_arch's, tested on every task by the architectures)
CASES = [(task, arch) for task in TASKS for arch in sorted(ARCHS)] + [
    (task, arch) for arch in sorted(BASELINES) for task in TASKS
    if task.startswith(BASELINE_FAMILIES) or task == REFUSED]


@pytest.mark.parametrize(("task", "arch"), [
    pytest.param(task, arch, marks=[pytest.mark.benchmark] * slow(task, arch))
    for task, arch in CASES])
def test_task_trains_and_evaluates(task, arch, smoke_env):
    """Every task with every architecture its family trains; the others are refused in one
    line before anything is built."""
    results = smoke_env
    family = hydra.utils.instantiate(compose_run("bert", task).task.family)
    kind = get_model(arch).kind
    if kind not in family.kinds:
        with pytest.raises(PlmbenchError, match=rf"trains .* models, and {arch} is of kind"):
            execute(compose_run(arch, task), results / arch / task)
        return
    if kind == "bilstm" and compose_run(arch, task).task.splits.train is None:  # glue/ax
        with pytest.raises(PlmbenchError, match="train on a task's own data"):
            execute(compose_run(arch, task), results / arch / task)
        return
    extra = []  # pretraining uses the preset's own objective (model.objective, else mlm)
    pairs = compose_run(arch, task).get("objective", {})
    if task.startswith("pretrain/tapt/") and (pairs.get("sop") or pairs.get("nsp")):
        extra = ["objective=mlm"]  # one sentence per document: no pairs for ALBERT's SOP
    if task.startswith("pretrain/realm_"):  # REALM masks salient spans (REALM §3.4)
        extra = ["objective=ssm"]
    if task == "glue/ax":  # no training split: predict with an MNLI classifier saved by a run
        extra = [f"init_from=ckpt:{fine_tuned(results, arch, 'glue/mnli')}"]
    if task in ("superglue/axb", "superglue/axg"):  # SuperGLUE's diagnostics: an RTE classifier
        extra = [f"init_from=ckpt:{fine_tuned(results, arch, 'superglue/rte')}",
                 "task.max_eval_samples=8"]
    if task.startswith("probing/"):
        extra = ANALYSIS[task]
    if task.startswith(("analysis/", "compression/")):  # a fine-tuned model and its task
        rte = fine_tuned(results, arch, "glue/rte")
        extra = [f"init_from=ckpt:{rte}", *ANALYSIS.get(task, [])]
        if task == "compression/distill":  # a student of the teacher's architecture and vocabulary
            extra.append(f"task.teacher=ckpt:{rte}")
    exported = task == "squad/v1" or task.startswith("ner/") and kind == "encoder"
    if exported and not ARCHS[arch].hf.token_head_classes:  # transformers' own token heads
        with pytest.raises(PlmbenchError, match="transformers has no .* save_model=true"):
            execute(compose_run(arch, task, "save_model=true"), results / arch / task)
        exported = False
    if exported:  # the reader and the tagger export as transformers' *ForQuestionAnswering,
        extra = ["save_model=true"]  # *ForTokenClassification
    if task == "mc/swag" and "multiple_choice" in ARCHS[arch].hf.classes:
        extra = ["save_model=true"]  # ... and the multiple-choice model as *ForMultipleChoice
    cfg = compose_run(arch, task, *extra)
    run_dir = results / arch / task
    record = execute(cfg, run_dir).to_dict()
    assert record["status"] == "ok"
    assert record["config"]["model"]["arch"] == arch
    if (record["analysis"] or {}).get("page"):  # an analysis's page
        assert (run_dir / record["analysis"]["page"]).is_file()
    if task.startswith("probing/"):  # a probe per layer, over the mix, and on the control task
        split = record["metrics"][cfg.task.splits.eval[0]]
        layers = record["config"]["model"].get("num_hidden_layers") or 0
        assert {"mix", "centre_of_gravity", "layer_0"} <= set(split)
        assert len(record["analysis"]["layers"]) == len(record["analysis"]["mix_weights"])
        assert not layers or len(record["analysis"]["layers"]) == layers + 1
    if task.startswith("compression/") or task == "analysis/head_pruning":  # measured
        assert {"score", "parameters", "size_mb", "latency_ms"} <= set(
            record["metrics"]["compression"])
    if cfg.task.splits.train is None:  # evaluated only: predictions written, or metrics kept
        assert (record["predictions"] or record["analysis"]
                or set(cfg.task.splits.eval) <= set(record["metrics"]))
        assert all((run_dir / p).is_file() for p in record["predictions"].values())
        return
    assert record["steps"] == 1
    metrics = {split: v for split, v in record["metrics"].items() if split != "compression"}
    assert set(metrics) == set(cfg.task.splits.eval)
    for split, values in metrics.items():
        assert expected_metrics(cfg, arch, split) <= set(values), split
    if "generation" in cfg.task:  # generations are written for every eval split
        assert set(record["predictions"]) == set(cfg.task.splits.eval)
    if "bleu" in cfg.task.get("metrics", ()):  # sacreBLEU's signature beside every BLEU
        assert set(record["metric_signatures"]) == set(cfg.task.splits.eval)
    if task == "squad/v1" and exported:
        assert_reader_export_scores_as_transformers(run_dir / "model")
    if task.startswith("ner/") and exported:
        assert_tagger_export_scores_as_transformers(run_dir / "model")
    if "save_model=true" in extra and task == "mc/swag":
        assert_multiple_choice_export_loads(run_dir / "model")
    if task.startswith("mc/"):
        assert_predictions_score_as_recorded(run_dir, record)


def assert_predictions_score_as_recorded(run_dir: Path, record: dict) -> None:
    """The answer indices a multiple-choice run writes beside the gold ones give the accuracy
    its record holds, split by split."""
    for split, path in record["predictions"].items():
        with open(run_dir / path, newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        assert rows and all(row["prediction"].isdigit() for row in rows), path
        accuracy = sum(row["prediction"] == row["label"] for row in rows) / len(rows)
        assert accuracy == pytest.approx(record["metrics"][split]["accuracy"]), split


def assert_multiple_choice_export_loads(export: Path) -> None:
    """The exported multiple-choice model loads in transformers with every weight in place
    (its scores equal ours: tests/lit_models/families/test_multiple_choice.py)."""
    transformers = require("transformers")
    _, info = transformers.AutoModelForMultipleChoice.from_pretrained(
        export, output_loading_info=True)
    assert not any(info.values()), info


def assert_reader_export_scores_as_transformers(export: Path) -> None:
    """The exported reader, loaded by transformers' AutoModelForQuestionAnswering, gives the
    start and end logits our encoder and span head (loaded back from it) give, on a padded pair
    batch."""
    transformers = require("transformers")
    arch, encoder, tokenizer = from_hf(export)
    head = torch.nn.ModuleDict({"qa_outputs": torch.nn.Linear(encoder.config.hidden_size, 2)})
    assert load_head(head, export, QA_HEAD_NAMES)
    pairs = [("Who sat on the mat?", "The cat sat on the mat."), ("Was it lazy?", "It was.")]
    encodings = tokenizer.backend.encode_batch(pairs)
    batch = pad_collate([{"input_ids": e.ids, "token_type_ids": e.type_ids} for e in encodings],
                        pad_id=tokenizer.special.pad)
    if getattr(encoder.config, "type_vocab_size", 0) < 2:  # no segment B embedding
        batch.pop("token_type_ids")
    extra = {}
    if arch.capabilities.global_attention:
        # Longformer: global attention before the first separator, as transformers sets it
        first_sep = (batch["input_ids"] == tokenizer.special.sep).int().argmax(1, keepdim=True)
        extra["global_attention_mask"] = torch.arange(batch["input_ids"].shape[1]) < first_sep
    theirs = transformers.AutoModelForQuestionAnswering.from_pretrained(export).eval()
    with torch.no_grad():
        hidden = encoder.eval()(**batch, **extra).last_hidden_state
        start, end = head.qa_outputs(hidden).unbind(-1)
        out = theirs(**batch)
    mask = batch["attention_mask"].bool()
    assert (start - out.start_logits)[mask].abs().max() <= 1e-5
    assert (end - out.end_logits)[mask].abs().max() <= 1e-5


def assert_tagger_export_scores_as_transformers(export: Path) -> None:
    """The exported tagger, loaded by transformers' AutoModelForTokenClassification, gives the
    tag logits our encoder and token head (loaded back from it) give, on a padded batch."""
    transformers = require("transformers")
    arch, encoder, tokenizer = from_hf(export)
    labels = task_labels(export, "tagger")
    ours = LitTagger(encoder, labels, (), 0.0, {}).eval()
    assert load_head(torch.nn.ModuleDict({"classifier": ours.classifier}), export,
                     TAGGER_HEAD_NAMES)
    sentences = [["The", "quick", "brown", "fox", "jumped", "over", "the", "lazy", "dog", "."],
                 ["Hello", ",", "world"]]
    batch = pad_collate(encode_words(tokenizer.words_encoder(64), sentences), tokenizer.special.pad,
                        PAD_VALUES)
    batch.pop("word_ids")
    if not arch.capabilities.token_types:  # DistilBERT: no segment ids
        batch.pop("token_type_ids")
    theirs = transformers.AutoModelForTokenClassification.from_pretrained(export).eval()
    assert theirs.config.id2label == dict(enumerate(labels))
    with torch.no_grad():
        mine, out = ours(batch), theirs(**batch).logits
    mask = batch["attention_mask"].bool()
    assert (mine - out)[mask].abs().max() <= 1e-5
