"""Models and how they train, in layers (README, "Layout"): ``nets/`` (plain torch) and
``metrics/`` at the bottom, ``archs/`` (the architecture registry), ``objectives/`` (pretraining),
``core/`` (machinery the task families share) and ``families/`` (a TaskFamily and its
LightningModule each) on top."""
