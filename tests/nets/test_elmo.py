"""ELMo's biLM (lit_models/nets/elmo.py): the released "original" model's shapes and parameter
count (AllenNLP's model table: Small 13.6M, Medium 28.0M, Original 93.6M, without the softmax, and
options.json's sizes: 2048 character filters of widths 1-7, 2 highway layers, 2 x 4096/512
LSTMs), our projected LSTM against torch.nn.LSTM(proj_size) on the same weights, the backward
direction as a forward LSTM over each sentence reversed, and padding that changes nothing."""

import pytest
import torch

from bench.compose import compose_config
from datamodules.characters import char_ids
from lit_models.families.bilm import elmo_config
from lit_models.nets.char_cnn import CharCNN
from lit_models.nets.elmo import ElmoConfig, ElmoEncoder, ElmoLanguageModel
from lit_models.nets.lstm import ProjectedLSTM, TorchLSTM, reverse_padded


def preset(name: str, **changes) -> ElmoConfig:
    model = compose_config([f"model={name}"], "fix the preset").model
    return elmo_config({**model, **changes}, vocab_size=1000, pad_token_id=0)


def parameters(config: ElmoConfig) -> int:
    with torch.device("meta"):  # shapes only: nothing allocated
        return sum(p.numel() for p in ElmoEncoder(config).parameters())


def test_elmo_original_has_the_released_models_shapes_and_93_6m_parameters():
    config = preset("elmo-original")
    with torch.device("meta"):
        encoder = ElmoEncoder(config)
    cnn = encoder.token_encoder
    assert cnn.embedding.weight.shape == (262, 16)
    assert [(c.kernel_size[0], c.out_channels, c.in_channels) for c in cnn.convolutions] == [
        (1, 32, 16), (2, 32, 16), (3, 64, 16), (4, 128, 16), (5, 256, 16), (6, 512, 16),
        (7, 1024, 16)]
    assert [h.projection.weight.shape for h in cnn.highways] == [(4096, 2048)] * 2
    assert cnn.projection.weight.shape == (512, 2048)
    for layers in (encoder.forward_layers, encoder.backward_layers):
        assert len(layers) == 2
        for lstm in layers:
            assert lstm.input_linearity.weight.shape == (16384, 512)
            assert lstm.state_linearity.weight.shape == (16384, 512)
            assert lstm.state_linearity.bias.shape == (16384,)
            assert lstm.state_projection.weight.shape == (512, 4096)
    # token encoder 18,037,856 + four LSTMs of 18,890,752: AllenNLP's "93.6M"
    assert parameters(config) == 93_600_864


@pytest.mark.parametrize(("name", "changes", "millions"), [
    ("elmo-small", {}, 13.6),  # elmo_2x1024_128_2048cnn_1xhighway
    ("elmo-original", {"num_highway": 1, "projection_dim": 256, "cell_dim": 2048}, 28.0),
])
def test_the_released_smaller_sizes_have_their_parameter_counts(name, changes, millions):
    assert round(parameters(preset(name, **changes)) / 1e6, 1) == millions


def test_the_softmax_is_one_for_both_directions():
    config = ElmoConfig(vocab_size=50, char_filters=((1, 4), (2, 4)), num_highway=1,
                        projection_dim=8, cell_dim=16)
    net = ElmoLanguageModel(config)
    assert sum(p.numel() for p in net.parameters()) == (
        sum(p.numel() for p in net.encoder.parameters()) + 50 * 8 + 50)


def test_the_projected_lstm_computes_what_torch_lstm_does():
    torch.manual_seed(0)
    ours = ProjectedLSTM(6, 10, 4)  # no clipping
    for p in ours.parameters():
        torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(3, 7, 6)
    assert (ours(x) - TorchLSTM(ours)(x)).abs().max() < 1e-5


def test_clipping_bounds_the_state():
    torch.manual_seed(0)
    lstm = ProjectedLSTM(6, 10, 4, cell_clip=0.5, proj_clip=0.1)
    for p in lstm.parameters():
        torch.nn.init.normal_(p, std=3.0)
    assert lstm(torch.randn(2, 5, 6)).abs().max() <= 0.1


def test_reverse_padded_reverses_each_row_within_its_length():
    x = torch.arange(8.0).reshape(2, 4, 1)
    out = reverse_padded(x, torch.tensor([4, 2]))
    assert out[..., 0].tolist() == [[3, 2, 1, 0], [5, 4, 6, 7]]
    assert torch.equal(reverse_padded(out, torch.tensor([4, 2])), x)


def test_padding_changes_no_layer_and_the_backward_lm_reads_right_to_left():
    torch.manual_seed(0)
    config = ElmoConfig(vocab_size=30, char_filters=((1, 4), (2, 4)), num_highway=1,
                        projection_dim=8, cell_dim=16, dropout=0.0)
    net = ElmoEncoder(config).eval()
    chars = torch.randint(1, 262, (1, 5, 50))
    padded = torch.cat([chars, torch.zeros(1, 3, 50, dtype=torch.long)], dim=1)
    with torch.no_grad():
        alone, within = net(chars), net(padded)
        assert (alone.layers - within.layers[:, :, :5]).abs().max() < 1e-5
        assert within.layers[:, :, 5:].abs().max() == 0
        # the backward stack at word 0 has read the whole sentence: changing the last word
        # changes it, while the forward stack at word 0 does not see it
        changed = chars.clone()
        changed[0, -1] = torch.randint(1, 262, (50,))
        other = net(changed)
        assert torch.equal(other.forward[:, 0], alone.forward[:, 0])
        assert not torch.allclose(other.backward[:, 0], alone.backward[:, 0])


def indexed_lstm(lstm: ProjectedLSTM, x: torch.Tensor) -> torch.Tensor:
    """The layer as it was computed before: the input projection read as ``inputs[:, t]``."""
    inputs = lstm.input_linearity(x)
    h, c = x.new_zeros(x.shape[0], lstm.proj_size), x.new_zeros(x.shape[0], lstm.cell_size)
    outputs = []
    for t in range(x.shape[1]):
        i, f, g, o = (inputs[:, t] + lstm.state_linearity(h)).chunk(4, dim=-1)
        c = (torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)).clamp(-lstm.cell_clip,
                                                                           lstm.cell_clip)
        h = lstm.state_projection(torch.sigmoid(o) * torch.tanh(c)).clamp(-lstm.proj_clip,
                                                                          lstm.proj_clip)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def graph_nodes(tensor: torch.Tensor) -> list[str]:
    seen, todo = set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo += [next_node for next_node, _ in node.next_functions]
    return [type(node).__name__ for node in seen]


def test_the_lstm_reads_each_step_once_with_the_same_outputs_and_gradients():
    torch.manual_seed(0)
    lstm = ProjectedLSTM(6, 10, 4, cell_clip=3.0, proj_clip=3.0)
    x = torch.randn(3, 9, 6, requires_grad=True)
    weights = torch.randn(3, 9, 4)
    results = []
    for run in (lstm, lambda x: indexed_lstm(lstm, x)):
        out = run(x)
        grads = torch.autograd.grad((out * weights).sum(), [x, *lstm.parameters()])
        results.append((out, grads))
    (ours, our_grads), (old, old_grads) = results
    assert (ours - old).abs().max() <= 1e-6
    for a, b in zip(our_grads, old_grads, strict=True):
        assert (a - b).abs().max() <= 1e-6
    # one unbind of the projected inputs, no per-step select whose backward fills [B, T, 4H]
    names = graph_nodes(lstm(x))
    assert names.count("UnbindBackward0") == 1 and "SelectBackward0" not in names


def every_word_cnn(cnn: CharCNN, char_ids: torch.Tensor) -> torch.Tensor:
    """The character CNN as it was computed before: every word position, all 50 characters."""
    batch, length, chars = char_ids.shape
    x = cnn.embedding(char_ids.reshape(batch * length, chars).long()).transpose(1, 2)
    y = torch.relu(torch.cat([conv(x).amax(dim=-1) for conv in cnn.convolutions], dim=-1))
    for highway in cnn.highways:
        y = highway(y)
    return cnn.projection(y).reshape(batch, length, -1)


def test_the_char_cnn_encodes_real_words_on_their_spelled_characters_only():
    torch.manual_seed(0)
    cnn = CharCNN(262, 4, ((1, 3), (3, 5), (7, 4)), 1, 6).double()  # sums in any order
    words = [["<S>", "a", "word", "</S>"], ["<S>", "longer", "words", "here", "</S>"], ["<S>"]]
    spelled = torch.zeros(3, 5, 50, dtype=torch.long)
    for row, sentence in enumerate(words):
        spelled[row, : len(sentence)] = torch.from_numpy(char_ids(sentence))
    mask = spelled.any(dim=-1)
    assert cnn.spelled_width(spelled[mask]) == len("longer") + 2 + 7  # markers, widest filter
    grads = []
    for run in (cnn, lambda c: every_word_cnn(cnn, c)):
        out = run(spelled)
        grads.append((out, torch.autograd.grad((out * mask[..., None]).square().sum(),
                                               list(cnn.parameters()))))
    (ours, our_grads), (old, old_grads) = grads
    assert (ours - old)[mask].abs().max() <= 1e-6 and ours[~mask].abs().max() == 0
    for a, b in zip(our_grads, old_grads, strict=True):
        assert (a - b).abs().max() <= 1e-6
    # a word that fills all 50 characters is read whole
    full = torch.arange(1, 51).reshape(1, 1, 50)
    assert cnn.spelled_width(full[0]) == 50
    assert (cnn(full) - every_word_cnn(cnn, full)).abs().max() <= 1e-6


def test_elmo_layers_are_unchanged_by_the_real_word_cnn():
    torch.manual_seed(0)
    config = ElmoConfig(vocab_size=30, char_filters=((1, 4), (2, 4), (5, 3)), num_highway=1,
                        projection_dim=8, cell_dim=16, dropout=0.0)
    net = ElmoEncoder(config)
    chars = torch.zeros(2, 6, 50, dtype=torch.long)
    chars[0, :6] = torch.from_numpy(char_ids(["<S>", "one", "two", "three", "four", "</S>"]))
    chars[1, :3] = torch.from_numpy(char_ids(["<S>", "five", "</S>"]))
    mask = chars.any(dim=-1)
    ours = net(chars).layers
    tokens = every_word_cnn(net.token_encoder, chars) * mask[..., None]
    assert (ours[0] - torch.cat([tokens, tokens], dim=-1)).abs().max() <= 1e-6
