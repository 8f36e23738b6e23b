"""Small splits in the hub's column schema of the datasets the offline mirror lacks (SWAG, RACE,
SuperGLUE, WMT) and the raw Goodreads spoiler file, written by the tests into a temporary
``PLMBENCH_DATA``: ``write(root, dataset, config, split)`` writes
``<root>/<dataset>/<config>/<split>.parquet``; ``linked_mirror`` puts them beside the real
mirror's datasets.

The schemas are those of ``allenai/swag`` (config ``regular``), ``ehovy/race``,
``aps/super_glue`` and ``wmt/wmt16`` / ``wmt/wmt14`` (one ``translation`` column of {language:
sentence}); labels are those the hub holds (ids; RACE's answer letters). The WMT "translations"
are English sentences put word by word through a small lexicon (real Romanian and German words,
diacritics included), so a model can learn the mapping and BLEU has something to find."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable
from pathlib import Path

import datasets

WORDS = ("the a cat dog sat on mat quick brown fox jumped over lazy hello world it was red big "
         "small bird tree house man woman ran walked saw").split()
ENTITIES = ["Paris", "Barack Obama", "the United Nations", "Alice", "Mount Everest"]


def sentence(rng: random.Random, low: int = 3, high: int = 10) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


def swag(rng: random.Random, n: int) -> dict:
    rows = {"video-id": [f"v{i}" for i in range(n)], "fold-ind": [str(i) for i in range(n)],
            "sent1": [sentence(rng) for _ in range(n)],
            "sent2": [sentence(rng)[:-1] for _ in range(n)],
            "gold-source": ["gold"] * n, "label": [rng.randrange(4) for _ in range(n)]}
    rows["startphrase"] = [f"{a} {b}" for a, b in zip(rows["sent1"], rows["sent2"], strict=True)]
    for i in range(4):
        rows[f"ending{i}"] = [sentence(rng, 2, 5) for _ in range(n)]
    return rows


def race(rng: random.Random, n: int) -> dict:
    def question() -> str:
        return sentence(rng)[:-1] + (" _ ." if rng.random() < 0.5 else "?")

    return {"example_id": [f"e{i // 2}.txt" for i in range(n)],
            "article": [" ".join(sentence(rng) for _ in range(6)) for _ in range(n)],
            "question": [question() for _ in range(n)],
            "options": [[sentence(rng, 1, 4)[:-1] for _ in range(4)] for _ in range(n)],
            "answer": [rng.choice("ABCD") for _ in range(n)]}


def boolq(rng: random.Random, n: int) -> dict:
    return {"question": [sentence(rng)[:-1].lower() for _ in range(n)],
            "passage": [" ".join(sentence(rng) for _ in range(3)) for _ in range(n)],
            "idx": list(range(n)), "label": [rng.randrange(2) for _ in range(n)]}


def premise_hypothesis(labels: int) -> Callable[[random.Random, int], dict]:
    def rows(rng: random.Random, n: int) -> dict:
        return {"premise": [sentence(rng) for _ in range(n)],
                "hypothesis": [sentence(rng) for _ in range(n)],
                "idx": list(range(n)), "label": [rng.randrange(labels) for _ in range(n)]}
    return rows


def copa(rng: random.Random, n: int) -> dict:
    return {"premise": [sentence(rng) for _ in range(n)],
            "choice1": [sentence(rng) for _ in range(n)],
            "choice2": [sentence(rng) for _ in range(n)],
            "question": [rng.choice(["cause", "effect"]) for _ in range(n)],
            "idx": list(range(n)), "label": [rng.randrange(2) for _ in range(n)]}


def multirc(rng: random.Random, n: int) -> dict:
    """Paragraphs of 2 questions with 2-4 answer options each, until n options."""
    rows = {"paragraph": [], "question": [], "answer": [], "idx": [], "label": []}
    paragraph = question = 0
    while len(rows["label"]) < n:
        text = " ".join(sentence(rng) for _ in range(4))
        for question in range(2):
            asked = sentence(rng)[:-1] + "?"
            for answer in range(rng.randint(2, 4)):
                rows["paragraph"].append(text)
                rows["question"].append(asked)
                rows["answer"].append(sentence(rng, 1, 4))
                rows["idx"].append({"paragraph": paragraph, "question": question,
                                    "answer": answer})
                rows["label"].append(rng.randrange(2))
        paragraph += 1
    return {key: values[:n] for key, values in rows.items()}


def record(rng: random.Random, n: int) -> dict:
    rows = {"passage": [], "query": [], "entities": [], "entity_spans": [], "answers": [],
            "idx": []}
    for i in range(n):
        entities = rng.sample(ENTITIES, 3)
        passage = " ".join(f"{sentence(rng)[:-1]} {e}." for e in entities)
        passage = passage.replace(". ", ".\n@highlight\n", 1)
        starts = [passage.index(e) for e in entities]
        rows["passage"].append(passage)
        rows["query"].append(f"{sentence(rng)[:-1]} @placeholder {sentence(rng)}")
        rows["entities"].append(entities)
        rows["entity_spans"].append({"text": entities, "start": starts,
                                     "end": [s + len(e) for s, e in zip(starts, entities,
                                                                        strict=True)]})
        rows["answers"].append([entities[rng.randrange(3)]])
        rows["idx"].append({"passage": i, "query": i})
    return rows


def wic(rng: random.Random, n: int) -> dict:
    rows = {key: [] for key in ("word", "sentence1", "sentence2", "start1", "start2", "end1",
                                "end2", "idx", "label")}
    for i in range(n):
        word = rng.choice(WORDS[4:])
        first, second = (f"{sentence(rng)[:-1]} {word} {sentence(rng).lower()}" for _ in range(2))
        start1, start2 = first.index(f" {word} ") + 1, second.index(f" {word} ") + 1
        for key, value in (("word", word), ("sentence1", first), ("sentence2", second),
                           ("start1", start1), ("start2", start2), ("end1", start1 + len(word)),
                           ("end2", start2 + len(word)), ("idx", i),
                           ("label", rng.randrange(2))):
            rows[key].append(value)
    return rows


def wsc(rng: random.Random, n: int) -> dict:
    rows = {key: [] for key in ("text", "span1_index", "span2_index", "span1_text", "span2_text",
                                "idx", "label")}
    for i in range(n):
        words = sentence(rng, 6, 12)[:-1].split()
        words[1:3] = ["the", "dog"]
        words[-2] = "it"
        for key, value in (("text", " ".join(words) + "."), ("span1_index", 1),
                           ("span2_index", len(words) - 2), ("span1_text", "the dog"),
                           ("span2_text", "it"), ("idx", i), ("label", rng.randrange(2))):
            rows[key].append(value)
    return rows


#: English -> (Romanian, German); "the" has no Romanian word of its own (the article is a suffix)
LEXICON = {
    "the": ("", "die"), "cat": ("pisica", "Katze"), "dog": ("câinele", "Hund"),
    "sees": ("vede", "sieht"), "eats": ("mănâncă", "isst"), "a": ("un", "ein"),
    "fish": ("pește", "Fisch"), "house": ("casa", "Haus"), "big": ("mare", "groß"),
    "small": ("mică", "klein"), "today": ("astăzi", "heute"), "and": ("și", "und"),
    "water": ("apă", "Wasser"), "drinks": ("bea", "trinkt"), "we": ("noi", "wir"),
    "sleep": ("dormim", "schlafen"), "in": ("în", "in"), "garden": ("grădină", "Garten"),
}


def wmt(language: str) -> Callable[[random.Random, int], dict]:
    """Pairs of English and ``language`` (ro, de) sentences in the wmt schema."""
    side = ("ro", "de").index(language)

    def rows(rng: random.Random, n: int) -> dict:
        pairs = []
        for _ in range(n):
            words = [rng.choice(list(LEXICON)) for _ in range(rng.randint(3, 9))]
            other = " ".join(w for w in (LEXICON[word][side] for word in words) if w)
            pairs.append({language: other.capitalize() + ".",
                          "en": " ".join(words).capitalize() + "."})
        return {"translation": pairs}
    return rows


#: (dataset, config) -> rows writer
WRITERS: dict[tuple[str, str], Callable[[random.Random, int], dict]] = {
    ("swag", "regular"): swag,
    **{("race", config): race for config in ("all", "middle", "high")},
    ("super_glue", "boolq"): boolq,
    ("super_glue", "cb"): premise_hypothesis(3),
    ("super_glue", "rte"): premise_hypothesis(2),
    ("super_glue", "copa"): copa,
    ("super_glue", "multirc"): multirc,
    ("super_glue", "record"): record,
    ("super_glue", "wic"): wic,
    ("super_glue", "wsc.fixed"): wsc,
    ("wmt16", "ro-en"): wmt("ro"),
    ("wmt14", "de-en"): wmt("de"),
}


def write(root: Path, dataset: str, config: str, split: str, n: int = 20) -> Path:
    """``<root>/<dataset>/<config>/<split>.parquet`` with ``n`` rows in the hub's schema."""
    rng = random.Random(f"{dataset}/{config}/{split}")
    path = root / dataset / config / f"{split}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict(WRITERS[dataset, config](rng, n)).to_parquet(str(path))
    return path


def linked_mirror(root: Path, *fixtures: tuple[str, str, dict[str, int]]) -> Path:
    """``root`` with the real mirror's datasets linked in (when there is one) and each fixture
    (dataset, config, {split: rows}) written beside them. A dataset the real mirror holds too is
    a directory of its own whose other configs are linked: a fixture is never written through a
    link into the real mirror (the mirror's WMT'16 splits were once overwritten that way)."""
    from tests.conftest import MIRROR_CANDIDATES

    real = next((path for path in MIRROR_CANDIDATES if (path / "glue").is_dir()), None)
    root.mkdir(parents=True, exist_ok=True)
    written = {(dataset, config) for dataset, config, _ in fixtures}
    for dataset in real.iterdir() if real else ():
        if not dataset.is_dir():
            continue
        if not any(name == dataset.name for name, _ in written):
            (root / dataset.name).symlink_to(dataset, target_is_directory=True)
            continue
        (root / dataset.name).mkdir()
        for config in dataset.iterdir():
            if config.is_dir() and (dataset.name, config.name) not in written:
                (root / dataset.name / config.name).symlink_to(config, target_is_directory=True)
    for dataset, config, splits in fixtures:
        for split, rows in splits.items():
            write(root, dataset, config, split, rows)
    return root


#: WMT'16 En-Ro and WMT'14 En-De, every split (training pairs for a few steps, a few to score)
WMT = [(dataset, config, {"train": 48, "validation": 8, "test": 8})
       for dataset, config in (("wmt16", "ro-en"), ("wmt14", "de-en"))]


def goodreads_reviews(rng: random.Random, reviews: int = 90, books: int = 30) -> list[dict]:
    """Reviews in the schema of ``goodreads_reviews_spoiler.json.gz`` (Wan et al. 2019): each
    sentence labelled 1 (spoiler) or 0; about half the reviews hold spoilers. 30 books put
    reviews in each of the three splits of ``datamodules/goodreads.py``."""
    rows = []
    for i in range(reviews):
        spoils = rng.random() < 0.5
        sentences = [[int(spoils and rng.random() < 0.4), sentence(rng)]
                     for _ in range(rng.randint(2, 6))]
        rows.append({"user_id": f"u{i % 5}", "timestamp": "2017-08-30",
                     "review_sentences": sentences, "rating": rng.randint(0, 5),
                     "has_spoiler": any(label for label, _ in sentences),
                     "book_id": str(1000 + i % books), "review_id": f"r{i:04d}"})
    return rows


def write_goodreads(path: Path, reviews: int = 90, books: int = 30) -> Path:
    """The raw file, gzipped JSON lines, as the UCSD Book Graph serves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        for row in goodreads_reviews(random.Random(0), reviews, books):
            out.write(json.dumps(row) + "\n")
    return path


DETERMINERS, ADJECTIVES = ("the", "a", "this"), ("quick", "red", "small", "old")
NOUNS, VERBS = ("cat", "dog", "fox", "man", "house", "tree"), ("saw", "likes", "chased", "found")


def ud_sentence(rng: random.Random, number: int) -> str:
    """One CoNLL-U sentence of Universal Dependencies' English shape: [DET [ADJ] NOUN] VERB
    [DET [ADJ] NOUN] . , every 5th with a multi-word token (a "1-2" range line the reader skips)
    and every 7th with an empty node ("3.1", likewise)."""
    words: list[tuple[str, str, str, int, str]] = []  # form, upos, xpos, head (0: root), deprel

    def phrase(relation: str, head: int) -> int:
        start = len(words) + 1
        words.append((rng.choice(DETERMINERS), "DET", "DT", 0, "det"))
        if rng.random() < 0.5:
            words.append((rng.choice(ADJECTIVES), "ADJ", "JJ", 0, "amod"))
        words.append((rng.choice(NOUNS), "NOUN", "NN", head, relation))
        noun = len(words)
        for i in range(start, noun):  # determiner and adjective hang on the noun
            form, upos, xpos, _, rel = words[i - 1]
            words[i - 1] = (form, upos, xpos, noun, rel)
        return noun

    subject = phrase("nsubj", -1)
    words.append((rng.choice(VERBS), "VERB", "VBD", 0, "root"))
    verb = len(words)
    words[subject - 1] = (*words[subject - 1][:3], verb, "nsubj")
    phrase("obj", verb)
    words.append((".", "PUNCT", ".", verb, "punct"))
    lines = [f"# sent_id = fixture-{number}",
             f"# text = {' '.join(w[0] for w in words)}"]
    for i, (form, upos, xpos, head, relation) in enumerate(words, start=1):
        if number % 5 == 0 and i == 1:
            lines.append(f"1-2\t{form}{words[1][0]}\t_\t_\t_\t_\t_\t_\t_\t_")
        lines.append(f"{i}\t{form}\t{form}\t{upos}\t{xpos}\t_\t{head}\t{relation}\t_\t_")
        if number % 7 == 0 and i == 3:
            lines.append("3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t3:conj\t_")
    return "\n".join(lines) + "\n\n"


def write_universal_dependencies(root: Path, sentences: int = 40) -> Path:
    """``<root>/universal_dependencies/en_ewt/{train,validation,test}.parquet`` from CoNLL-U
    fixtures, through the mirror's own converter (the ``conllu`` reader)."""
    from datamodules.universal_dependencies import CONFIG, DATASET, convert_conllu

    for seed, split in enumerate(("train", "validation", "test")):
        rng = random.Random(seed)
        text = "".join(ud_sentence(rng, n) for n in range(sentences))
        convert_conllu(text, root / DATASET / CONFIG / f"{split}.parquet")
    return root / DATASET / CONFIG
