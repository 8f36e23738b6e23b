"""Plain ``torch.nn.Module`` architectures, one per file, on the shared blocks: attention in
``attention.py``, layers and stacks in ``blocks.py``."""
