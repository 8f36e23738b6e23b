"""Plain ``torch.nn.Module`` architectures, one per file, on the shared blocks in ``blocks.py``."""
