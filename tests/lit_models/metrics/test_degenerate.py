"""Every metric plmbench reports, on degenerate inputs, against the tool a user checks it with:
scikit-learn (accuracy, F1s, Matthews), scipy.stats (Pearson, Spearman), the official SQuAD
v1.1/v2.0 logic (``official_squad.py``), Google's ``rouge-score``, conlleval's chunk counting
(``conlleval.py``), DrQA's exact match and DPR's top-k accuracy (transcribed below). Cases: a
constant predictor, one class present, ties, empty predictions, all wrong, perfect, constant
vectors, and no examples at all (the tools refuse; so does plmbench).

One documented departure: a correlation with a constant vector is undefined; scipy returns NaN,
plmbench 0 (``lit_models/metrics/correlation.py``), asserted here as such.
"""

import math
import re
import string
import sys
import unicodedata
import warnings

import numpy as np
import pytest
import torch

from datamodules.errors import PlmbenchError
from lit_models.metrics.classification import label_metrics
from lit_models.metrics.exact_match import exact_match
from lit_models.metrics.retrieval import answer_hits, retrieval_metrics
from lit_models.metrics.rouge import Rouge
from lit_models.metrics.tagging import bio_decode, entity_scores
from tests.conftest import require
from tests.lit_models.metrics import official_squad
from tests.lit_models.metrics.conlleval import conlleval
from tests.lit_models.metrics.test_squad import squad_v1, squad_v2

sk = require("sklearn.metrics")
stats = require("scipy.stats")

#: (case, predictions, labels, num_labels)
CLASSIFICATION_CASES = [
    ("constant majority, CoLA-like", [1] * 64, [1] * 45 + [0] * 19, 2),
    ("constant minority", [0] * 64, [1] * 45 + [0] * 19, 2),
    ("one class present, perfect", [0] * 8, [0] * 8, 2),
    ("one class present, positive, perfect", [1] * 8, [1] * 8, 2),
    ("one class present, all wrong", [1] * 8, [0] * 8, 2),
    ("all wrong, both classes", [1, 0, 1, 0, 0], [0, 1, 0, 1, 1], 2),
    ("perfect", [1, 0, 1, 0, 0], [1, 0, 1, 0, 0], 2),
    ("no positive predicted", [0, 0, 0, 0], [1, 0, 1, 0], 2),
    ("single example", [1], [0], 2),
    ("3 classes, constant", [2] * 9, [0, 1, 2] * 3, 3),
    ("3 classes, one present, perfect", [1] * 5, [1] * 5, 3),
    ("3 classes, all wrong", [1, 2, 0] * 3, [0, 1, 2] * 3, 3),
    ("3 classes, perfect", [0, 1, 2] * 3, [0, 1, 2] * 3, 3),
    ("5 classes, two seen", [0, 3, 3, 0], [3, 3, 0, 0], 5),
]


def sklearn_value(name: str, preds: list, labels: list, num_labels: int) -> float:
    if name == "accuracy":
        return sk.accuracy_score(labels, preds)
    if name == "matthews":
        return sk.matthews_corrcoef(labels, preds)
    average = {"f1": "binary" if num_labels == 2 else "macro",
               "macro_f1": "macro", "micro_f1": "micro"}[name]
    return sk.f1_score(labels, preds, average=average, zero_division=0.0)


def computed(names: list[str], num_labels: int, preds, target) -> dict[str, float]:
    """Our metrics fed in two uneven batches (when there are two examples or more)."""
    metrics = label_metrics(names, num_labels)
    kind = "scores" if num_labels == 1 else "labels"
    cut = max(1, len(preds) // 3)
    for p, t in ((preds[:cut], target[:cut]), (preds[cut:], target[cut:])):
        if len(p):
            metrics.update(t, **{kind: p})
    return {name: float(value) for name, value in metrics.compute().items()}


@pytest.mark.parametrize(("case", "preds", "labels", "num_labels"), CLASSIFICATION_CASES,
                         ids=[c[0] for c in CLASSIFICATION_CASES])
def test_classification_equals_scikit_learn(case, preds, labels, num_labels):
    names = ["accuracy", "f1", "macro_f1", "micro_f1", "matthews"]
    ours = computed(names, num_labels, torch.tensor(preds), torch.tensor(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns on the undefined cases it zeroes
        expected = {n: sklearn_value(n, preds, labels, num_labels) for n in names}
    # torchmetrics' accuracy and F1 are float32: equal to the 7th digit
    assert ours == pytest.approx(expected, abs=1e-7), case


def test_constant_predictor_earns_no_matthews_credit():
    """The issue's case: torchmetrics gave a constant CoLA predictor 0.1011 on 64 sentences."""
    labels = torch.tensor([1] * 45 + [0] * 19)
    assert computed(["matthews"], 2, torch.ones(64, dtype=torch.long), labels) == {"matthews": 0}


#: (case, predictions, gold scores)
REGRESSION_CASES = [
    ("ties in both", [1.0, 1.0, 2.0, 2.0, 3.0], [1.0, 2.0, 2.0, 3.0, 3.0]),
    ("two examples, inverted", [1.0, 2.0], [2.0, 1.0]),
    ("perfect, nonlinear", [0.1, 0.4, 0.9, 1.6, 2.5], [1.0, 2.0, 3.0, 4.0, 5.0]),
    ("near-constant, perfectly linear", [3.0 + 1e-6 * i for i in range(20)],
     [0.25 * i for i in range(20)]),
    ("large offset", [1e6 + i % 7 for i in range(50)], [float(i % 5) for i in range(50)]),
    ("all tied but one", [2.0] * 9 + [3.0], [float(i) for i in range(10)]),
]


@pytest.mark.parametrize(("case", "preds", "gold"), REGRESSION_CASES,
                         ids=[c[0] for c in REGRESSION_CASES])
def test_correlations_equal_scipy(case, preds, gold):
    ours = computed(["pearson", "spearman"], 1, torch.tensor(preds, dtype=torch.float64),
                    torch.tensor(gold))
    expected = {"pearson": stats.pearsonr(preds, gold).statistic,
                "spearman": stats.spearmanr(preds, gold).statistic}
    assert ours == pytest.approx(expected, abs=1e-9), case


def test_float32_predictions_correlate_as_their_values_do():
    """A model's float32 scores, near-constant: float32 running moments would correlate noise."""
    g = torch.Generator().manual_seed(0)
    gold = torch.rand(200, generator=g) * 5
    preds = (2.5 + 1e-4 * gold + 1e-5 * torch.randn(200, generator=g)).float()
    ours = computed(["pearson", "spearman"], 1, preds, gold)
    x, y = preds.double().numpy(), gold.double().numpy()
    assert ours["pearson"] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-9)
    assert ours["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-9)


@pytest.mark.parametrize("constant", ["predictions", "gold", "both"])
def test_correlation_of_a_constant_vector_is_zero_where_scipy_says_nan(constant):
    varying = [1.0, 2.0, 3.0, 4.0, 5.0]
    preds = [2.5] * 5 if constant in ("predictions", "both") else varying
    gold = [2.5] * 5 if constant in ("gold", "both") else varying
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isnan(stats.pearsonr(preds, gold).statistic)
        assert math.isnan(stats.spearmanr(preds, gold).statistic)
    ours = computed(["pearson", "spearman"], 1, torch.tensor(preds), torch.tensor(gold))
    assert ours == {"pearson": 0.0, "spearman": 0.0}


@pytest.mark.parametrize(("names", "num_labels"), [(["matthews"], 2), (["pearson"], 1),
                                                   (["spearman"], 1)])
def test_no_examples_are_refused_as_the_tools_refuse_them(names, num_labels):
    with pytest.raises(ValueError):
        sk.matthews_corrcoef([], []) if num_labels > 1 else stats.pearsonr([], [])
    metrics = label_metrics(names, num_labels)
    with pytest.raises(PlmbenchError, match="empty"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchmetrics: compute before update
        metrics.compute()


# --- SQuAD v1.1 / v2.0 ---------------------------------------------------------------------

#: (case, prediction, references)
SQUAD_CASES = [
    ("empty prediction", "", ["Denver Broncos"]),
    ("prediction of an article only", "the", ["Denver Broncos"]),
    ("both normalise to nothing", "The.", ["the"]),
    ("answerable, its answer normalises to nothing", "", ["an"]),
    ("empty prediction, one empty reference", "", ["a", "Denver"]),
    ("punctuation only", "!!", ["!?"]),
    ("repeated tokens", "Denver Denver Denver", ["Denver Broncos"]),
    ("all wrong", "Carolina", ["Denver Broncos", "Broncos"]),
    ("perfect up to normalisation", "the DENVER broncos!", ["Denver Broncos"]),
]


@pytest.mark.parametrize(("case", "prediction", "references"), SQUAD_CASES,
                         ids=[c[0] for c in SQUAD_CASES])
def test_squad_v1_equals_the_official_script_question_by_question(case, prediction, references):
    official = official_squad.evaluate_v1([("q", references)], {"q": prediction})
    assert squad_v1([prediction], [references]) == pytest.approx(official, abs=1e-9), case


def test_squad_v1_over_all_cases_at_once():
    questions = [(str(i), refs) for i, (_, _, refs) in enumerate(SQUAD_CASES)]
    predictions = {str(i): p for i, (_, p, _) in enumerate(SQUAD_CASES)}
    ours = squad_v1(list(predictions.values()), [refs for _, refs in questions])
    assert ours == pytest.approx(official_squad.evaluate_v1(questions, predictions), abs=1e-9)


V2_CASES = {
    "answerable only": (["Denver", "", "x"], [["Denver"], ["Carolina"], ["x y"]]),
    "unanswerable only": (["", "the", "Denver"], [[], [], []]),
    "an answer that normalises to nothing": (["", "the", "x"], [["the"], [], ["a"]]),
    "mixed": (["Denver", "", "", "Paris"], [["Denver"], [], ["Carolina"], []]),
}


@pytest.mark.parametrize("case", list(V2_CASES))
def test_squad_v2_equals_the_official_script(case):
    """The thresholded predictions scored by the script as the record scores them; HasAns/NoAns
    appear only where the script has them."""
    texts, answers = V2_CASES[case]
    odds = -np.arange(len(texts), dtype=float)
    ours, final = squad_v2(texts, odds, answers)
    questions = [(str(i), a) for i, a in enumerate(answers)]
    official = official_squad.evaluate_v2(questions, {str(i): t for i, t in enumerate(final)})
    renamed = {k.replace("exact", "exact_match"): v for k, v in official.items()
               if not k.startswith("best_")}
    # torchmetrics scores questions in float32: equal to the 7th digit
    assert {k: v for k, v in ours.items() if k in renamed} == pytest.approx(renamed, abs=1e-5)
    assert {k for k in ours if k.endswith(("_exact_match", "_f1"))} == \
        {k for k in renamed if k.endswith(("_exact_match", "_f1"))}


def test_squad_v2_threshold_with_tied_null_odds_is_one_a_file_can_hold():
    """A collapsed model gives every question the same null odds: abstaining on some of them
    and not others is no threshold. The script's best F1 counts the first of the tied questions
    (file order) alone; ours answers all or none of them, and its figure is what the written
    file scores, the best over the thresholds that exist."""
    texts = ["Denver", "Paris", "Rome", "Oslo"]
    answers = [["Denver"], [], [], ["Lima"]]
    odds = np.zeros(4)
    ours, final = squad_v2(texts, odds, answers)
    questions = [(str(i), a) for i, a in enumerate(answers)]
    ids = [str(i) for i in range(4)]
    script = official_squad.evaluate_v2(questions, dict(zip(ids, texts, strict=True)),
                                        dict(zip(ids, odds.tolist(), strict=True)))
    assert script["best_f1"] == 75.0  # only "Denver" answered: no threshold does that
    written = official_squad.evaluate_v2(questions, dict(zip(ids, final, strict=True)))
    assert ours["f1"] == pytest.approx(written["f1"])
    achievable = [official_squad.evaluate_v2(questions, dict(zip(ids, texts, strict=True)),
                                             dict(zip(ids, odds.tolist(), strict=True)), t)["f1"]
                  for t in (-1.0, 0.0)]  # abstain on all; answer all
    assert ours["f1"] == pytest.approx(max(achievable)) == 50.0


def test_squad_of_no_questions_is_refused():
    with pytest.raises(ZeroDivisionError):
        official_squad.evaluate_v1([], {})
    with pytest.raises(PlmbenchError, match="empty"):
        squad_v1([], [])
    with pytest.raises(PlmbenchError, match="empty"):
        squad_v2([], np.zeros(0), [])


# --- ROUGE -----------------------------------------------------------------------------------

#: (prediction, reference)
ROUGE_CASES = [
    ("", ""), ("", "a cat"), ("a cat", ""), ("...", "a cat"), ("the cat sat", "the cat sat"),
    ("x y z", "a b c"), ("the the the", "the cat"), ("a b a b", "a b"),
    ("running dogs ran", "run dog running"), ("a b\nc d", "c d\na b"), ("a\n\nb", "a b"),
    ("x\n", "\nx"), ("Café 1,000", "cafe 1000"),
]


@pytest.fixture
def absl_stream_released():
    """rouge-score logs through absl, whose handler keeps the stderr of the moment (pytest's
    capture file) and closes it when logging is reconfigured (a Hydra run does) while stderr is
    redirected; pointed at the process's own stderr, which absl never closes, it closes nothing
    of pytest's."""
    yield
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None:
        absl_logging.get_absl_handler().python_handler.stream = sys.__stderr__


def test_rouge_equals_rouge_score_case_by_case_and_on_average(absl_stream_released):
    rouge_scorer = require("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"],
                                      use_stemmer=True)
    expected = {key: [] for key in ("rouge1", "rouge2", "rougeL", "rougeLsum")}
    for prediction, reference in ROUGE_CASES:
        ours = Rouge()
        ours.update([prediction], [reference])
        scores = scorer.score(reference, prediction)  # rouge-score takes (target, prediction)
        for key, values in expected.items():
            values.append(scores[key].fmeasure)
        got = {key: float(value) for key, value in ours.compute().items()}
        assert got == pytest.approx({k: v[-1] for k, v in expected.items()}, abs=1e-6), \
            (prediction, reference)
    ours = Rouge()
    ours.update([p for p, _ in ROUGE_CASES], [r for _, r in ROUGE_CASES])
    got = {key: float(value) for key, value in ours.compute().items()}
    assert got == pytest.approx({k: float(np.mean(v)) for k, v in expected.items()}, abs=1e-6)


# --- entity-level tagging -----------------------------------------------------------------------

#: (case, gold sentences, predicted sentences)
TAGGING_CASES = [
    ("no entities anywhere", [["O", "O"]], [["O", "O"]]),
    ("an entity predicted, none gold", [["O", "O"]], [["B-X", "O"]]),
    ("entities gold, none predicted", [["B-X", "I-X", "O"]], [["O", "O", "O"]]),
    ("perfect", [["B-X", "I-X", "O", "B-Y"]], [["B-X", "I-X", "O", "B-Y"]]),
    ("I- opens an entity", [["B-X", "I-X", "O"]], [["I-X", "I-X", "O"]]),
    ("type changes inside", [["B-X", "I-X"]], [["B-X", "I-Y"]]),
    ("boundary off by one", [["B-X", "I-X", "O"]], [["B-X", "O", "O"]]),
    ("all wrong types", [["B-X", "O", "B-X"]], [["B-Y", "O", "B-Y"]]),
    ("two sentences, entity at the end", [["O", "B-X"], ["B-X", "O"]],
     [["O", "B-X"], ["I-X", "O"]]),
]


@pytest.mark.parametrize(("case", "gold", "predicted"), TAGGING_CASES,
                         ids=[c[0] for c in TAGGING_CASES])
def test_entity_scores_equal_conlleval(case, gold, predicted):
    expected = dict(zip(("precision", "recall", "f1"), conlleval(gold, predicted), strict=True))
    assert entity_scores(gold, predicted) == pytest.approx(expected, abs=1e-9), case
    # what the tagger writes (bio_decode) scores as what it predicted
    decoded = [bio_decode(tags) for tags in predicted]
    assert entity_scores(gold, decoded) == pytest.approx(expected, abs=1e-9), case


# --- open-domain QA exact match ---------------------------------------------------------------


def drqa_exact_match(prediction: str, references: list[str], match: str) -> bool:
    """DrQA's ``exact_match_score`` / ``regex_match_score`` over ``metric_max_over_ground_truths``
    (``drqa/pipeline/drqa.py`` and ``scripts/pipeline/eval.py``)."""
    if match == "regex":
        def hit(pattern):
            try:
                compiled = re.compile(pattern, flags=re.IGNORECASE | re.UNICODE | re.MULTILINE)
            except re.error:
                return False
            return compiled.match(prediction) is not None
        return max(hit(r) for r in references)
    return max(official_squad.normalize_answer(prediction)
               == official_squad.normalize_answer(r) for r in references)


#: (prediction, references, match)
EXACT_MATCH_CASES = [
    ("", ["the"], "string"), ("", ["Paris"], "string"), ("The Paris!", ["paris"], "string"),
    ("an", ["a", "the"], "string"), ("Paris France", ["Paris"], "string"),
    ("1887 it was", [r"18\d\d"], "regex"), ("in 1887", [r"18\d\d"], "regex"),
    ("", [r".*"], "regex"), ("PARIS", ["paris|rome"], "regex"), ("x", ["(unclosed", "x"], "regex"),
    ("x", ["(unclosed"], "regex"),
]


@pytest.mark.parametrize(("prediction", "references", "match"), EXACT_MATCH_CASES)
def test_exact_match_equals_drqa(prediction, references, match):
    assert exact_match(prediction, references, match) == \
        drqa_exact_match(prediction, references, match)


# --- retrieval ---------------------------------------------------------------------------------


def dpr_top_k_accuracy(hits: np.ndarray, k: int) -> float:
    """DPR's ``validate``: a question counts from the rank of its first hit on (x 100)."""
    top_k_hits = [0] * hits.shape[1]
    for row in hits:
        first = next((i for i, hit in enumerate(row) if hit), None)
        if first is not None:
            top_k_hits[first:] = [v + 1 for v in top_k_hits[first:]]
    return 100 * top_k_hits[min(k, hits.shape[1]) - 1] / len(hits)


def reciprocal_rank(hits: np.ndarray) -> float:
    return 100 * float(np.mean([1 / (np.argmax(row) + 1) if row.any() else 0.0 for row in hits]))


RETRIEVAL_CASES = {
    "no hits at all": np.zeros((3, 4), dtype=bool),
    "every passage a hit": np.ones((3, 4), dtype=bool),
    "one passage each": np.array([[True], [False]]),
    "hits at the last rank only": np.array([[False, False, True], [False, False, True]]),
    "one question": np.array([[False, True, True, False]]),
}


@pytest.mark.parametrize("case", list(RETRIEVAL_CASES))
def test_retrieval_metrics_equal_dpr(case):
    hits = RETRIEVAL_CASES[case]
    ours = retrieval_metrics(hits, recall_at=(1, 2, 5))
    expected = {f"recall@{k}": dpr_top_k_accuracy(hits, k) for k in (1, 2, 5)}
    expected["mrr"] = reciprocal_rank(hits)
    assert ours == pytest.approx(expected, abs=1e-5), case  # torchmetrics: float32


def test_dpr_has_answer_on_degenerate_texts():
    """DPR's has_answer: an answer with no tokens matches nothing; an empty passage holds none."""
    def dpr_tokens(text):
        text = unicodedata.normalize("NFD", text)
        return [t.lower() for t in re.findall(r"\w+|[^\w\s]", text)]

    def dpr_has_answer(text, answers):
        tokens = dpr_tokens(text)
        for answer in answers:
            a = dpr_tokens(answer)
            if a and any(tokens[i:i + len(a)] == a for i in range(len(tokens) - len(a) + 1)):
                return True
        return False

    cases = [("", ["x"]), ("x y", [""]), ("x y", ["  "]), ("x, y", [","]), ("Paris!", ["paris"]),
             ("x" + string.punctuation, ["x!"])]
    hits = answer_hits([[text] for text, _ in cases], [answers for _, answers in cases])
    assert hits[:, 0].tolist() == [dpr_has_answer(t, a) for t, a in cases]
