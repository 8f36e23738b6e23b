"""Pretraining objectives: each has a corruption step (run in the DataLoader's collate) and a
loss (computed in the training step)."""
