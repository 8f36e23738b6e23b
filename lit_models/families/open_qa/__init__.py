"""Open-domain QA: the ``OpenQA`` family (``family.py``) and its readers, each named by
``_target_`` in the task YAML's ``readers``: extractive (``family.py``), closed-book, REALM, RAG."""
