"""Packed rows (Krell et al. 2021, §4): with the block-diagonal mask and restarting position ids,
every example of a packed row gets exactly the hidden states it gets alone, for the pretraining
net of every registered encoder architecture (random weights, float32); Longformer, whose
sliding windows read rows whole, refuses packed rows in one line."""

import pytest
import torch
from omegaconf import OmegaConf

from bench.run.execute import CONF_DIR
from datamodules.collate import encoder_inputs
from datamodules.packing import collate_packed, pack_examples
from lit_models.archs import ARCHS, get_arch
from lit_models.core.build import net_config
from tests.conftest import tiny_preset_name
from tests.nets.parity import TOLERANCE, randomize_

VOCAB = 120
LENGTHS = (6, 9, 4, 12, 7, 3, 10)
#: encoders with masked-LM pretraining nets that take packed rows (not Longformer's windows, nor
#: XLNet, whose permutation LM does not pack)
PACKABLE = sorted(name for name, arch in ARCHS.items()
                  if arch.kind == "encoder" and name not in ("longformer", "xlnet"))


def pretraining_net(name: str, **changes):
    arch = get_arch(name)
    path = CONF_DIR / "model" / f"{tiny_preset_name(name)}.yaml"
    preset = OmegaConf.to_container(OmegaConf.load(path))
    roles = {role: i for i, (role, _) in enumerate(arch.tokenizer.tokens)}
    config = net_config(arch, {**preset, **changes}, VOCAB, roles["pad"])
    return randomize_(arch.pretraining(config)), roles, config


def examples(roles: dict, two_segments: bool) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    out = []
    for n in LENGTHS:
        ids = torch.randint(len(roles), VOCAB, (n,), generator=generator).tolist()
        ids[0], ids[-1] = roles["cls"], roles["sep"]
        types = [int(two_segments and i >= n // 2) for i in range(n)]
        out.append({"input_ids": ids, "token_type_ids": types})
    return out


@pytest.mark.parametrize(("name", "changes"), [
    *((name, {}) for name in PACKABLE),
    ("deberta", {"position_biased_input": True, "max_relative_positions": 3}),
])
def test_each_packed_example_equals_the_example_alone(name, changes):
    net, roles, config = pretraining_net(name, **changes)
    alone = examples(roles, two_segments=getattr(config, "type_vocab_size", 0) >= 2)
    rows = pack_examples(alone, 16)
    assert len(rows) < len(alone) and any(max(r["sequence_ids"]) > 1 for r in rows)
    batch = collate_packed(rows, pad_id=roles["pad"])
    assert "attention_mask" in batch  # some row is short: padding too
    with torch.no_grad():
        packed = net(**encoder_inputs(batch)).last_hidden_state
        checked = 0
        for r, row in enumerate(rows):
            for k in range(1, max(row["sequence_ids"]) + 1):
                where = batch["sequence_ids"][r] == k
                ids = batch["input_ids"][r, where]
                example = next(e for e in alone if e["input_ids"] == ids.tolist())
                single = net(input_ids=ids[None], token_type_ids=torch.tensor(
                    [example["token_type_ids"]])).last_hidden_state[0]
                assert (packed[r, where] - single).abs().max().item() <= TOLERANCE
                checked += 1
    assert checked == len(LENGTHS)


def test_longformer_refuses_packed_rows():
    net, roles, _ = pretraining_net("longformer")
    batch = collate_packed(pack_examples(examples(roles, False), 16), pad_id=roles["pad"])
    with pytest.raises(ValueError, match="task.packing.cross_documents=true"):
        net(**encoder_inputs(batch))
