"""The Goodreads spoiler corpus (Wan et al. 2019, "Fine-grained spoiler detection from large-scale
review corpora", §3), converted into the mirror's Parquet splits.

Its public source is the UCSD Book Graph's ``goodreads_reviews_spoiler.json.gz`` (1,378,033
English reviews of 25,475 books by 18,892 users): gzipped JSON lines, one review each, with
``user_id``, ``book_id``, ``review_id``, ``timestamp``, ``rating``, ``has_spoiler`` and
``review_sentences``, a list of [label, sentence] pairs, label 1 where the reviewer marked the
sentence as a spoiler. ``convert`` writes one row per review, the ids kept and the sentences and
their labels as two list columns, into ``<mirror>/goodreads_spoilers/by_book/{train,validation,
test}.parquet``, split by book: a book's reviews all go to one split, chosen by a hash of its id
(80/10/10 of the books), so no book is both trained and tested on.
"""

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from datamodules.errors import PlmbenchError
from datamodules.files import atomic_path

DATASET = "goodreads_spoilers"
CONFIG = "by_book"
URLS = (  # the UCSD Book Graph's file, at its current and its former host
    "https://mcauleylab.ucsd.edu/public_datasets/gdrive/goodreads/"
    "goodreads_reviews_spoiler.json.gz",
    "https://datarepo.eng.ucsd.edu/mcauley_group/gdrive/goodreads/"
    "goodreads_reviews_spoiler.json.gz",
)
SIZE = "592 MB"
#: a book's split: the first hundredths of its id's hash go to train, then validation, then test
SPLIT_SHARES = (("train", 80), ("validation", 10), ("test", 10))
SCHEMA = pa.schema([
    ("review_id", pa.string()), ("user_id", pa.string()), ("book_id", pa.string()),
    ("timestamp", pa.string()), ("rating", pa.int32()), ("has_spoiler", pa.bool_()),
    ("sentences", pa.list_(pa.string())), ("labels", pa.list_(pa.int8())),
])
ROWS_PER_GROUP = 50_000


def book_split(book_id: str) -> str:
    """The split of every review of ``book_id``: stable across runs and machines."""
    hundredth = int(hashlib.sha256(book_id.encode()).hexdigest(), 16) % 100
    bound = 0
    for split, share in SPLIT_SHARES:
        bound += share
        if hundredth < bound:
            return split
    raise AssertionError("the split shares sum to 100")


def review_row(review: dict) -> dict:
    """One review as the mirror's row."""
    pairs = review["review_sentences"]
    return {"review_id": str(review["review_id"]), "user_id": str(review["user_id"]),
            "book_id": str(review["book_id"]), "timestamp": str(review.get("timestamp", "")),
            "rating": int(review.get("rating", 0)), "has_spoiler": bool(review["has_spoiler"]),
            "sentences": [sentence for _, sentence in pairs],
            "labels": [int(label) for label, _ in pairs]}


def read_reviews(source: Path) -> Iterator[dict]:
    """The reviews of the gzipped JSON-lines file; a malformed line is an error naming it."""
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield review_row(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise PlmbenchError(f"{source} line {number} is no Goodreads spoiler review "
                                    f"({type(err).__name__}: {err}); download it again") from None


def write_splits(reviews: Iterable[dict], root: Path) -> list[Path]:
    """Write ``reviews`` into ``<root>/goodreads_spoilers/by_book/<split>.parquet`` by book, in
    row groups of ``ROWS_PER_GROUP``; every file appears complete or not at all."""
    directory = root / DATASET / CONFIG
    paths = {split: directory / f"{split}.parquet" for split, _ in SPLIT_SHARES}
    pending: dict[str, list[dict]] = {split: [] for split in paths}
    with (atomic_path(paths["train"]) as train, atomic_path(paths["validation"]) as validation,
          atomic_path(paths["test"]) as test):
        writers = {split: pq.ParquetWriter(str(path), SCHEMA, compression="zstd")
                   for split, path in (("train", train), ("validation", validation),
                                       ("test", test))}
        try:
            for review in reviews:
                split = book_split(review["book_id"])
                pending[split].append(review)
                if len(pending[split]) == ROWS_PER_GROUP:
                    writers[split].write_table(pa.Table.from_pylist(pending[split], SCHEMA))
                    pending[split] = []
            for split, rows in pending.items():
                writers[split].write_table(pa.Table.from_pylist(rows, SCHEMA))
        finally:
            for writer in writers.values():
                writer.close()
    return list(paths.values())


def convert(source: Path, root: Path) -> list[Path]:
    """``goodreads_reviews_spoiler.json.gz`` -> the mirror's three splits under ``root``."""
    return write_splits(read_reviews(source), root)
