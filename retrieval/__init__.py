"""Retrieval: passages, dense and sparse encoders, FAISS indexes and the retriever that open-domain
QA, REALM and RAG read from.

Layer: below ``lit_models/core`` and the families (LightningModules, checkpoint loading), above
``lit_models/objectives``, ``archs``, ``nets`` and ``datamodules``: nothing here loads a
checkpoint or names an architecture; it is handed a ``Model`` (architecture, net, tokenizer).

- ``passages``: ``build_corpus(sources)`` -> a ``datasets.Dataset`` (id, title, text) of
  DPR's 100-word passages; a passage's row is its index everywhere; ``corpus_fingerprint``.
- ``encoders``: ``BiEncoder(model, passage_net=None, pooling, normalize)``;
  ``tokenize_questions``/``tokenize_passages`` -> token batches, ``encode_questions``/
  ``encode_passages`` -> pooled vectors with gradients (for DPR, REALM and RAG training),
  ``question_vectors`` (no gradients, batched), ``fingerprint()`` (what passage vectors depend on).
- ``encode``: ``encode_passages`` -- passage vectors by a Lightning predict loop (DDP shards it).
- ``index``: ``IndexSettings`` (FAISS factory string, search params, HNSW construction, IVF/PQ
  training sample) and ``DenseIndex`` (build, search, save/load with fingerprints, mmap).
- ``bm25``: ``BM25Index`` through bm25s.
- ``retriever``: ``Retriever.search(questions, k) -> Retrieved(rows [Q, k], scores [Q, k],
  seconds)`` and ``describe()``; ``BM25Retriever(corpus)``; ``DenseRetriever`` with
  ``encoder``, ``index``, ``passage_vectors(rows)`` and ``refresh()``; ``dense_retriever(...)``
  builds or loads the cached index.
- ``lit_models.metrics.retrieval``: DPR's ``has_answer`` (token sequences; regex for
  CuratedTREC), ``answer_hits``, the registered recall@k and MRR, ``throughput``.

How the retrieval-augmented models build on it:
- REALM (Guu et al. 2020): p(z|x) ∝ exp(Embed_input(x)ᵀ Embed_doc(z)) over the top k of
  ``DenseRetriever.search``; the query side's scores with gradients are
  ``encoder.encode_questions(encoder.tokenize_questions(x)) @ passage_vectors(rows).T`` (the
  document vectors stay those of the index, frozen); every N steps ``refresh()`` re-embeds the
  corpus with the current passage encoder and rebuilds the index.
- RAG (Lewis et al. 2020): the same retriever with DPR-style separate encoders
  (``BiEncoder.separate``, ``pooling="cls"``, ``normalize=False``); only the question encoder is
  fine-tuned, the index stays fixed (no ``refresh``); the generator reads ``corpus[rows]``.
"""
