"""GPT-2 as the decoder-only summarization baseline: one sequence "<s> source </s> target </s>",
labels on the target only (each position predicting the next token), left-padded prompts that
end at the separator; the loss LitSeq2Seq trains is the causal-LM loss of the target tokens."""

import pytest
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir

from bench.run.execute import CONF_DIR
from datamodules.errors import PlmbenchError
from datamodules.summarization import SummarizationDataModule
from datamodules.tokenization import train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.core.generation import GenerationConfig
from lit_models.families.seq2seq import LitSeq2Seq, check_lengths
from lit_models.metrics import build_metrics
from lit_models.nets.gpt import GPTConfig, GPTLMHeadModel

IGNORE = -100


@pytest.fixture
def data(mirror):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        task = compose("config", overrides=["task=summarization/aeslc"]).task
    tokenizer = train_tokenizer(get_arch("gpt2").tokenizer, ["Hello there, how are you?"] * 50,
                                vocab_size=300, lowercase=False)
    task.splits.train, task.splits.eval = None, ["validation"]
    task.max_eval_samples, task.source_max_length, task.target_max_length = 3, 20, 9
    dm = SummarizationDataModule(task, tokenizer, decoder_start_token_id=None)
    dm.setup("fit")
    return task, tokenizer, dm


def test_source_then_target_with_labels_on_the_target(data):
    _, tokenizer, dm = data
    special = tokenizer.special
    example = dm.eval_data[0][1]
    n = example["prompt_length"]
    source, target = example["input_ids"][:n], example["input_ids"][n:]
    assert n == 20 and source[0] == special.cls and source[-1] == special.sep  # the separator
    assert target[-1] == special.sep and special.cls not in target and len(target) <= 8
    assert example["labels"] == [IGNORE] * (n - 1) + target + [IGNORE]
    rows = [dm.eval_data[0][i] for i in range(3)]
    batch = dm.val_dataloader()[0].collate_fn(rows)
    assert "decoder_input_ids" not in batch and "prompt_length" not in batch
    for row, example in enumerate(rows):
        length = example["prompt_length"]
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        assert prompt == example["input_ids"][:length]
        assert batch["prompt_mask"][row, -length:].all()  # left-padded
        assert batch["prompt_ids"][row, :-length].eq(special.pad).all()


def test_the_trained_loss_is_the_targets_next_token_loss(data):
    task, tokenizer, dm = data
    config = GPTConfig(vocab_size=tokenizer.vocab_size, n_embd=16, n_layer=1, n_head=2,
                       n_positions=64, pad_token_id=tokenizer.special.pad)
    net = GPTLMHeadModel(config).eval()
    model = Model(get_arch("gpt2"), net, tokenizer)
    module = LitSeq2Seq(model, GenerationConfig(max_new_tokens=4), ["validation"], dm.texts,
                        {"lr": 1e-3},
                        lambda split: build_metrics(["rouge1"], "texts"))
    batch = dm.val_dataloader()[0].collate_fn([dm.eval_data[0][i] for i in range(3)])
    with torch.no_grad():
        nll, rows = module.token_nll(batch)
        logits = net.logits(net(batch["input_ids"], batch["attention_mask"]).last_hidden_state)
    expected, count = 0.0, 0
    for row in range(3):
        n, length = dm.eval_data[0][row]["prompt_length"], int(batch["attention_mask"][row].sum())
        for i in range(n - 1, length - 1):  # predicting tokens n .. length - 1: the target
            expected += F.cross_entropy(logits[row, i], batch["input_ids"][row, i + 1]).item()
            count += 1
    assert len(nll) == count and nll.mean().item() == pytest.approx(expected / count, abs=1e-5)
    assert rows.tolist() == sorted(rows.tolist()) and set(rows.tolist()) == {0, 1, 2}
    task.source_max_length = 60
    with pytest.raises(PlmbenchError, match="one sequence"):
        check_lengths(task, model, GenerationConfig(max_new_tokens=9))
