"""Word-similarity pairs and analogy questions for intrinsic evaluation of word vectors.

A set comes from one of two places (a task YAML's ``intrinsic`` entry):

- ``file``: a text file in the format gensim's evaluators read, "w1<TAB>w2<TAB>score" lines for
  similarity and ": section" headers followed by "a b c d" lines for analogies ('#' lines are
  comments). ``gensim:<name>`` names a file gensim ships with its tests, so the real sets need no
  download: ``wordsim353.tsv`` (WordSim-353, Finkelstein et al. 2002), ``simlex999.txt``
  (SimLex-999, Hill et al. 2015), ``questions-words.txt`` (Mikolov et al. 2013a's 19,544 Google
  analogies).
- ``dataset``/``config``/``split`` (+ ``hub_id``): a split in the mirror or on the hub
  (``datamodules.sources.load_split``), whose ``fields`` name the columns: the two words and the
  score, or the four words (and optionally a section column), e.g. WordSim-353 as
  ``almogtavor/WordSim353`` ("Word 1", "Word 2", "Human (Mean)") or SimLex-999 as
  ``tasksource/simlex`` (word1, word2, SimLex999).
"""

from collections.abc import Mapping
from pathlib import Path

from datamodules.errors import PlmbenchError
from datamodules.sources import load_split

GENSIM_PREFIX = "gensim:"
#: (word 1, word 2, human score)
Pair = tuple[str, str, float]
#: (section, a, b, c, d): a is to b as c is to d
Question = tuple[str, str, str, str, str]


def _file(spec: str) -> Path:
    if spec.startswith(GENSIM_PREFIX):  # gensim.test.utils.datapath, without its import-time work
        import gensim

        path = Path(gensim.__file__).parent / "test" / "test_data" / spec.removeprefix(
            GENSIM_PREFIX)
    else:
        path = Path(spec).expanduser()
    if not path.is_file():
        raise PlmbenchError(f"word set file {spec} not found ({path}); name a gensim test file "
                            "(gensim:wordsim353.tsv ...) or an existing path")
    return path


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def _rows(name: str, source: Mapping, width: int) -> list[tuple]:
    """The ``fields`` columns of a mirrored or hub split, row by row."""
    fields = list(source.get("fields") or [])
    if len(fields) not in (width, width + 1):
        raise PlmbenchError(f"word set {name}: fields must name {width} columns (or {width + 1} "
                            f"with a section), got {fields}; fix the task's intrinsic entry")
    data = load_split(source["dataset"], source["config"], source["split"], fields,
                      source.get("hub_id"))
    return list(zip(*(data[field] for field in fields), strict=True))


def similarity_pairs(name: str, source: Mapping) -> list[Pair]:
    if "file" in source:
        pairs = []
        for line in _lines(_file(source["file"])):
            parts = line.split("\t")
            if len(parts) < 3:
                raise PlmbenchError(f"word set {name}: line {line!r} is not w1<TAB>w2<TAB>score")
            pairs.append((parts[0], parts[1], float(parts[2])))
        return pairs
    return [(str(w1), str(w2), float(score)) for w1, w2, score in _rows(name, source, 3)]


def analogy_questions(name: str, source: Mapping) -> list[Question]:
    if "file" in source:
        questions, section = [], ""
        for line in _lines(_file(source["file"])):
            if line.startswith(":"):
                section = line[1:].strip()
                continue
            words = line.split()
            if len(words) != 4:
                raise PlmbenchError(f"word set {name}: line {line!r} is not 'a b c d'")
            questions.append((section, *words))
        return questions
    rows = _rows(name, source, 4)
    return [(str(row[4]) if len(row) == 5 else "", *map(str, row[:4])) for row in rows]
