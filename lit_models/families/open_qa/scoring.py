"""What every open-domain QA reader reports and writes: exact match of its answers, the
retriever's recall@k and MRR (DPR's ``has_answer``), its speed and corpus size, and the
predictions file's rows (question, retrieved passages with scores, answer, references)."""

from collections.abc import Mapping, Sequence

import numpy as np

from datamodules.open_qa import passage_texts
from lit_models.metrics.exact_match import exact_match
from lit_models.metrics.retrieval import answer_hits, retrieval_metrics


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


def open_qa_metrics(answers: Sequence[str], questions, retrieved, corpus, match: str,
                    describe: Mapping) -> dict[str, float]:
    """EM (0..100), recall@k and MRR of the retrieved passages, and the retriever's figures."""
    references = questions["answers"]
    em = [exact_match(a, refs, match) for a, refs in zip(answers, references, strict=True)]
    metrics = {"exact_match": 100 * float(np.mean(em)) if em else 0.0}
    if retrieved is not None:
        texts = passage_texts(corpus, retrieved[0].tolist())
        metrics |= retrieval_metrics(answer_hits(texts, references, match, retrieved[0].shape[1]))
        metrics["queries_per_s"] = len(references) / max(retrieved[2], 1e-9)
        metrics |= {k: v for k, v in describe.items() if isinstance(v, int | float)}
    return metrics
