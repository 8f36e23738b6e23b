"""Passages, dense/sparse encoders, FAISS indexes and the retriever used by REALM, RAG and open-domain QA."""
