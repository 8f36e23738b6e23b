"""SQuAD exact match and F1 against values computed by hand, and against the official scripts'
logic (``tests/lit_models/metrics/official_squad.py``) on real dev questions; the v2.0 null
threshold is the one ``find_best_thresh`` picks. torchmetrics scores each question in float32, so
figures agree with the scripts' float64 to 1e-6 relative (the 7th significant digit)."""

import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from lit_models.metrics import build_metrics
from lit_models.metrics.squad import abstain, best_null_threshold, normalize_answer, question_scores
from tests.lit_models.metrics import official_squad


def squad_v1(predictions, references) -> dict:
    """The registry's SQuAD v1.1 figures, as a squad/v1 task names them."""
    metrics = build_metrics(["exact_match", "f1"], "answers")
    metrics.update(references, answers=predictions)
    return metrics.compute()


def squad_v2(texts, odds, answers) -> tuple[dict, list[str]]:
    """The registry's SQuAD v2.0 figures (a task naming any of them gets all) and the answers
    after abstaining, as the extractive-QA family writes them."""
    metrics = build_metrics(["f1"], "answers_with_null_odds")
    metrics.update(answers, answers_with_null_odds=list(zip(texts, odds, strict=True)))
    values = metrics.compute()
    return values, abstain(texts, odds, values["null_threshold"])


def test_normalisation_drops_case_punctuation_articles_and_spaces():
    assert normalize_answer("  The  Eiffel-Tower, an icon!") == "eiffeltower icon"


def test_scores_computed_by_hand():
    predictions = ["the Eiffel Tower!", "Paris France", "in 1876", "", "Denver"]
    references = [
        ["Eiffel Tower", "tower"],  # normalised equal: EM 1, F1 1
        ["France"],  # 1 of 2 predicted tokens right: P 1/2, R 1, F1 2/3
        ["September 1876", "1876"],  # vs "september 1876": F1 1/2; vs "1876": 2/3 -> 2/3
        [""],  # v2.0 unanswerable, abstained: EM 1, F1 1
        [""],  # v2.0 unanswerable, answered: 0, 0
    ]
    em, f1 = question_scores(predictions, references)
    assert em.tolist() == [1, 0, 0, 1, 0]
    assert f1 == pytest.approx([1, 2 / 3, 2 / 3, 1, 0])
    assert squad_v1(predictions[:3], references[:3]) == pytest.approx(
        {"exact_match": 100 / 3, "f1": 100 * (1 + 2 / 3 + 2 / 3) / 3})


def test_v2_threshold_and_breakdowns_by_hand():
    texts = ["Denver Broncos", "1876", "a cat", "Paris"]
    answers = [["Denver Broncos"], ["September 1876"], [], []]
    # answered in increasing odds: q0 (+1) -> 1 + 2 unanswerable abstaining = 3; q2 (-1) -> 2;
    # q1 (+2/3) -> 2.67; q3 (-1) -> 1.67: the best is after q0, threshold = q0's odds
    odds = np.array([-3.0, 0.5, -1.0, 2.0])
    metrics, final = squad_v2(texts, odds, answers)
    assert metrics["null_threshold"] == -3.0
    assert final == ["Denver Broncos", "", "", ""]
    assert metrics["exact_match"] == pytest.approx(75.0)
    assert metrics["f1"] == pytest.approx(75.0)
    assert metrics["HasAns_exact_match"] == 50.0 and metrics["HasAns_f1"] == 50.0
    assert metrics["NoAns_exact_match"] == 100.0 and metrics["NoAns_total"] == 2


def test_threshold_below_every_odds_when_answering_never_helps():
    threshold = best_null_threshold(np.array([0.0, 0.0]), np.array([True, False]),
                                    np.array([1.0, 2.0]), np.array([False, False]))
    assert threshold < 1.0


def _noisy_predictions(rows, rng):
    """Gold answers, sloppy spans, wrong words and abstentions: every scoring branch."""
    out = []
    for row in rows:
        context, answers = row["context"], row["answers"]
        choice = rng.random()
        if answers["text"] and choice < 0.4:
            start = answers["answer_start"][0]
            out.append(context[max(0, start - rng.randint(0, 8)):
                               start + len(answers["text"][0]) + rng.randint(-3, 8)])
        elif choice < 0.8:
            start = rng.randrange(len(context))
            out.append(context[start:start + rng.randint(1, 30)])
        else:
            out.append("")
    return out


def test_v1_equals_the_official_script(mirror):
    rows = pq.read_table(mirror / "squad/plain_text/validation.parquet").to_pylist()[:400]
    predictions = _noisy_predictions(rows, random.Random(0))
    ours = squad_v1(predictions, [r["answers"]["text"] for r in rows])
    official = official_squad.evaluate_v1(
        [(r["id"], r["answers"]["text"]) for r in rows],
        {r["id"]: p for r, p in zip(rows, predictions, strict=True)})
    assert ours == pytest.approx(official, rel=1e-6)
    assert 5 < ours["f1"] < 95


def test_v2_equals_the_official_script(mirror):
    rows = pq.read_table(mirror / "squad_v2/squad_v2/validation.parquet").to_pylist()[:400]
    rng = random.Random(1)
    texts = _noisy_predictions(rows, rng)
    # a system whose null odds are informative: low where it answers an answerable question
    odds = np.array([rng.gauss(-1.5 if r["answers"]["text"] and t else 1.5, 2)
                     for r, t in zip(rows, texts, strict=True)])
    answers = [r["answers"]["text"] for r in rows]
    ours, final = squad_v2(texts, odds, answers)
    questions = [(r["id"], r["answers"]["text"]) for r in rows]
    ids = [r["id"] for r in rows]
    # the written file (thresholded answers) scores as the record says
    official = official_squad.evaluate_v2(questions, dict(zip(ids, final, strict=True)))
    for name in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
        ours_name = name.replace("exact", "exact_match")
        assert ours[ours_name] == pytest.approx(official[name], rel=1e-6), name
    # the threshold is the one the official script finds on the raw answers and null odds
    raw = official_squad.evaluate_v2(questions, dict(zip(ids, texts, strict=True)),
                                     dict(zip(ids, odds.tolist(), strict=True)))
    assert ours["null_threshold"] == raw["best_f1_thresh"] != 0.0
    assert ours["f1"] == pytest.approx(raw["best_f1"], rel=1e-6)
