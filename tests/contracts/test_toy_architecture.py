"""A toy architecture defined in this file alone (its net, its registration, its preset) pretrains,
fine-tunes and exports through the ``plmbench`` command, and passes the architecture contract:
adding an architecture needs no change to any shared file.

The toy: token and position embeddings, pre-LN Transformer layers of the shared blocks with a
final norm, a pooler over the first token, BERT's config dataclass and masked-LM head, and the
pooled classification head. Its checkpoints use a layout of its own (``model_type`` toy, names as
ours), which ``from_hf`` reads back; transformers has no such model, so the contract's
comparisons with transformers are skipped for it. It is registered with ``register_arch`` for the
tests of this module only (and removed after them); its preset is written to a config directory
the run puts on Hydra's search path (``--config-dir``).
"""

import json
from dataclasses import replace
from functools import partial

import pytest
import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from datamodules.tokenization import VOCAB_TXT
from lit_models.archs import ARCHS, Arch, Capabilities, HFLayout, get_arch, register_arch
from lit_models.interop.hf import from_hf, load_head
from lit_models.nets.bert import BertConfig
from lit_models.nets.blocks import TransformerEncoder, TransformerLayer, init_normal_, padding_mask
from lit_models.nets.heads import PooledClassifier
from lit_models.nets.masked_lm import EncoderForMaskedLM
from lit_models.nets.outputs import EncoderOutput
from tests.bench.invoke import plmbench_on_mirror, read, records_under
from tests.contracts.suite import ArchContracts


class ToyModel(nn.Module):
    """The encoder: token and position embeddings, pre-LN layers, a final norm and the first
    token's pooler; its config is BERT's dataclass (sizes, activation, dropout, norm epsilon)."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        H = config.hidden_size
        self.embeddings = nn.ModuleDict({
            "word_embeddings": nn.Embedding(config.vocab_size, H),
            "position_embeddings": nn.Embedding(config.max_position_embeddings, H)})
        self.encoder = TransformerEncoder(
            [TransformerLayer(H, config.num_attention_heads, config.intermediate_size,
                              config.hidden_act, config.hidden_dropout_prob,
                              config.attention_probs_dropout_prob, config.layer_norm_eps,
                              pre_norm=True) for _ in range(config.num_hidden_layers)],
            nn.LayerNorm(H, eps=config.layer_norm_eps))
        self.pooler = nn.Linear(H, H) if add_pooling_layer else None
        self.apply(partial(init_normal_, std=config.initializer_range))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_hidden_states: bool = False,
                position_ids: Tensor | None = None) -> EncoderOutput:
        """No segments: ``token_type_ids`` are accepted and ignored (not declared)."""
        embeddings = self.embeddings
        positions = (embeddings.position_embeddings.weight[:input_ids.shape[1]]
                     if position_ids is None else embeddings.position_embeddings(position_ids))
        x = embeddings.word_embeddings(input_ids) + positions
        x, hidden_states = self.encoder(x, padding_mask(attention_mask), output_hidden_states)
        pooled = None if self.pooler is None else torch.tanh(self.pooler(x[:, 0]))
        return EncoderOutput(x, pooled, hidden_states)


class ToyForMaskedLM(EncoderForMaskedLM):
    def __init__(self, config: BertConfig):
        super().__init__(config, ToyModel(config), "toy")


LAYER = "encoder.layers.{i}."
TOY = Arch(
    name="toy",
    config=BertConfig,
    encoder=ToyModel,
    pretraining=ToyForMaskedLM,
    tokenizer=replace(VOCAB_TXT, tokenizer_class="PreTrainedTokenizerFast"),
    hf=HFLayout(
        model_type="toy",
        prefix="toy.",
        names={name: name for name in (
            "embeddings.word_embeddings", "embeddings.position_embeddings",
            *(LAYER + module for module in ("attention.qkv", "attention.out", "attention_norm",
                                            "feed_forward.linear1", "feed_forward.linear2",
                                            "ffn_norm")),
            "encoder.final_norm", "pooler", "mlm_head.dense", "mlm_head.norm", "mlm_head.bias")},
        head_prefixes=("mlm_head.",),
        classifier_names={"out": "classifier"},
        classes={"encoder": "ToyModel", "pretraining": "ToyForMaskedLM", "mlm": "ToyForMaskedLM",
                 "classifier": "ToyForSequenceClassification"},
        skipped=r"(?!)",  # nothing: the masked-LM decoder is the token embeddings, listed once
    ),
    capabilities=Capabilities(hidden_states=True, heads=frozenset({"mlm"})),
    classification_head=PooledClassifier,
)
PRESET = {"name": "toy-tiny", "arch": "toy", "init_from": "scratch", "objective": "mlm",
          "vocab_size": 1000, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 128,
          "layer_norm_eps": 1e-6, "finetune_lr": 1e-3, "pretrain_lr": 1e-3,
          "pretrain_batch_size": 4, "lowercase": True}


@pytest.fixture(scope="module")
def toy() -> Arch:
    """The toy, registered for this module's tests."""
    register_arch(TOY)
    yield TOY
    del ARCHS[TOY.name]


@pytest.fixture(scope="module")
def searchpath(toy, tmp_path_factory) -> list[str]:
    """A config directory with the toy's preset, as the ``--config-dir`` flag that puts it on
    Hydra's search path."""
    conf = tmp_path_factory.mktemp("conf")
    (conf / "model").mkdir()
    OmegaConf.save(OmegaConf.create(PRESET), conf / "model" / "toy-tiny.yaml")
    return ["--config-dir", str(conf)]


class TestToyContracts(ArchContracts):
    @pytest.fixture
    def arch(self, toy) -> Arch:
        return toy

    @pytest.fixture
    def preset(self):
        return PRESET


PRETRAIN = ["model=toy-tiny", "task=pretrain/wikitext", "task.splits.train=test",
            "task.max_train_samples=8", "task.max_eval_samples=2", "trainer.max_steps=2",
            "trainer.enable_progress_bar=false"]


def test_the_toy_pretrains_fine_tunes_and_exports(searchpath, tmp_path_factory):
    pretrained, results = plmbench_on_mirror(tmp_path_factory, "wikitext", "run", *searchpath,
                                             *PRETRAIN)
    assert pretrained.rc == 0, pretrained.err
    (run,) = [record.parent for record in records_under(results)]  # the one run, its record
    assert run.relative_to(results).parts[:3] == ("pretrain", "wikitext", "toy-tiny")
    record = read(run)
    assert record["status"] == "ok" and record["config"]["model"]["arch"] == "toy"
    assert record["metrics"]["validation"]["mlm_loss"] > 0
    exported = json.loads((run / "model/config.json").read_text())
    assert exported["model_type"] == "toy" and exported["architectures"] == ["ToyForMaskedLM"]
    finetune = ["model=toy-tiny", "task=glue/rte", f"init_from=ckpt:{run}",
                "task.max_train_samples=16", "task.max_eval_samples=8", "trainer.max_steps=2",
                "save_model=true", "trainer.enable_progress_bar=false"]
    tuned, results = plmbench_on_mirror(tmp_path_factory, "glue", "run", *searchpath, *finetune)
    assert tuned.rc == 0, tuned.err
    (tuned_run,) = [record.parent for record in records_under(results)]
    assert tuned_run.relative_to(results).parts[:3] == ("glue", "rte", "toy-tiny")
    record = read(tuned_run)
    assert record["status"] == "ok" and 0 <= record["metrics"]["validation"]["accuracy"] <= 1
    export = tuned_run / "model"
    model = from_hf(export)
    assert model.arch is get_arch("toy") and isinstance(model.net, ToyModel)
    head = PooledClassifier(model.net.config, 2, 0.1)
    assert load_head(head, export, TOY.hf.classifier_names)
