"""Data sources (local mirror, hub), tokenization, and one LightningDataModule per task family."""
