"""An LSTM layer with a projected, clipped state: ELMo's recurrent unit (Peters et al. 2018,
§3.4: "LSTM units with 4096 dimensions and 512 dimension projections"; the LSTMP of Sak et al.
2014), as the released biLM computes it (``bilm-tf``; AllenNLP's ``LstmCellWithProjection``):

    [i, f, g, o] = W x_t + U h_{t-1} + b          (one bias; gate order i, f, g, o)
    c_t = clip(sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g), cell_clip)
    h_t = clip(P (sigmoid(o) * tanh(c_t)), proj_clip)

W x_t of every step is one matmul before the loop over time, read step by step through one
``unbind`` (indexing ``inputs[:, t]`` at each step would make the backward zero-fill and add a
whole [B, T, 4H] gradient per step: quadratic in T). With the clips off it computes what
``torch.nn.LSTM(proj_size=...)`` computes (weight_ih = W, weight_hh = U, weight_hr = P,
bias_ih + bias_hh = b; tested), which has two biases and no clipping. A backward LSTM is this
layer run over each sequence reversed within its length (``reverse_padded``).
"""

import torch
from torch import nn


class ProjectedLSTM(nn.Module):
    def __init__(self, input_size: int, cell_size: int, proj_size: int,
                 cell_clip: float | None = None, proj_clip: float | None = None) -> None:
        super().__init__()
        self.cell_size, self.proj_size = cell_size, proj_size
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.input_linearity = nn.Linear(input_size, 4 * cell_size, bias=False)  # W
        self.state_linearity = nn.Linear(proj_size, 4 * cell_size)  # U, b
        self.state_projection = nn.Linear(cell_size, proj_size, bias=False)  # P
        with torch.no_grad():  # forget gates start open (as the released model's trainer)
            self.state_linearity.bias.zero_()
            self.state_linearity.bias[cell_size : 2 * cell_size].fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, input_size] -> h [B, T, proj_size] (positions past a row's length are
        computed and ignored: padding comes last)."""
        inputs = self.input_linearity(x)
        h = x.new_zeros(x.shape[0], self.proj_size)
        c = x.new_zeros(x.shape[0], self.cell_size)
        outputs = []
        for step in inputs.unbind(1):
            i, f, g, o = (step + self.state_linearity(h)).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            if self.cell_clip is not None:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = self.state_projection(torch.sigmoid(o) * torch.tanh(c))
            if self.proj_clip is not None:
                h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
        return torch.stack(outputs, dim=1)


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each row of ``x`` [B, T, ...] reversed within its first ``lengths[b]`` positions (the
    padding stays last); its own inverse."""
    positions = torch.arange(x.shape[1], device=x.device)
    index = lengths[:, None] - 1 - positions[None, :]
    index = torch.where(index >= 0, index, positions[None, :])  # padding stays in place
    index = index.reshape(*index.shape, *([1] * (x.ndim - 2))).expand_as(x)
    return x.gather(1, index)


class TorchLSTM(nn.Module):
    """``torch.nn.LSTM(proj_size=...)`` (cuDNN on GPU) holding a ``ProjectedLSTM``'s weights: the
    same layer without the clips, called as one (x -> h). The reference ``plmbench perf`` times
    ELMo's biLM against, and the check of the equations above."""

    def __init__(self, layer: ProjectedLSTM) -> None:
        super().__init__()
        input_size = layer.input_linearity.in_features
        self.lstm = nn.LSTM(input_size, layer.cell_size, batch_first=True,
                            proj_size=layer.proj_size)
        with torch.no_grad():
            self.lstm.weight_ih_l0.copy_(layer.input_linearity.weight)
            self.lstm.weight_hh_l0.copy_(layer.state_linearity.weight)
            self.lstm.bias_ih_l0.copy_(layer.state_linearity.bias)
            self.lstm.bias_hh_l0.zero_()
            self.lstm.weight_hr_l0.copy_(layer.state_projection.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]
