"""Checkpoint interop: Hugging Face checkpoints read into our nets and written back as directories
transformers loads (``hf.py``), and what a checkpoint's config must hold before a run uses it
(``hf_check.py``). Below the shared training machinery (``lit_models/core``), above the
architectures: it names none of them (each declares its ``HFLayout``)."""
