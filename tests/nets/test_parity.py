"""Parity with transformers over the registry: one test for every registered architecture, each of
its presets at a tiny size (``SIZES``) and the settings no preset uses (``VARIANTS``), the shape
litgpt's ``tests/test_model.py`` takes over its configs.

For each (architecture, setting, role) the test builds transformers' class of the role
(``HFLayout.classes``: ``encoder``, ``pretraining``, and ``mlm`` where that is another class)
from the config.json our export writes for the setting (``hf_config``), with every weight random
(``randomize_``: biases and norms too), saves it with ``save_pretrained`` beside a trained
vocabulary, imports it with our own ``from_hf`` and compares to 1e-5 in float32, on padded batches
(sentence pairs where the architecture reads token types; decoder inputs of other lengths for an
encoder-decoder; with and without a global attention mask where declared; on the tokenizer's
padding side, and on the left too for a decoder, as prompts are), at the real tokens (finite at
the pads too):

- ``encoder``: ``last_hidden_state``, ``pooler_output`` where transformers' class has one, an
  encoder-decoder's ``encoder_last_hidden_state``, and every layer's hidden states where the
  architecture declares them; transformers runs under each attention path it has (eager, SDPA);
- ``pretraining``: each pretraining head the architecture declares (``Capabilities.heads``)
  against transformers' output of it (``HEADS``); ``plm`` (XLNet's query stream) under a random
  factorisation order and target mapping;
- ``mlm``: the masked-LM scores of transformers' masked-LM class (BERT's and ALBERT's without the
  sentence head, ELECTRA's generator, DeBERTa-v2's);
- and, on the presets, the encoder alone out of a checkpoint with heads (``init_from``) gives the
  states of the net with heads.

What differs between architectures is what the registry declares (classes, heads, capabilities,
padding side) and data here with its reasons (``VARIANTS``, ``NOT_IN_TRANSFORMERS``,
``OTHERWISE``), never a branch on an architecture's name. A registered model is compared or listed
in ``NO_COUNTERPART`` with the reason: ``test_every_registered_model_is_compared`` fails for one
that is neither. The other guarantees (exports, classifiers, cached decoding, attention weights)
are the contract suite's (``tests/contracts``)."""

import json
from dataclasses import fields
from functools import cache
from pathlib import Path

import pytest
import torch
import yaml

from datamodules.collate import pad_collate
from datamodules.tokenization import TextTokenizer, save_tokenizer
from lit_models.archs import ARCHS, BASELINES, Arch
from lit_models.core.build import net_config
from lit_models.interop.hf import from_hf, hf_config
from tests.conftest import REPO, require, tiny_preset_name
from tests.contracts.suite import vocabulary
from tests.nets.parity import TEXT, TOLERANCE, max_diff, randomize_

transformers = require("transformers")
#: skips transformers' weight initialisation (randomize_ sets every weight)
no_init_weights = require("transformers.initialization").no_init_weights
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: the registered models transformers has no class of, and why (the baselines are no Transformers;
#: an architecture of our own would be listed here too)
NO_COUNTERPART = {
    "word2vec": "static word vectors (Mikolov et al. 2013): no transformers model",
    "glove": "static word vectors (Pennington et al. 2014): no transformers model",
    "elmo": "a character-CNN biLM (Peters et al. 2018): transformers never had ELMo",
    "bilstm": "the GLUE paper's BiLSTM baseline (Wang et al. 2019): no transformers model",
}
#: transformers' size keys at the size every preset is compared at (as litgpt's tests override
#: ``n_layer`` and ``n_embd``): two layers of width 32 and two heads, embeddings narrower than
#: the layers where they may be, a Longformer window holding the inputs whole
SIZES = {
    **dict.fromkeys(["hidden_size", "d_model", "n_embd", "dim"], 32),
    **dict.fromkeys(["num_hidden_layers", "num_layers", "num_decoder_layers", "n_layer",
                     "n_layers", "encoder_layers", "decoder_layers"], 2),
    **dict.fromkeys(["num_attention_heads", "num_heads", "n_head", "n_heads",
                     "encoder_attention_heads", "decoder_attention_heads"], 2),
    **dict.fromkeys(["intermediate_size", "d_ff", "n_inner", "hidden_dim", "encoder_ffn_dim",
                     "decoder_ffn_dim", "d_inner"], 64),
    "d_kv": 16, "embedding_size": 16, "max_position_embeddings": 128, "n_positions": 128,
    "attention_window": 64,
}
#: the vocabulary's config keys: a case's come from the trained vocabulary (``net_config``)
VOCABULARY = frozenset({"vocab_size", "pad_token_id"})
#: settings no preset uses, each over the tiny preset at sizes no preset has (odd heads and
#: layers, widths apart from 4H), as the import must read them
VARIANTS = {
    "albert": [  # E < H; all layers shared (one group) and none (a group per layer)
        dict(hidden_size=36, embedding_size=10, num_hidden_layers=3, num_attention_heads=3,
             intermediate_size=50, hidden_act="gelu_new", max_position_embeddings=83,
             num_hidden_groups=1, sharing="all"),
        dict(hidden_size=40, embedding_size=24, num_hidden_layers=3, num_attention_heads=5,
             intermediate_size=64, hidden_act="gelu", max_position_embeddings=96,
             num_hidden_groups=3, sharing="none", layer_norm_eps=1e-6),
    ],
    "bart": [  # unequal stacks and heads, tanh GELU, scaled embeddings
        dict(d_model=36, encoder_layers=2, decoder_layers=3, encoder_attention_heads=3,
             decoder_attention_heads=2, encoder_ffn_dim=50, decoder_ffn_dim=44,
             activation_function="gelu_new", max_position_embeddings=61, scale_embedding=True),
        dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
             activation_function="relu", max_position_embeddings=72),
    ],
    "bert": [  # heads of 8 dimensions and a feed-forward apart from 4H; three segment types,
        # tanh GELU, another LayerNorm epsilon
        dict(hidden_size=32, num_attention_heads=4, intermediate_size=37, hidden_act="gelu"),
        dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=128,
             hidden_act="gelu_new", type_vocab_size=3, max_position_embeddings=64,
             layer_norm_eps=1e-7),
    ],
    "deberta": [  # spans shorter and longer than the inputs; c2p and p2c together and alone;
        # absolute positions in the input or not; segment embeddings or none
        dict(hidden_size=36, num_hidden_layers=3, num_attention_heads=3, intermediate_size=50,
             max_position_embeddings=83, max_relative_positions=5, pos_att_type=["c2p", "p2c"],
             position_biased_input=False, type_vocab_size=0, hidden_act="gelu"),
        dict(hidden_size=28, num_hidden_layers=2, num_attention_heads=7, intermediate_size=44,
             max_position_embeddings=61, max_relative_positions=-1, pos_att_type=["p2c"],
             position_biased_input=True, type_vocab_size=2, hidden_act="gelu_new"),
        dict(hidden_size=20, num_hidden_layers=1, num_attention_heads=5, intermediate_size=24,
             max_position_embeddings=64, max_relative_positions=11, pos_att_type=["c2p"],
             position_biased_input=True, type_vocab_size=0, hidden_act="gelu"),
    ],
    "deberta_v2": [  # the masked-LM head under its legacy names and the released ones
        dict(hidden_size=30, num_hidden_layers=2, num_attention_heads=5, intermediate_size=44,
             max_position_embeddings=96, position_buckets=10, max_relative_positions=24,
             legacy=True),
        dict(hidden_size=30, num_hidden_layers=2, num_attention_heads=5, intermediate_size=44,
             max_position_embeddings=96, position_buckets=10, max_relative_positions=24,
             legacy=False),
    ],
    "distilbert": [
        dict(dim=36, n_layers=3, n_heads=3, hidden_dim=50, activation="gelu_new",
             max_position_embeddings=83),
        dict(dim=40, n_layers=1, n_heads=5, hidden_dim=64, activation="gelu",
             max_position_embeddings=96),
    ],
    "electra": [  # embeddings narrower than the layers (projected) or as wide (no projection)
        dict(embedding_size=20, hidden_size=36, num_hidden_layers=3, num_attention_heads=3,
             intermediate_size=50, hidden_act="gelu_new", max_position_embeddings=83),
        dict(embedding_size=28, hidden_size=28, num_hidden_layers=1, num_attention_heads=7,
             intermediate_size=44, hidden_act="gelu", max_position_embeddings=61),
    ],
    "gpt2": [  # a feed-forward size apart from 4H; exact GELU
        dict(n_embd=36, n_layer=3, n_head=3, n_inner=50, n_positions=67),
        dict(n_embd=32, n_layer=1, n_head=4, n_positions=90, activation_function="gelu",
             layer_norm_epsilon=1e-6),
    ],
    "longformer": [  # windows of different sizes per layer, none a divisor of the lengths
        dict(hidden_size=36, num_hidden_layers=3, num_attention_heads=3, intermediate_size=50,
             hidden_act="gelu_new", max_position_embeddings=90, attention_window=[4, 8, 4]),
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             hidden_act="gelu", max_position_embeddings=70, attention_window=10),
    ],
    "roberta": [
        dict(hidden_size=36, num_hidden_layers=3, num_attention_heads=3, intermediate_size=50,
             hidden_act="gelu_new", max_position_embeddings=83),
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
             hidden_act="gelu", max_position_embeddings=96, layer_norm_eps=1e-12),
    ],
    "t5": [  # heads x d_kv != d_model, unequal stacks, few buckets and a short max distance (far
        # and logarithmic buckets in short batches); v1.1 with its own output layer and without
        dict(d_model=36, d_kv=10, d_ff=44, num_layers=2, num_decoder_layers=3, num_heads=3,
             relative_attention_num_buckets=8, relative_attention_max_distance=20),
        dict(d_model=32, d_kv=8, d_ff=40, num_layers=1, num_heads=4,
             feed_forward_proj="gated-gelu", tie_word_embeddings=False,
             relative_attention_num_buckets=12, relative_attention_max_distance=40,
             layer_norm_epsilon=1e-5),
        dict(d_model=32, d_kv=8, d_ff=40, num_layers=1, num_heads=4,
             feed_forward_proj="gated-gelu", tie_word_embeddings=True,
             scale_decoder_outputs=False, relative_attention_num_buckets=12,
             relative_attention_max_distance=40),
    ],
    "xlnet": [  # memory kept whole (mem_len 0) or cut, with reuse_len ("uni" attention, whose
        # transformers takes no padded batch: tests/nets/test_xlnet.py, row by row)
        dict(d_model=30, n_layer=2, n_head=3, d_inner=37, ff_activation="gelu", mem_len=9),
        dict(d_model=28, n_layer=3, n_head=7, d_inner=40, ff_activation="relu", mem_len=0,
             reuse_len=5, clamp_len=4, layer_norm_eps=1e-5),
    ],
}
#: (architecture, role) whose class transformers lacks, and why
NOT_IN_TRANSFORMERS = {
    ("deberta_v2", "pretraining"): "transformers has no DebertaV2ForPreTraining (DeBERTa-v3's "
    "replaced-token detection pair): its generator's masked LM is compared in the mlm role, the "
    "pair's export round trip is the contract suite's",
}
#: (architecture, role) -> why transformers' class computes another function for a config, or
#: None where it computes ours
OTHERWISE = {
    ("deberta", "pretraining"): lambda config: None if config.position_biased_input else (
        "the enhanced mask decoder adds absolute positions before the MLM head (He et al. 2021, "
        "§3.3); transformers' DebertaForMaskedLM has none: tests/nets/test_deberta.py"),
}


#: the pretraining heads compared, by ``Capabilities.heads``' names: (our scores from the net and
#: its output, transformers' output fields that hold them (the first present), per token); None:
#: transformers has no such head
HEADS = {
    "mlm": (lambda net, out: net.mlm_head(out.last_hidden_state), ("prediction_logits", "logits"),
            True),
    "nsp": (lambda net, out: net.nsp_head(out.pooler_output),  # ALBERT's nsp head is its sop one
            ("seq_relationship_logits", "sop_logits"), False),
    "sop": (lambda net, out: net.sop_head(out.pooler_output), ("sop_logits",), False),
    "rtd": (lambda net, out: net.rtd_head(out.last_hidden_state), ("logits",), True),
    "lm": (lambda net, out: net.logits(out.last_hidden_state), ("logits",), True),
    "plm": (lambda net, out: net.logits(out.last_hidden_state), ("logits",), False),
    "sbo": None,  # SpanBERT's span boundary objective: transformers has none
}
ROLES = ("encoder", "pretraining", "mlm")
VARIANT = "variant"  # the label of a ``VARIANTS`` setting, numbered
PAIRS = [(TEXT[0], TEXT[1]), (TEXT[2], "Birds sing."), ("Dogs jump.", TEXT[3]),
         ("Hello, world!", "A cat sat.")]


@cache
def written(name: str) -> dict:
    """A model preset's file (``conf/model/<name>.yaml``), parsed once."""
    return yaml.load((REPO / "conf" / "model" / f"{name}.yaml").read_text(), Loader=LOADER)


def preset_file(name: str) -> dict:
    """A model preset as written, a size overlay (``defaults: [<preset>@_here_, _self_]``) over
    the preset it overlays."""
    values = dict(written(name))
    base = {}
    for default in values.pop("defaults", []):
        if default != "_self_":
            base |= preset_file(default.split("@")[0])
    return base | values


def presets_at_tiny_size(arch: Arch) -> dict[str, dict]:
    """The architecture's random-weight presets (``init_from: scratch``) at the sizes of
    ``SIZES``, those equal at that size in eval mode (dropout aside) once: a label -> config
    values; the label names the tiny preset where it is among them, else the first, and how many
    others there are."""
    tiny_name = tiny_preset_name(arch.name)
    same: dict[str, list[tuple[str, dict]]] = {}
    for path in sorted((REPO / "conf" / "model").glob("*.yaml")):
        values = preset_file(path.stem)
        if values.get("arch") == arch.name and values.get("init_from") == "scratch":
            keys = config_keys(arch) - VOCABULARY
            sized = {k: v for k, v in (values | SIZES).items() if k in keys}
            key = json.dumps({k: v for k, v in sized.items() if "dropout" not in k},
                             sort_keys=True)
            same.setdefault(key, []).append((path.stem, sized))
    groups = {}
    for presets in same.values():
        names = [name for name, _ in presets]
        label = (tiny_name if tiny_name in names else names[0]) + (
            f"(+{len(names) - 1})" if len(names) > 1 else "")
        groups[label] = presets[0][1]
    return groups


def config_keys(arch: Arch) -> set[str]:
    return {f.name for f in fields(arch.config)}


def transformers_class(arch: Arch, role: str):
    """transformers' class of ``role`` (``HFLayout.classes``); None where it has none."""
    name = arch.hf.classes.get(role)
    return named_class(name) if name else None


@cache
def named_class(name: str):
    return getattr(transformers, name, None)  # a miss searches every lazy module: once


def cases() -> list:
    """(architecture, setting, config values, role) of every registered architecture: each preset
    at tiny size (labelled as ``presets_at_tiny_size`` does) and each variant (``VARIANTS``,
    labelled ``variant<i>``) in every role transformers has a class of; a role whose class it lacks
    is a skip with the reason ``NOT_IN_TRANSFORMERS`` gives."""
    params = []
    for name, arch in sorted(ARCHS.items()):
        if name in NO_COUNTERPART:
            continue
        tiny = presets_at_tiny_size(arch)
        base = next((values for label, values in tiny.items()
                     if label.startswith(tiny_preset_name(name))), None)
        if base is None:  # no tiny preset: no cases, which the meta test names
            continue
        settings = {**tiny, **{f"{VARIANT}{i}": base | overrides
                               for i, overrides in enumerate(VARIANTS.get(name, []))}}
        roles = [role for role in ROLES if role in arch.hf.classes]
        if arch.hf.classes.get("mlm") == arch.hf.classes.get("pretraining"):
            roles.remove("mlm")
        for label, values in settings.items():
            for role in roles:
                marks = []
                if transformers_class(arch, role) is None:  # listed, or the meta test fails
                    marks = pytest.mark.skip(reason=NOT_IN_TRANSFORMERS.get((name, role), ""))
                params.append(pytest.param(name, label, values, role, marks=marks,
                                           id=f"{name}-{label}-{role}"))
    return params


CASES = cases()


def tokenizer_of(arch: Arch) -> TextTokenizer:
    """The contract suite's vocabulary of the architecture (trained once per tokenizer spec)."""
    return vocabulary(arch.tokenizer)


def oracle(arch: Arch, config, role: str, directory: Path) -> torch.nn.Module:
    """transformers' class of ``role`` for the config.json our export writes of ``config``, every
    weight random (a bias kept as a buffer too: BART's ``final_logits_bias``; an output layer of
    its own where the config unties it, as T5 v1.1's: transformers 5 builds it tied), saved with
    our tokenizer."""
    cls = transformers_class(arch, role)
    values = hf_config(arch, config)
    with no_init_weights():  # randomize_ sets every weight: their initialisation is wasted
        model = cls(transformers.AutoConfig.for_model(**values))
    model.tie_weights()
    randomize_(model)
    for name, buffer in model.named_buffers():
        if name.endswith("bias") and buffer.is_floating_point():
            buffer.normal_()
    output = model.get_output_embeddings()
    if values.get("tie_word_embeddings") is False and output is not None and (
            output.weight is model.get_input_embeddings().weight):
        output.weight = torch.nn.Parameter(0.3 * torch.randn_like(output.weight))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer_of(arch), directory, config.max_length)
    return model.eval()


def padded_inputs(arch: Arch, config, side: str) -> tuple[dict, torch.Tensor]:
    """A padded batch on ``side`` (pairs with token types where read; decoder inputs of other
    lengths, padded right, for an encoder-decoder) and the mask of the positions compared."""
    return batch_of(arch.name, min(48, config.max_length), side)


@cache
def batch_of(name: str, length: int, side: str) -> tuple[dict, torch.Tensor]:
    """``padded_inputs`` of at most ``length`` tokens, built once (the tensors are only read)."""
    arch = ARCHS[name]
    tokenizer = tokenizer_of(arch)
    backend = tokenizer.truncating(length, segments=2)
    if arch.capabilities.token_types:
        encodings = backend.encode_batch(PAIRS)
        examples = [{"input_ids": e.ids, "token_type_ids": e.type_ids} for e in encodings]
    else:
        examples = [{"input_ids": e.ids} for e in backend.encode_batch(TEXT[:4])]
    batch = pad_collate(examples, pad_id=tokenizer.special.pad)
    assert (batch["attention_mask"] == 0).any(), "the batch must be padded"
    if side == "left":
        lengths = batch["attention_mask"].sum(1)
        T = batch["input_ids"].shape[1]
        batch = {key: torch.stack([row.roll(T - int(n), dims=0)
                                   for row, n in zip(value, lengths, strict=True)])
                 for key, value in batch.items()}
    if not arch.encoder_decoder:
        return batch, batch["attention_mask"]
    targets = pad_collate([{"input_ids": e.ids} for e in backend.encode_batch(TEXT[5:9])],
                          pad_id=tokenizer.special.pad)
    batch["decoder_input_ids"] = targets["input_ids"]
    return batch, targets["attention_mask"]


def global_masks(arch: Arch, batch: dict) -> list[dict]:
    """No global attention, and where declared also the first token global in every row, a
    question-like prefix in one, none in the last."""
    if not arch.capabilities.global_attention:
        return [{}]
    mask = torch.zeros_like(batch["input_ids"])
    for row, where in enumerate([[0], [0, 1, 2, 3], [0, 5], []]):
        mask[row, where] = 1
    return [{}, {"global_attention_mask": mask}]


def factorisation(mask: torch.Tensor, num_predict: int) -> dict[str, torch.Tensor]:
    """XLNet's two-stream inputs: ``perm_mask`` (i sees j only if j comes before i in a random
    order of each row's tokens; pads seen by none) and the ``target_mapping`` of the order's
    last ``num_predict`` tokens."""
    generator = torch.Generator().manual_seed(0)
    B, T = mask.shape
    perm_mask = torch.ones(B, T, T)
    target_mapping = torch.zeros(B, num_predict, T)
    for row in range(B):
        tokens = mask[row].nonzero().squeeze(1)
        order = tokens[torch.randperm(len(tokens), generator=generator)]
        rank = torch.full((T,), T)
        rank[order] = torch.arange(len(order))
        perm_mask[row] = (rank[None, :] >= rank[:, None]).float()
        for m, position in enumerate(order[-num_predict:]):
            target_mapping[row, m, position] = 1
    return {"perm_mask": perm_mask, "target_mapping": target_mapping}


def compared(ours: torch.Tensor, theirs: torch.Tensor, keep: torch.Tensor | None,
             what: str) -> float:
    """max |ours - theirs| (at the ``keep`` positions), on outputs that are not vacuous; the
    states between layers relative beyond magnitude 1 (the residual stream grows, as the
    contract suite compares them)."""
    assert torch.isfinite(ours).all()  # the pads too: nothing NaN leaks from a padded query
    if keep is None:
        assert ours.shape == theirs.shape
        return (ours - theirs).abs().max().item()
    assert ours[keep.bool()].std() > 1e-3  # random weights: the outputs vary
    scale = max(1.0, theirs.abs().max().item()) if what.startswith("hidden_states") else 1.0
    return max_diff(ours, theirs, keep) / scale


def heads_of(arch: Arch, role: str) -> list[str]:
    """The heads ``role`` compares: the declared pretraining heads transformers has, or the
    masked-LM head of its masked-LM class."""
    heads = arch.capabilities.heads if role == "pretraining" else {"mlm"}
    return sorted(head for head in heads if HEADS[head] is not None)


def run(arch: Arch, role: str, model, inputs: dict, keep: torch.Tensor):
    """``model``'s output for ``role``: with every layer's states where declared (encoder), under
    a factorisation order for XLNet's query stream; one forward for all heads."""
    if role == "encoder":
        extra = {"output_hidden_states": True} if arch.capabilities.hidden_states else {}
    else:
        extra = factorisation(keep, 3) if "plm" in heads_of(arch, role) else {}
    return model(**inputs, **extra)


def outputs(arch: Arch, role: str, net, ours, theirs, inputs: dict, keep: torch.Tensor):
    """(what, ours, theirs, positions or None) of every output ``role`` compares, from our net's
    output ``ours`` and transformers' ``theirs``."""
    if role == "encoder":
        yield "last_hidden_state", ours.last_hidden_state, theirs.last_hidden_state, keep
        # transformers' pooled output where its class has one (ours may pool where theirs
        # does not: the state a classifier reads)
        if (pooled := getattr(theirs, "pooler_output", None)) is not None:
            yield "pooler_output", ours.pooler_output, pooled, None
        if arch.encoder_decoder:
            yield ("encoder_last_hidden_state", ours.encoder_last_hidden_state,
                   theirs.encoder_last_hidden_state, inputs["attention_mask"])
        if arch.capabilities.hidden_states:
            assert len(ours.hidden_states) == len(theirs.hidden_states)
            for i, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states,
                                           strict=True)):
                yield f"hidden_states[{i}]", a, b, keep
        return
    for head in heads_of(arch, role):
        scores, names, per_token = HEADS[head]
        field = next(name for name in names if getattr(theirs, name, None) is not None)
        yield head, scores(net, ours), getattr(theirs, field), keep if per_token else None


@pytest.mark.parametrize(("name", "setting", "values", "role"), CASES)
@torch.no_grad()
def test_from_hf_matches(name: str, setting: str, values: dict, role: str, tmp_path):
    arch = ARCHS[name]
    tokenizer = tokenizer_of(arch)
    config = net_config(arch, values, tokenizer.vocab_size, tokenizer.special.pad)
    if reason := arch.hf.unsupported(hf_config(arch, config)):
        pytest.skip(f"transformers cannot express it: {reason}")
    if reason := OTHERWISE.get((name, role), lambda config: None)(config):
        pytest.skip(reason)
    reference = oracle(arch, config, role, tmp_path)
    imported = from_hf(tmp_path, with_heads=role != "encoder", arch=arch)
    net = imported.net.eval()
    expected = {"encoder": arch.encoder, "pretraining": arch.pretraining,
                "mlm": arch.masked_lm or arch.pretraining}[role]
    assert type(net) is expected and imported.tokenizer.special == tokenizer.special
    # transformers' eager attention and its SDPA path, where it has both
    implementations = ["eager", "sdpa"] if role == "encoder" and reference._supports_sdpa else [
        None]
    sides = {arch.tokenizer.padding_side} | ({"left"} if arch.kind == "decoder" else set())
    for side in sorted(sides):
        inputs, keep = padded_inputs(arch, config, side)
        for given in ({**inputs, **glob} for glob in global_masks(arch, inputs)):
            ours = run(arch, role, net, given, keep)
            for implementation in implementations:
                if implementation:
                    reference.set_attn_implementation(implementation)
                theirs = run(arch, role, reference, given, keep)
                for what, mine, their, where in outputs(arch, role, net, ours, theirs, given,
                                                        keep):
                    diff = compared(mine, their, where, what)
                    assert diff <= TOLERANCE, (what, side, implementation, diff)
    # the encoder alone out of a checkpoint with heads (init_from), on the presets: it reads the
    # same config and weights as the net with heads, whatever the settings
    if role != "encoder" and not setting.startswith(VARIANT):
        encoder = from_hf(tmp_path, arch=arch).net.eval()
        alone, inside = encoder(**inputs).last_hidden_state, net(**inputs).last_hidden_state
        assert type(encoder) is arch.encoder and max_diff(alone, inside, keep) == 0


def test_every_registered_model_is_compared():
    """Every registered architecture has cases (its tiny preset among them), every model with
    none is listed with the reason, every role whose transformers class is missing is listed, and
    the lists name nothing that is not registered."""
    compared_names = {param.values[0] for param in CASES}
    registered = set(ARCHS) | set(BASELINES)
    unlisted = registered - compared_names - set(NO_COUNTERPART)
    assert not unlisted, (f"{sorted(unlisted)}: registered, but neither compared with transformers "
                          "(a tiny preset) nor in NO_COUNTERPART with the reason")
    assert set(NO_COUNTERPART) <= registered
    missing = {(name, role) for name, _, _, role in (param.values for param in CASES)
               if transformers_class(ARCHS[name], role) is None}
    assert missing == set(NOT_IN_TRANSFORMERS)
    listed = {name for name, _ in [*OTHERWISE, *NOT_IN_TRANSFORMERS]}
    assert set(VARIANTS) | listed <= set(ARCHS)
    for name in ARCHS:
        tiny = f"{name}-{tiny_preset_name(name)}"
        assert any(param.id.startswith(tiny) for param in CASES), name
