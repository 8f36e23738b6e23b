"""What every open-domain QA reader reports and writes: the task's metrics of its answers (exact
match) and of its retrieved passages (recall@k and MRR on DPR's ``has_answer``), the retriever's
speed and corpus size, and the predictions file's rows (question, retrieved passages with scores,
answer, references)."""

from collections.abc import Mapping, Sequence

from datamodules.open_qa import passage_texts
from lit_models.metrics import Metrics, build_metrics


def prediction_rows(questions, retrieved, corpus, answers: Sequence[str]) -> list[dict]:
    """The predictions file's rows: id, question, passages (id, score), prediction, references."""
    rows, scores = retrieved[0], retrieved[1]
    ids = corpus["id"]
    return [{"id": qid, "question": question,
             "passages": [{"id": ids[r], "score": float(s)}
                          for r, s in zip(ranked, scored, strict=True) if r >= 0],
             "prediction": answer, "references": references}
            for qid, question, references, ranked, scored, answer in zip(
                questions["id"], questions["question"], questions["answers"], rows.tolist(),
                scores.tolist(), answers, strict=True)]


def open_qa_scorer(task: Mapping) -> Metrics:
    """The task's metrics (``metrics``: EM, recall@k, MRR) of answers and retrieved passages."""
    return build_metrics(task["metrics"], ("answers", "rankings"),
                         match=task["questions"]["match"])


def open_qa_metrics(scorer: Metrics, answers: Sequence[str], questions, retrieved, corpus,
                    describe: Mapping) -> dict[str, float]:
    """The ``scorer``'s metrics (on 0..100) of the answers and the retrieved passages, and the
    retriever's figures (queries/s, passages/s, corpus size)."""
    references = questions["answers"]
    scorer.update(references, answers=list(answers),
                  rankings=passage_texts(corpus, retrieved[0].tolist()))
    metrics = scorer.compute()
    scorer.reset()
    metrics["queries_per_s"] = len(references) / max(retrieved[2], 1e-9)
    return metrics | {k: v for k, v in describe.items() if isinstance(v, int | float)}
