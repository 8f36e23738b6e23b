"""Model presets choose their own training rates: a pretraining task takes the preset's
``pretrain_lr`` and ``pretrain_batch_size`` (the paper's), a GLUE task its ``finetune_lr``; a
command-line value wins, and a preset without them gets the task's defaults."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from bench.run.execute import CONF_DIR
from lit_models.archs import BASELINES

PRESETS = sorted(path.stem for path in (CONF_DIR / "model").glob("*.yaml"))


def composed(*overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize(("preset", "lr", "batch_size"), [
    ("bert-base-scratch", 1e-4, 256),  # Devlin et al. 2019, A.2
    ("electra-small-scratch", 5e-4, 128),  # Clark et al. 2020, Table 6
    ("minilm-l6", 5e-4, 32),  # a pretrained checkpoint's preset names none: the task's defaults
])
def test_pretraining_follows_the_model_preset(preset, lr, batch_size):
    cfg = composed(f"model={preset}", "task=pretrain/wikipedia")
    assert (cfg.optim.lr, cfg.task.batch_size) == (lr, batch_size)
    glue = composed(f"model={preset}", "task=glue/rte")
    assert glue.task.batch_size == 32 and glue.optim.lr == cfg.model.get("finetune_lr", 2e-5)


def test_the_command_line_wins():
    cfg = composed("model=bert-base-scratch", "task=pretrain/wikipedia", "task.lr=3e-4",
                   "task.batch_size=64")
    assert (cfg.optim.lr, cfg.task.batch_size) == (3e-4, 64)
    assert (
        composed("model=bert-base-scratch", "task=pretrain/wikipedia", "optim.lr=2e-4").optim.lr
        == 2e-4
    )


def test_every_scratch_preset_names_its_pretraining_rates():
    """Every preset a pretraining task trains (word vectors and BiLSTMs train on tasks of their
    own, with rates of their own)."""
    for preset in PRESETS:
        model = OmegaConf.load(CONF_DIR / "model" / f"{preset}.yaml")
        if "defaults" in model:  # a preset on another: as composed
            model = composed(f"model={preset}").model
        pretrained = model.arch not in BASELINES or BASELINES[model.arch].kind == "bilm"
        if model.init_from == "scratch" and pretrained:
            assert model.pretrain_lr > 0 and model.pretrain_batch_size >= 1, preset


def encoder_parameters(V, H, L, I, P, T, E=None, shared=False) -> int:  # noqa: E741, N803
    """BERT's encoder with pooler counted by hand (ALBERT: embeddings of width E projected to H,
    one layer's weights shared by all L)."""
    E = E or H  # noqa: N806
    embeddings = (V + P + T) * E + 2 * E + (E * H + H if E != H else 0)
    layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H
    return embeddings + layer * (1 if shared else L) + H * H + H


@pytest.mark.parametrize(("preset", "sizes"), [
    ("bert-small-scratch", dict(V=30522, H=512, L=4, I=2048, P=512, T=2)),
    ("roberta-small-scratch", dict(V=50265, H=512, L=4, I=2048, P=514, T=1)),
    ("albert-small-scratch", dict(V=30000, H=512, L=4, I=2048, P=512, T=2, E=128, shared=True)),
])
def test_small_presets_are_bert_smalls_sizes(preset, sizes):
    """The small presets of the papers without one (RoBERTa, ALBERT) take BERT-Small's L=4, H=512
    (Turc et al. 2019): their parameter counts are those sizes' by hand."""
    from bench.studies.claims import preset_parameters

    assert preset_parameters(preset) == encoder_parameters(**sizes)
