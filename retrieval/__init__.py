"""Passages, dense/sparse encoders, FAISS indexes and the retriever that REALM, RAG and
open-domain QA use."""
