"""The contract of a registered architecture (``lit_models/archs/spec.py``): what it declares,
checked against its nets, and its checkpoints against transformers where transformers has the
architecture. ``ArchContracts`` is the suite; a subclass gives its ``arch`` (and ``preset``)
fixture: ``test_registered.py`` runs it for every architecture in the registry, so a new
architecture gets these tests by registering; an architecture registered elsewhere (a plugin, a
test's toy) subclasses it with its own.

Every test is on the architecture's tiny preset with random weights (``randomize_``: biases and
norms too, so a weight mapped to the wrong place cannot hide), a vocabulary trained on a few
sentences, and unpadded batches (padded ones, in every role transformers has a class of, are
``tests/nets/test_parity.py``'s; the exported encoder and classifier are also compared on a
padded batch, at its real tokens):

- the pretraining net exports (``to_hf``) and imports (``from_hf``) back to the same weights,
  transformers loads the export with nothing missing and reads text with the exported tokenizer
  as ours does;
- the exported encoder gives transformers' states (and, where declared, hidden states of every
  layer) to 1e-5 (relative beyond magnitude 1);
- a classification head exports as ``*ForSequenceClassification``, scores as transformers does,
  imports back, and is not loaded for another label count;
- an encoder's padded batch (padded on its tokenizer's side) gives transformers' states at the
  real tokens and transformers' classification scores (a pooling over the tokens must skip the
  padding);
- ``token_types``, ``global_attention``, ``hidden_states`` and the pretraining ``heads`` do what
  they say; ``cached_decoding`` gives the logits and generations of decoding without a cache;
- where declared, ``attention_weights`` sum to 1 per query and equal transformers' eager
  attention; a ``head_mask`` of ones changes nothing and a zero for one head changes the output
  (transformers 5 has no head_mask: tests/nets/test_attention_probes.py checks a zero mask
  against transformers' model with that head's weights pruned).
"""

from functools import cache

import pytest
import torch
from omegaconf import OmegaConf

from bench.run.execute import CONF_DIR
from datamodules.tokenization import TextTokenizer, TokenizerSpec, train_tokenizer
from lit_models.archs import Arch, Model
from lit_models.core.build import net_config
from lit_models.core.generation import GenerationConfig, generate
from lit_models.interop.hf import from_hf, load_head, to_hf
from tests.conftest import require, tiny_preset_name
from tests.nets.parity import TEXT, TOLERANCE, randomize_

BATCH, LENGTH = 2, 12
#: how much shorter than the first the padded batch's second row is
PADDED = 5


@cache
def vocabulary(spec: TokenizerSpec) -> TextTokenizer:
    """A small vocabulary of an architecture's tokenizer spec, trained once per spec."""
    return train_tokenizer(spec, TEXT, vocab_size=300, lowercase=False)


def tiny_preset(arch: Arch):
    """The architecture's tiny preset (``conf/model/<arch>-tiny-scratch.yaml``)."""
    return OmegaConf.load(CONF_DIR / "model" / f"{tiny_preset_name(arch.name)}.yaml")


def transformers_class(arch: Arch, role: str):
    """transformers' class of ``arch.hf.classes[role]``; None where transformers lacks the
    architecture (an architecture of our own) or the role."""
    transformers = require("transformers")
    name = arch.hf.classes.get(role)
    return getattr(transformers, name, None) if name else None


def close(ours: torch.Tensor, theirs: torch.Tensor) -> bool:
    """Equal shapes and values to float32's ``TOLERANCE``, relative beyond magnitude 1."""
    scale = max(1.0, theirs.abs().max().item())
    return ours.shape == theirs.shape and (ours - theirs).abs().max().item() <= TOLERANCE * scale


class ArchContracts:
    """The suite; subclasses provide the ``arch`` fixture (module docstring)."""

    @pytest.fixture
    def preset(self, arch: Arch):
        return tiny_preset(arch)

    @pytest.fixture
    def model(self, arch: Arch, preset) -> Model:
        """A random encoder of the tiny preset's sizes and a trained vocabulary."""
        tokenizer = vocabulary(arch.tokenizer)
        config = net_config(arch, preset, tokenizer.vocab_size, tokenizer.special.pad)
        torch.manual_seed(0)
        return Model(arch, randomize_(arch.encoder(config)), tokenizer)

    @pytest.fixture
    def inputs(self, model: Model) -> dict[str, torch.Tensor]:
        """An unpadded batch of ordinary tokens (no special ids); token types where read;
        decoder inputs for an encoder-decoder."""
        arch, net, tokenizer = model
        generator = torch.Generator().manual_seed(1)
        specials = len(arch.tokenizer.tokens)

        def ids() -> torch.Tensor:
            return torch.randint(specials, net.config.vocab_size, (BATCH, LENGTH),
                                 generator=generator)

        batch = {"input_ids": ids(), "attention_mask": torch.ones(BATCH, LENGTH, dtype=torch.long)}
        if arch.capabilities.token_types:
            batch["token_type_ids"] = torch.zeros(BATCH, LENGTH, dtype=torch.long)
        if arch.encoder_decoder:
            batch["decoder_input_ids"] = ids()
        return batch

    def test_the_pretraining_net_round_trips(self, model: Model, tmp_path):
        arch, encoder, tokenizer = model
        torch.manual_seed(0)
        ours = randomize_(arch.pretraining(encoder.config))
        to_hf(Model(arch, ours, tokenizer), tmp_path / "export")
        again = from_hf(tmp_path / "export", with_heads=True, arch=arch)
        assert again.arch is arch and type(again.net) is arch.pretraining
        mine, theirs = ours.state_dict(), again.net.state_dict()
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[k], theirs[k]) for k in mine)
        text = ("The cat sat on the mat.", "It was a dog!")
        assert again.tokenizer.backend.encode(*text).ids == tokenizer.backend.encode(*text).ids
        cls = transformers_class(arch, "pretraining")
        if cls is None:
            return
        transformers = require("transformers")
        _, info = cls.from_pretrained(tmp_path / "export", output_loading_info=True)
        assert not info["missing_keys"], info["missing_keys"]
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
        assert hf_tokenizer(*text)["input_ids"] == tokenizer.backend.encode(*text).ids

    def test_the_exported_encoder_gives_transformers_states(self, model: Model, inputs, tmp_path):
        arch, encoder, tokenizer = model
        cls = transformers_class(arch, "encoder")
        if cls is None:
            pytest.skip(f"transformers has no {arch.hf.model_type} model")
        to_hf(model, tmp_path / "export")
        theirs = cls.from_pretrained(tmp_path / "export").eval()
        hidden = {"output_hidden_states": True} if arch.capabilities.hidden_states else {}
        with torch.no_grad():
            mine, out = encoder.eval()(**inputs, **hidden), theirs(**inputs, **hidden)
        assert close(mine.last_hidden_state, out.last_hidden_state)
        if hidden:
            assert len(mine.hidden_states) == len(out.hidden_states)
            assert all(close(a, b) for a, b in zip(mine.hidden_states, out.hidden_states,
                                                   strict=True))
        # a padded batch (on the side the architecture's batches pad): the same states at
        # every real token
        padded, real = dict(inputs), torch.ones_like(inputs["input_ids"], dtype=torch.bool)
        pads = slice(0, 5) if arch.tokenizer.padding_side == "left" else slice(LENGTH - 5, None)
        real[1, pads] = False
        padded["input_ids"] = inputs["input_ids"].masked_fill(~real, tokenizer.special.pad)
        padded["attention_mask"] = real.long()
        with torch.no_grad():
            mine, out = encoder(**padded).last_hidden_state, theirs(**padded).last_hidden_state
        if arch.encoder_decoder:  # the decoder's states: every position reads the source
            real = torch.ones_like(padded["decoder_input_ids"], dtype=torch.bool)
        assert close(mine[real], out[real])

    def test_a_classification_head_round_trips(self, model: Model, inputs, tmp_path):
        arch, encoder, _ = model
        if arch.classification_head is None:
            pytest.skip(f"{arch.name} registers no classification head")
        config = encoder.config
        head = randomize_(arch.classification_head(config, 3, 0.1))
        inputs = {k: v for k, v in inputs.items() if k != "decoder_input_ids"}
        ours_inputs = dict(inputs)
        if arch.capabilities.global_attention:  # on the pooled first token, as LitClassifier
            ours_inputs["global_attention_mask"] = torch.zeros_like(inputs["input_ids"])
            ours_inputs["global_attention_mask"][:, 0] = 1
        with torch.no_grad():
            ours = head(encoder.eval()(**ours_inputs))
        to_hf(model, tmp_path / "export", head, ["a", "b", "c"])
        again = from_hf(tmp_path / "export", arch=arch)
        loaded = arch.classification_head(config, 3, 0.1).eval()
        assert load_head(loaded, tmp_path / "export", arch.hf.classifier_names)
        assert not load_head(arch.classification_head(config, 2, 0.1), tmp_path / "export",
                             arch.hf.classifier_names)
        with torch.no_grad():
            assert close(loaded(again.net.eval()(**ours_inputs)), ours)
        cls = transformers_class(arch, "classifier")
        if cls is not None:
            theirs = cls.from_pretrained(tmp_path / "export").eval()
            assert theirs.config.id2label == {0: "a", 1: "b", 2: "c"}
            with torch.no_grad():
                assert close(theirs(**inputs).logits, ours)

    def test_a_padded_batch_gives_transformers_classification_scores(self, model: Model,
                                                                     inputs, tmp_path):
        """An encoder's padded batch (the second row ``PADDED`` tokens shorter, padded on the
        tokenizer's side): the exported classifier scores as transformers' (its pooling,
        ModernBERT's mean included, must skip the padding)."""
        arch, encoder, tokenizer = model
        cls = transformers_class(arch, "classifier")
        if arch.kind != "encoder" or arch.classification_head is None or cls is None:
            pytest.skip(f"{arch.name}: no encoder classifier transformers has")
        padded = dict(inputs)
        mask = torch.ones(BATCH, LENGTH, dtype=torch.long)
        pad = slice(0, PADDED) if arch.tokenizer.padding_side == "left" else slice(-PADDED, None)
        mask[1, pad] = 0
        padded["input_ids"] = inputs["input_ids"].masked_fill(mask == 0, tokenizer.special.pad)
        padded["attention_mask"] = mask
        head = randomize_(arch.classification_head(encoder.config, 3, 0.1))
        to_hf(model, tmp_path / "export", head, ["a", "b", "c"])
        theirs = cls.from_pretrained(tmp_path / "export").eval()
        ours_inputs = dict(padded)
        if arch.capabilities.global_attention:  # on the first token, as LitClassifier
            ours_inputs["global_attention_mask"] = torch.zeros_like(mask)
            ours_inputs["global_attention_mask"][:, 0] = 1
        with torch.no_grad():
            assert close(head(encoder.eval()(**ours_inputs)), theirs(**padded).logits)

    def test_token_types_are_read_where_declared(self, model: Model, inputs):
        arch, encoder, _ = model
        if not arch.capabilities.token_types:
            pytest.skip(f"{arch.name} declares no token types: families pass none")
        plain = {k: v for k, v in inputs.items() if k != "token_type_ids"}
        with torch.no_grad():
            default = encoder.eval()(**plain).last_hidden_state
            zeros = encoder(**plain, token_type_ids=torch.zeros_like(plain["input_ids"]))
            assert close(zeros.last_hidden_state, default)  # segment 0 is the default
            if getattr(encoder.config, "type_vocab_size", 0) >= 2:
                ones = encoder(**plain, token_type_ids=torch.ones_like(plain["input_ids"]))
                assert not close(ones.last_hidden_state, default)

    def test_global_attention_is_taken_where_declared(self, model: Model, inputs):
        arch, encoder, _ = model
        if not arch.capabilities.global_attention:
            pytest.skip(f"{arch.name} declares no global attention")
        first = torch.zeros_like(inputs["input_ids"])
        first[:, 0] = 1
        with torch.no_grad():
            local = encoder.eval()(**inputs).last_hidden_state
            both = encoder(**inputs, global_attention_mask=first).last_hidden_state
        assert both.shape == local.shape and not close(both, local)

    def test_hidden_states_are_the_embeddings_then_every_layer(self, model: Model, inputs):
        arch, encoder, _ = model
        if not arch.capabilities.hidden_states:
            pytest.skip(f"{arch.name} declares no hidden states")
        with torch.no_grad():
            out = encoder.eval()(**inputs, output_hidden_states=True)
        states = out.hidden_states
        assert len(states) == encoder.config.num_hidden_layers + 1
        assert all(s.shape == out.last_hidden_state.shape for s in states)
        assert torch.equal(states[-1], out.last_hidden_state)
        assert not close(states[0], states[1])

    def test_the_declared_pretraining_heads_are_there(self, model: Model, inputs):
        arch, encoder, _ = model
        heads = arch.capabilities.heads
        net = randomize_(arch.pretraining(encoder.config)).eval()
        vocab = encoder.config.vocab_size
        with torch.no_grad():
            hidden = net(**inputs).last_hidden_state
            states = hidden.reshape(-1, hidden.shape[-1])
            if "mlm" in heads:
                assert net.mlm_head(states).shape == (len(states), vocab)
            for pair in {"nsp", "sop"} & heads:
                assert getattr(net, f"{pair}_head")(states).shape == (len(states), 2)
            if "sbo" in heads:
                assert isinstance(net.sbo_head, torch.nn.Module)
            if "rtd" in heads:
                generated = net.generator(**inputs).last_hidden_state
                assert net.generator.mlm_head(generated).shape == (*hidden.shape[:2], vocab)
                assert net.rtd_head(hidden).shape == hidden.shape[:2]
            if {"lm", "plm"} & heads:
                assert arch.capabilities.logits
                assert net.logits(hidden).shape == (*hidden.shape[:2], vocab)
            if "plm" in heads:
                targets = torch.eye(LENGTH)[None, :3].expand(BATCH, -1, -1)
                perm = torch.ones(BATCH, LENGTH, LENGTH).triu()
                out = net(**inputs, perm_mask=perm, target_mapping=targets)
                assert out.last_hidden_state.shape == (BATCH, 3, hidden.shape[-1])
        assert arch.encoder_decoder == ("lm" in heads and hasattr(net, "encode"))

    def test_cached_decoding_equals_decoding_without_a_cache(self, model: Model, inputs):
        arch, encoder, _ = model
        if not arch.capabilities.cached_decoding:
            pytest.skip(f"{arch.name} declares no cached decoding")
        net = randomize_(arch.pretraining(encoder.config)).eval()
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        with torch.no_grad():
            caches = net.new_caches()
            if arch.encoder_decoder:
                target = inputs["decoder_input_ids"]
                memory = net.encode(ids, mask)
                full = net.logits(net.decode(target, memory, mask))
                steps = [net.logits(net.decode(target[:, t:t + 1], memory if t == 0 else None,
                                               mask, caches)) for t in range(target.shape[1])]
            else:
                full = net.logits(net(ids, mask).last_hidden_state)
                steps = [net.logits(net(ids[:, t:t + 1], mask[:, :t + 1], caches=caches)
                                    .last_hidden_state) for t in range(LENGTH)]
        assert close(torch.cat(steps, 1), full)
        settings = {"max_new_tokens": 6, "min_new_tokens": 6}  # the prompt: a source or a prefix
        cached = generate(arch, net, ids, mask, GenerationConfig(**settings))
        uncached = generate(arch, net, ids, mask, GenerationConfig(**settings, use_cache=False))
        assert cached.shape == (BATCH, 6) and torch.equal(cached, uncached)

    def test_attention_weights_where_declared(self, model: Model, inputs, tmp_path):
        arch, encoder, _ = model
        if not arch.capabilities.attention_weights:
            pytest.skip(f"{arch.name} does not declare attention weights (issue 22)")
        with torch.no_grad():
            out = encoder.eval()(**inputs, output_attentions=True)
        heads = out.attentions[0].shape[1]
        assert len(out.attentions) == encoder.config.num_hidden_layers
        assert all(a.shape == (BATCH, heads, LENGTH, LENGTH) for a in out.attentions)
        assert all(close(a.sum(-1), torch.ones_like(a.sum(-1))) for a in out.attentions)
        cls = transformers_class(arch, "encoder")
        if cls is not None:
            to_hf(model, tmp_path / "export")
            theirs = cls.from_pretrained(tmp_path / "export", attn_implementation="eager")
            with torch.no_grad():
                expected = theirs.eval()(**inputs, output_attentions=True).attentions
            assert all(close(a, b) for a, b in zip(out.attentions, expected, strict=True))

    def test_head_mask_where_declared(self, model: Model, inputs):
        arch, encoder, _ = model
        if not arch.capabilities.head_mask:
            pytest.skip(f"{arch.name} does not declare head masks (issue 22)")
        encoder.eval()
        layers = encoder.config.num_hidden_layers
        with torch.no_grad():
            plain = encoder(**inputs).last_hidden_state
            heads = encoder(**inputs, output_attentions=True).attentions[0].shape[1]
            ones = torch.ones(layers, heads)
            assert close(encoder(**inputs, head_mask=ones).last_hidden_state, plain)
            masked = ones.clone()
            masked[0, 0] = 0
            ours = encoder(**inputs, head_mask=masked).last_hidden_state
        # transformers 5 has no head_mask: tests/nets/test_attention_probes.py checks a zero mask
        # against transformers' model with the head's weights cut out (prune_heads)
        assert not close(ours, plain)
