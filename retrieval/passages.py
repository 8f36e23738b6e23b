"""A retrieval corpus: documents split into passages of 100 words, as DPR did.

Karpukhin et al. 2020 (DPR), §4.1: "we first split each article into multiple, disjoint text
blocks of 100 words as passages, serving as our basic retrieval units", each passage keeping its
article's title (the passage encoder reads "title [SEP] text"). A corpus is one or more
*sources*, each a split the data layer resolves (``datamodules.sources.load_split``: the local
mirror, then the hub, else its one-line error), described by a mapping:

    dataset, config, split     where the rows are: $PLMBENCH_DATA/<dataset>/<config>/<split>.parquet
    hub_id                     the hub's id when the mirror lacks it (null: the dataset name)
    name                       prefix of the passage ids ("wiki", "squad-dev")
    text_field, title_field    the document's text and title columns (title_field null: no titles)
    id_field                   a column naming each document (null: the row number)
    unique_texts               keep one document per distinct text (SQuAD's contexts repeat
                               once per question)
    presplit                   the rows already are passages (DPR's ``wiki_dpr``): kept as they are
    max_documents              keep the first N documents (quick runs; null: all)

The corpus is a ``datasets.Dataset`` with columns ``id`` ("<name>:<document>:<passage>", or
the source's own id for presplit rows), ``title`` and ``text``; a passage's row number is its
index in every retriever. Splitting is a ``datasets`` map cached under a fingerprint of (the
source rows, the settings), and the corpus carries a fingerprint of all its sources
(``corpus_fingerprint``) that indexes are saved with.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence

import datasets

from datamodules.sources import load_split

#: words per passage (DPR: 100)
PASSAGE_WORDS = 100
FEATURES = datasets.Features(id=datasets.Value("string"), title=datasets.Value("string"),
                             text=datasets.Value("string"))


def split_words(text: str, words: int = PASSAGE_WORDS) -> list[str]:
    """``text`` cut into disjoint blocks of ``words`` whitespace-separated words (the last one
    shorter); no block for a text without words."""
    tokens = text.split()
    return [" ".join(tokens[i:i + words]) for i in range(0, len(tokens), words)]


def _digest(key: object) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _documents(source: Mapping) -> datasets.Dataset:
    """The source's rows (capped, deduplicated by text where asked)."""
    fields = [source["text_field"], *filter(None, [source.get("title_field"),
                                                   source.get("id_field")])]
    raw = load_split(source["dataset"], source["config"], source["split"], fields,
                     source.get("hub_id"))
    if source.get("unique_texts"):
        first: dict[str, int] = {}
        for row, text in enumerate(raw[source["text_field"]]):
            first.setdefault(text, row)
        raw = raw.select(list(first.values()))
    cap = source.get("max_documents")
    return raw if cap is None else raw.select(range(min(cap, len(raw))))


def source_passages(source: Mapping, words: int = PASSAGE_WORDS) -> datasets.Dataset:
    """One source's passages (id, title, text)."""
    raw = _documents(source)
    text_field, title_field = source["text_field"], source.get("title_field")
    id_field, name = source.get("id_field"), source.get("name", source["dataset"])

    def split(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        out: dict[str, list] = {"id": [], "title": [], "text": []}
        for row, text in enumerate(batch[text_field]):
            title = batch[title_field][row] if title_field else ""
            document = batch[id_field][row] if id_field else indices[row]
            if source.get("presplit"):
                blocks, ids = [text], [str(document)]
            else:
                blocks = split_words(text, words)
                ids = [f"{name}:{document}:{i}" for i in range(len(blocks))]
            out["id"].extend(ids)
            out["title"].extend([title or ""] * len(blocks))
            out["text"].extend(blocks)
        return out

    settings = {k: source.get(k) for k in ("name", "text_field", "title_field", "id_field",
                                           "presplit")}
    return raw.map(split, batched=True, with_indices=True, remove_columns=raw.column_names,
                   features=FEATURES, new_fingerprint=_digest([raw._fingerprint, settings, words]),
                   desc=f"passages of {source['dataset']}/{source['config']}")


def build_corpus(sources: Sequence[Mapping], words: int = PASSAGE_WORDS) -> datasets.Dataset:
    """The passages of every source, in order (a passage's row is its index)."""
    parts = [source_passages(source, words) for source in sources]
    corpus = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    if len(parts) > 1:  # concatenation's fingerprint is random: name it by its parts
        corpus._fingerprint = _digest([p._fingerprint for p in parts])
    return corpus


def corpus_fingerprint(corpus: datasets.Dataset) -> str:
    """What identifies a corpus: its ``datasets`` fingerprint and size."""
    return _digest([corpus._fingerprint, len(corpus)])
