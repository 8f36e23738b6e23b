"""Universal Dependencies English-EWT (Silveira et al. 2014; UD release 2.14), converted into the
mirror's Parquet splits: the dependency-parsed sentences the attention analysis (Clark et al.
2019, §4) and the probes (POS, dependency labels) read.

Its public source is the treebank's GitHub repository, whose release archive holds three CoNLL-U
files (``en_ewt-ud-{train,dev,test}.conllu``). ``convert`` reads them with the ``conllu`` package
and writes one row per sentence into ``<mirror>/universal_dependencies/en_ewt/{train,validation,
test}.parquet``: ``idx`` (the sentence id), ``text``, and per syntactic word (multi-word tokens'
parts, not their surface span; empty nodes left out) ``tokens``, ``lemmas``, ``upos``, ``xpos``,
``head`` (1-based index of the governor, 0 for the root) and ``deprel`` (the relation to it), the
columns of the hub's ``universal_dependencies`` dataset (its tags as strings, heads as integers).
``convert_conllu`` converts one CoNLL-U text: the tests' fixtures go through it too.
"""

import io
import zipfile
from collections.abc import Iterable
from pathlib import Path

import conllu
import pyarrow as pa
import pyarrow.parquet as pq

from datamodules.errors import PlmbenchError
from datamodules.files import atomic_path

DATASET = "universal_dependencies"
CONFIG = "en_ewt"
URLS = (  # the release archive, then the repository's current state
    "https://github.com/UniversalDependencies/UD_English-EWT/archive/refs/tags/r2.14.zip",
    "https://github.com/UniversalDependencies/UD_English-EWT/archive/refs/heads/master.zip",
)
SIZE = "13 MB"
#: the treebank's file suffix -> the mirror's split
SPLITS = {"train": "train", "dev": "validation", "test": "test"}
SCHEMA = pa.schema([
    ("idx", pa.string()), ("text", pa.string()), ("tokens", pa.list_(pa.string())),
    ("lemmas", pa.list_(pa.string())), ("upos", pa.list_(pa.string())),
    ("xpos", pa.list_(pa.string())), ("head", pa.list_(pa.int32())),
    ("deprel", pa.list_(pa.string())),
])


def sentence_rows(text: str) -> Iterable[dict]:
    """The mirror's rows of a CoNLL-U text, one per sentence."""
    for number, sentence in enumerate(conllu.parse(text)):
        words = sentence.filter(id=lambda i: isinstance(i, int))  # no ranges, no empty nodes
        if not words:
            continue
        yield {
            "idx": sentence.metadata.get("sent_id", str(number)),
            "text": sentence.metadata.get("text", " ".join(w["form"] for w in words)),
            "tokens": [w["form"] for w in words],
            "lemmas": [w["lemma"] or "_" for w in words],
            "upos": [w["upos"] or "_" for w in words],
            "xpos": [w["xpos"] or "_" for w in words],
            "head": [int(w["head"]) for w in words],
            "deprel": [w["deprel"] for w in words],
        }


def convert_conllu(text: str, path: Path) -> Path:
    """One CoNLL-U text as the mirror's Parquet file ``path`` (written atomically)."""
    rows = list(sentence_rows(text))
    if not rows:
        raise PlmbenchError(f"no sentence found for {path}: the CoNLL-U text is empty")
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    with atomic_path(path) as partial:
        pq.write_table(table, partial, compression="zstd")
    return path


def convert(download: Path, root: Path) -> list[Path]:
    """The release archive ``download`` as the mirror's three splits under ``root``."""
    written = []
    with zipfile.ZipFile(download) as archive:
        for name in archive.namelist():
            stem = Path(name).name.removesuffix(".conllu")
            suffix = stem.rpartition("-")[2]
            if not name.endswith(".conllu") or suffix not in SPLITS:
                continue
            text = io.TextIOWrapper(archive.open(name), encoding="utf-8").read()
            path = root / DATASET / CONFIG / f"{SPLITS[suffix]}.parquet"
            written.append(convert_conllu(text, path))
    if len(written) != len(SPLITS):
        raise PlmbenchError(f"{download} holds {len(written)} of the treebank's 3 CoNLL-U files; "
                            "download the English-EWT release archive again")
    return written
