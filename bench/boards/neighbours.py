"""``plmbench neighbours WORD``: a word's static neighbours beside its contextual ones, as Peters et
al. 2018's Table 4 sets GloVe's nearest words to "play" against the biLM's nearest occurrences of
"play" in other sentences (§5.3: the biLM tells the sports sense from the theatre sense, GloVe's
neighbours mix them, mostly sports).

    plmbench neighbours play --vectors ckpt:<word-vectors run> --elmo ckpt:<ELMo run>
        [--task pretrain/wikipedia] [--context "a sentence with play" ...] [--queries 2]
        [--k 5] [--layer -1] [--max-sentences 20000] [--json FILE] [task overrides ...]

- static: the ``k`` words of highest cosine similarity in the vectors (a word-vectors run's
  ``model/vectors.txt``, or any word2vec / GloVe file);
- contextual: the biLM's ``layer`` (of its L + 1; -1 the top one) at the word in each query
  sentence (``--context``, else the first ``--queries`` sentences of the corpus holding the word),
  and the ``k`` occurrences of the word in the corpus's other sentences whose vectors are most
  similar (cosine). The corpus is the training text of ``--task`` (any corpus task, with its
  overrides: task.max_train_samples=N ...), its first ``--max-sentences`` sentences holding the
  word, split into words as the biLM reads them (cased).
"""

from pathlib import Path

import torch

from bench.arguments import OneLineParser
from bench.compose import compose_config
from datamodules import pretrain, strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.words import split_words
from lit_models.families.bilm import load_elmo, occurrence_vectors
from lit_models.families.bilstm_inputs import read_vectors, vectors_file
from lit_models.metrics.word_vectors import nearest_neighbours, unit


def static_neighbours(spec: str, word: str, k: int) -> list[tuple[str, float]]:
    keyed = read_vectors(vectors_file(spec))
    if word not in keyed.key_to_index:
        raise PlmbenchError(f"{word!r} has no vector in {spec}; pick a word of its vocabulary")
    ids, cosines = nearest_neighbours(torch.from_numpy(keyed.vectors),
                                      torch.tensor([keyed.key_to_index[word]]), k)
    return [(keyed.index_to_key[i], round(c, 4))
            for i, c in zip(ids[0].tolist(), cosines[0].tolist(), strict=True)]


def corpus_sentences(word: str, overrides: list[str], limit: int) -> list[list[str]]:
    """The first ``limit`` sentences of the task's training text that hold ``word``, as words."""
    task = compose_config(overrides, "pass --task and task overrides").task
    _, sentences = pretrain.vocabulary_corpus(task)
    found = []
    for sentence in sentences:
        if word in sentence:
            words = split_words([sentence], lowercase=False)[0]
            if word in words:
                found.append(words)
                if len(found) == limit:
                    break
    if len(found) < 2:
        raise PlmbenchError(f"{task.name}: {len(found)} sentence(s) hold {word!r}; contextual "
                            "neighbours need two or more: raise task.max_train_samples")
    return found


def contextual_neighbours(spec: str, word: str, contexts: list[str], queries: int,
                          corpus: list[list[str]], k: int, layer: int) -> list[dict]:
    """For each query sentence, the corpus sentences whose occurrence of ``word`` is nearest."""
    net, _ = load_elmo(spec)
    asked = split_words(contexts, lowercase=False) if contexts else corpus[:queries]
    missing = [" ".join(words) for words in asked if word not in words]
    if missing:
        raise PlmbenchError(f"--context {missing[0]!r} does not hold {word!r}")
    query_places, query_vectors = occurrence_vectors(net.encoder, asked, word, layer)
    places, vectors = occurrence_vectors(net.encoder, corpus, word, layer)
    scores = unit(query_vectors) @ unit(vectors).T
    first = {}  # each query sentence by its first occurrence of the word
    for index, (sentence, _) in enumerate(query_places):
        first.setdefault(sentence, index)
    results = []
    for sentence, q in first.items():
        words = " ".join(asked[sentence])
        row = scores[q].clone()  # the query's own sentence is no neighbour of it
        row[[i for i, (s, _) in enumerate(places) if " ".join(corpus[s]) == words]] = -torch.inf
        best = row.topk(min(k, int((row > float("-inf")).sum())))
        results.append({"query": words, "neighbours": [
            (" ".join(corpus[places[i][0]]), round(c, 4))
            for i, c in zip(best.indices.tolist(), best.values.tolist(), strict=True)]})
    return results


def render(report: dict) -> str:
    word = report["word"]
    lines = [f"## Nearest neighbours of \"{word}\"", ""]
    if report["static"] is not None:
        lines += [f"### static vectors ({report['vectors']})", "",
                  ", ".join(f"{w} ({c:.2f})" for w, c in report["static"]), ""]
    if report["contextual"] is not None:
        lines += [f"### biLM, layer {report['layer']} ({report['elmo']}): the nearest "
                  f"occurrences in {report['sentences']} corpus sentences", "",
                  "| query sentence | nearest sentences (cosine) |", "|---|---|"]
        for entry in report["contextual"]:
            nearest = "<br>".join(f"{s} ({c:.2f})" for s, c in entry["neighbours"])
            lines.append(f"| {entry['query']} | {nearest} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = OneLineParser(prog="plmbench neighbours",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("word")
    parser.add_argument("--vectors", help="ckpt:<word-vectors run> or a vectors file")
    parser.add_argument("--elmo", help="ckpt:<ELMo biLM run>")
    parser.add_argument("--task", default="pretrain/wikipedia", help="the corpus task")
    parser.add_argument("--context", action="append", default=[],
                        help="a query sentence holding WORD (repeatable)")
    parser.add_argument("--queries", type=int, default=2,
                        help="without --context: the first N corpus sentences holding WORD")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--layer", type=int, default=-1, help="the biLM layer (0 = tokens)")
    parser.add_argument("--max-sentences", type=int, default=20000)
    parser.add_argument("--json", type=Path, help="also write the report as JSON")
    args, overrides = parser.parse_known_args(argv)
    if not args.vectors and not args.elmo:
        raise PlmbenchError("plmbench neighbours needs --vectors, --elmo or both")
    report = {"word": args.word, "vectors": args.vectors, "elmo": args.elmo, "layer": args.layer,
              "static": None, "contextual": None, "sentences": 0}
    if args.vectors:
        report["static"] = static_neighbours(args.vectors, args.word, args.k)
    if args.elmo:
        corpus = corpus_sentences(args.word, [f"task={args.task}", *overrides],
                                  args.max_sentences)
        report["sentences"] = len(corpus)
        report["contextual"] = contextual_neighbours(args.elmo, args.word, args.context,
                                                     args.queries, corpus, args.k, args.layer)
    if args.json:
        atomic_write_text(args.json, strict_json.dumps(report, indent=2) + "\n")
    print(render(report))
    return 0
