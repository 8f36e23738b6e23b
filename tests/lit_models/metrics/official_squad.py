"""The official SQuAD evaluation logic, transcribed from ``evaluate-v1.1.py`` and
``evaluate-v2.0.py`` (rajpurkar.github.io/SQuAD-explorer) over the scripts' own inputs: the
dataset's questions, a predictions file ({id: answer}) and, for v2.0, a null-odds file. Pure
Python, independent of plmbench and torchmetrics, so the tests can recompute a record's figures
from the files a run wrote."""

import collections
import re
import string


def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def get_tokens(s):
    return normalize_answer(s).split() if s else []


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision, recall = num_same / len(pred_toks), num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def f1_score_v1(prediction, ground_truth):
    """``evaluate-v1.1.py``'s ``f1_score``: 0 without a common token, even when both sides
    normalise to nothing (v2.0's ``compute_f1`` scores that 1)."""
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def evaluate_v1(questions, predictions):
    """``evaluate-v1.1.py``: questions are (id, [answer texts])."""
    f1 = exact_match = 0
    for qid, answers in questions:
        prediction = predictions[qid]
        exact_match += max(compute_exact(a, prediction) for a in answers)
        f1 += max(f1_score_v1(prediction, a) for a in answers)
    return {"exact_match": 100.0 * exact_match / len(questions), "f1": 100.0 * f1 / len(questions)}


def evaluate_v2(questions, predictions, na_probs=None, na_prob_thresh=1.0):
    """``evaluate-v2.0.py``: exact/f1 (thresholded at na_prob_thresh with a null-odds file),
    HasAns/NoAns breakdowns, and with ``na_probs`` the best F1 and its threshold."""
    na_probs = na_probs or {qid: 0.0 for qid, _ in questions}
    has_ans = {qid: bool(answers) for qid, answers in questions}
    exact_raw, f1_raw = {}, {}
    for qid, answers in questions:
        gold = [a for a in answers if normalize_answer(a)] or [""]
        exact_raw[qid] = max(compute_exact(a, predictions[qid]) for a in gold)
        f1_raw[qid] = max(compute_f1(a, predictions[qid]) for a in gold)

    def thresholded(scores):
        return {qid: float(not has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
                for qid, s in scores.items()}

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
    out = {"exact": 100.0 * sum(exact.values()) / len(exact),
           "f1": 100.0 * sum(f1.values()) / len(f1)}
    for name, keep in (("HasAns", True), ("NoAns", False)):
        ids = [qid for qid in has_ans if has_ans[qid] == keep]
        if ids:
            out[f"{name}_exact"] = 100.0 * sum(exact[q] for q in ids) / len(ids)
            out[f"{name}_f1"] = 100.0 * sum(f1[q] for q in ids) / len(ids)
    # find_best_thresh on the F1 scores
    cur = best = sum(1 for qid in has_ans if not has_ans[qid])
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if has_ans[qid]:
            diff = f1_raw[qid]
        else:
            diff = -1 if predictions[qid] else 0
        cur += diff
        if cur > best:
            best, best_thresh = cur, na_probs[qid]
    out["best_f1"], out["best_f1_thresh"] = 100.0 * best / len(f1_raw), best_thresh
    return out
