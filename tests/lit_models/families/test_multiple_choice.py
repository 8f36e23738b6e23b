"""Multiple choice: parity of our multiple-choice model with transformers' ``*ForMultipleChoice``
for every architecture transformers has one for (random weights, tiny presets: the exported
checkpoint loads with no missing or unexpected weight, and its logits equal ours to 1e-5 on
padded batches), the refusal to export DeBERTa v1 (transformers has no DebertaForMultipleChoice),
the fresh pooler a pooled head gets on an encoder saved without one, and the formats' readers."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from bench.run.execute import CONF_DIR
from datamodules.errors import PlmbenchError
from datamodules.multiple_choice import choices_collate, copa, race, swag
from datamodules.tokenization import train_tokenizer
from lit_models.archs import ARCHS, Model, get_arch
from lit_models.core.build import net_config
from lit_models.families.multiple_choice import LitMultipleChoice, multiple_choice_head
from lit_models.interop.hf import from_hf, has_task_head, load_head, task_head_names, to_hf
from tests.conftest import require, tiny_preset_name
from tests.nets.parity import TEXT, TOLERANCE, randomize_

EXPORTED = sorted(name for name, arch in ARCHS.items() if "multiple_choice" in arch.hf.classes)
B, C = 2, 3


def tiny_model(arch_name: str):
    """Our tiny encoder of the architecture, its multiple-choice head and a tokenizer."""
    arch = get_arch(arch_name)
    path = CONF_DIR / "model" / f"{tiny_preset_name(arch_name)}.yaml"
    preset = OmegaConf.to_container(OmegaConf.load(path))
    tokenizer = train_tokenizer(arch.tokenizer, TEXT, vocab_size=200, lowercase=False)
    config = net_config(arch, preset, tokenizer.vocab_size, tokenizer.special.pad)
    net = arch.encoder(config)
    return net, multiple_choice_head(Model(arch, net, tokenizer), 0.1), tokenizer


def choice_batch(tokenizer, padded: bool) -> dict[str, torch.Tensor]:
    """B questions of C (context, choice) pairs, of different lengths when ``padded``."""
    g = torch.Generator().manual_seed(0)
    low = max(tokenizer.special.ids) + 1
    examples = []
    for _ in range(B):
        lengths = torch.randint(5, 12, (C,), generator=g) if padded else [9] * C
        ids = [torch.randint(low, tokenizer.vocab_size, (int(n),), generator=g).tolist()
               for n in lengths]
        types = [[0] * (len(seq) // 2) + [1] * (len(seq) - len(seq) // 2) for seq in ids]
        examples.append({"input_ids": ids, "token_type_ids": types, "labels": 0})
    return choices_collate(examples, tokenizer.special.pad)


@pytest.mark.parametrize("arch_name", EXPORTED)
def test_export_loads_in_transformers_and_scores_as_ours(arch_name, tmp_path: Path):
    transformers = require("transformers")
    net, head, tokenizer = tiny_model(arch_name)
    module = LitMultipleChoice(net, get_arch(arch_name).capabilities, head, C, ["accuracy"], [],
                               {})
    randomize_(module)
    padded = arch_name != "xlnet"  # transformers' XLNet summarises position -1, a pad when padded
    batch = choice_batch(tokenizer, padded)
    if getattr(net.config, "type_vocab_size", 0) < 2:
        batch["token_type_ids"].zero_()  # one segment (RoBERTa), or no embeddings of them
    to_hf(Model(get_arch(arch_name), net, tokenizer), tmp_path, head, task="multiple_choice")
    theirs, info = transformers.AutoModelForMultipleChoice.from_pretrained(
        tmp_path, output_loading_info=True)
    assert type(theirs).__name__ == ARCHS[arch_name].hf.classes["multiple_choice"]
    assert not any(info.values()), info  # no missing, unexpected or mismatched weight
    inputs = {key: batch[key].view(B, C, -1) for key in ("input_ids", "attention_mask")
              if key in batch}
    if module.segments:
        inputs["token_type_ids"] = batch["token_type_ids"].view(B, C, -1)
    if module.global_attention:  # Longformer: global attention on the first token, as ours
        first = torch.zeros_like(inputs["input_ids"])
        first[..., 0] = 1
        inputs["global_attention_mask"] = first
    with torch.no_grad():
        ours = module.eval()(batch)
        reference = theirs.eval()(**inputs).logits
    assert ours.shape == (B, C)
    assert (ours - reference).abs().max() <= TOLERANCE


def test_the_head_round_trips_and_is_kept_by_init_from(tmp_path: Path):
    net, head, tokenizer = tiny_model("roberta")
    randomize_(torch.nn.ModuleList([net, head]))
    to_hf(Model(get_arch("roberta"), net, tokenizer), tmp_path, head, task="multiple_choice")
    assert has_task_head(tmp_path, "multiple_choice")
    again = multiple_choice_head(from_hf(tmp_path), 0.1)
    assert load_head(again, tmp_path, task_head_names(get_arch("roberta").hf, "multiple_choice"))
    assert torch.equal(again.out.weight, head.out.weight)


def test_a_pooled_head_gives_a_pooler_to_an_encoder_saved_without_one():
    arch = get_arch("roberta")
    net, _, _ = tiny_model("roberta")
    bare = arch.encoder(net.config, add_pooling_layer=False)
    assert bare.pooler is None
    multiple_choice_head(Model(arch, bare, None), 0.1)
    assert bare.pooler is not None


def test_deberta_has_no_transformers_multiple_choice_model(tmp_path: Path):
    net, head, tokenizer = tiny_model("deberta")
    with pytest.raises(PlmbenchError, match="no multiple_choice model of deberta"):
        to_hf(Model(get_arch("deberta"), net, tokenizer), tmp_path / "model", head,
              task="multiple_choice")
    assert not (tmp_path / "model").exists()


def test_formats_read_the_hub_columns():
    contexts, choices, labels = swag({
        "sent1": ["A man sits."], "sent2": ["He"], "label": [2],
        **{f"ending{i}": [f"ends {i}."] for i in range(4)}})
    assert contexts == ["A man sits."] and labels == [2]
    assert choices == [["He ends 0.", "He ends 1.", "He ends 2.", "He ends 3."]]
    _, choices, labels = race({"article": ["Text."], "answer": ["C"],
                               "question": ["The boy was _ ."], "options": [["a", "b", "c", "d"]]})
    assert choices[0][2] == "The boy was c ." and labels == [2]
    _, choices, _ = race({"article": ["T."], "answer": ["A"], "question": ["Why?"],
                          "options": [["x", "y", "z", "w"]]})
    assert choices[0][0] == "Why? x"
    _, choices, _ = copa({"premise": ["The man broke his toe."], "question": ["cause"],
                          "choice1": ["He dropped a hammer."], "choice2": ["He ran."],
                          "label": [0]})
    assert choices == [["because he dropped a hammer.", "because he ran."]]
