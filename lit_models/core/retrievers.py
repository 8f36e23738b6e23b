"""A task's corpus and retriever from its config: the link between ``retrieval`` (which is handed
nets) and the checkpoints the architecture registry loads.

``task.corpus``: ``sources`` (``retrieval.passages``' source mappings), ``words`` per passage
(DPR: 100) and ``max_documents`` (a cap applied to every source; quick runs).
``task.retriever``: ``bm25`` (``task.bm25``: k1, b, method, stemmer) or ``dense``
(``task.dense``: ``encoder`` = ``hf:<dir>`` (one encoder for questions and passages, e.g.
all-MiniLM-L6-v2) or ``ckpt:<run dir>`` of a ``LitBiEncoder`` run (its question and passage
encoders), ``pooling``, ``normalize``, question/passage lengths, the encoding batch size; and
``task.index``: FAISS ``factory``, ``search_params``, ``ef_construction``, ``train_size``,
``mmap``, ``cache``).
"""

import json
from collections.abc import Mapping

import datasets

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.interop.hf import from_hf
from retrieval.encoders import BiEncoder
from retrieval.index import IndexSettings
from retrieval.passages import PASSAGE_WORDS, build_corpus
from retrieval.retriever import BM25Retriever, Retriever, dense_retriever

RETRIEVERS = ("bm25", "dense")
#: where a LitBiEncoder run exports its two encoders, under <run dir>/model/
QUESTION_ENCODER, PASSAGE_ENCODER = "question_encoder", "passage_encoder"
#: the pooling and lengths it was trained with, beside them
SETTINGS_FILE = "bi_encoder.json"


def build_corpus_of(task: Mapping) -> datasets.Dataset:
    spec = task["corpus"]
    cap = spec.get("max_documents")
    sources = [{**s, "max_documents": cap if s.get("max_documents") is None
                else min(cap or s["max_documents"], s["max_documents"])}
               for s in spec["sources"]]
    return build_corpus(sources, spec.get("words", PASSAGE_WORDS))


def load_bi_encoder(spec: Mapping) -> BiEncoder:
    """The bi-encoder ``spec["encoder"]`` names, with ``spec``'s pooling and lengths."""
    settings = {k: spec[k] for k in ("pooling", "normalize", "max_question_length",
                                     "max_passage_length")}
    where = InitFrom.parse(spec["encoder"], "task.dense.encoder", pretrained=True)
    directory = where.directory("task.dense.encoder")
    pair = [directory / QUESTION_ENCODER, directory / PASSAGE_ENCODER]
    if all(p.is_dir() for p in pair):
        trained = json.loads((directory / SETTINGS_FILE).read_text())
        if differ := {k: v for k, v in trained.items() if settings.get(k) != v}:
            fix = " ".join(f"task.dense.{k}={json.dumps(v)}" for k, v in differ.items())
            raise PlmbenchError(f"dense encoder {where} was trained with {differ}; set {fix}")
        question, passage = (from_hf(p) for p in pair)
        return BiEncoder(question, passage.net, **settings)
    model = from_hf(directory)
    if model.arch.kind != "encoder":
        raise PlmbenchError(f"dense encoder {where} is a {model.arch.name} checkpoint; "
                            "point it at an encoder's (BERT, RoBERTa, MiniLM ...)")
    return BiEncoder(model, **settings)


def build_retriever(task: Mapping, corpus: datasets.Dataset, cfg: Mapping,
                    separate: bool = False) -> Retriever:
    """``separate``: a dense retriever whose question encoder is its own copy, so training it
    leaves the document encoder (and the index) as it is (REALM, RAG)."""
    kind = task["retriever"]
    if kind == "bm25":
        return BM25Retriever(corpus, **task["bm25"])
    if kind != "dense":
        raise PlmbenchError(f"task.retriever={kind!r} is unknown; use one of {RETRIEVERS}")
    dense = task["dense"]
    index = dict(task["index"])
    mmap, cache = index.pop("mmap", False), index.pop("cache", True)
    encode = {"batch_size": dense["batch_size"],
              "trainer": {"accelerator": cfg["trainer"]["accelerator"], "devices": 1,
                          "enable_progress_bar": cfg["trainer"].get("enable_progress_bar", True)}}
    encoder = load_bi_encoder(dense)
    if separate and encoder.shared:
        encoder = BiEncoder.separate(encoder.models()[0], **encoder.settings())
    return dense_retriever(corpus, encoder, IndexSettings(**index), encode, cache=cache,
                           mmap=mmap)
