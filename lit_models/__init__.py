"""Pure-torch architectures (nets/), pretraining objectives (objectives/), the LightningModules
that train them, and Hugging Face checkpoint interop (hf.py)."""
