"""Batched generation: greedy search and beam search over an encoder-decoder (cross-attention
keys/values computed once) or a decoder-only model continuing a left-padded prompt, with a
key/value cache for the decoder's self-attention.

Beam search (Graves 2012; Sutskever et al. 2014, §3.2) keeps the ``num_beams`` best prefixes of
every example by summed log-probability; a hypothesis that emits the end token is finished and
scored with the length penalty of Wu et al. 2016 ("Google's Neural Machine Translation System",
§7, simplified as in fairseq and transformers): score = sum log p / |y| ** length_penalty, |y|
the generated tokens, so length_penalty > 0 favours longer outputs. Constraints on the next-token
distribution: ``min_new_tokens`` forbids the end token before that many tokens (as in Lewis et
al. 2020, §5 for CNN/DailyMail), ``no_repeat_ngram_size`` n forbids any n-gram twice (Paulus et
al. 2018, "A Deep Reinforced Model for Abstractive Summarization", §2.5).

The search follows transformers' vectorised beam search step for step, so on the same model and
settings it returns the same ids: each step keeps the top 2 x num_beams continuations (enough to
leave num_beams unfinished ones when some end), the best unfinished ones go on, the top
num_beams that ended join the finished pool, and a batch item stops when it is full and
``early_stopping`` is True, or when no running beam can beat its worst finished one
(``early_stopping`` False: judged at the current length; "never": at the longest length when
length_penalty > 0, the exact criterion).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.errors import PlmbenchError
from lit_models.nets.attention import LayerCache

#: the score of a continuation that must never be chosen (finite, so sums stay comparable)
NEVER = -1.0e9


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 64  # generated tokens at most, the end token included
    min_new_tokens: int = 0  # no end token before this many
    num_beams: int = 1  # 1 = greedy search
    length_penalty: float = 1.0  # finished beams score sum log p / length ** length_penalty
    no_repeat_ngram_size: int = 0  # 0 = off; n: no n-gram occurs twice
    early_stopping: bool | str = False  # True | False | "never" (see the module docstring)
    use_cache: bool = True  # keys/values of past positions kept, not recomputed

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.num_beams < 1:
            raise PlmbenchError(
                f"generation needs max_new_tokens >= 1 and num_beams >= 1, got "
                f"{self.max_new_tokens} and {self.num_beams}; fix task.generation"
            )
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise PlmbenchError(f"min_new_tokens={self.min_new_tokens} must lie in 0.."
                                f"max_new_tokens={self.max_new_tokens}; fix task.generation")
        if self.early_stopping not in (True, False, "never"):
            raise PlmbenchError(f"early_stopping={self.early_stopping!r}: use true, false or "
                                "never in task.generation")


class Decoding:
    """One generation's model side: ``prompt`` [R, P] (R = examples x ``copies`` rows), the
    float32 logits of the token after a sequence that extends it, and with ``use_cache`` one
    ``LayerCache`` per decoder layer, so each step feeds only the newest token."""

    prompt: Tensor
    caches: list[LayerCache] | None

    def next_logits(self, sequences: Tensor) -> Tensor:
        """Float32 logits [R, V] of the token after ``sequences`` [R, T]."""
        raise NotImplementedError

    def new_tokens(self, sequences: Tensor) -> Tensor:
        """What the net has not seen yet: all of ``sequences`` without a cache."""
        if self.caches is None:
            return sequences
        return sequences[:, self.caches[0].self_attention.length:]

    def reorder(self, rows: Tensor) -> None:
        """Row r of the self-attention caches becomes row ``rows[r]``. Beams only move within
        their example, so what every row of an example shares (the encoder's cross-attention
        keys/values, the prompt's mask) stays as it is."""
        for cache in self.caches or ():
            kv = cache.self_attention
            kv.k, kv.v = kv.k.index_select(0, rows), kv.v.index_select(0, rows)


class Seq2SeqDecoding(Decoding):
    """An encoder-decoder: the encoder output computed once (repeated for ``copies`` rows per
    example) and the decoder start token as prompt."""

    def __init__(self, net: nn.Module, input_ids: Tensor, attention_mask: Tensor | None,
                 copies: int, use_cache: bool):
        self.net = net
        self.memory = net.encode(input_ids, attention_mask).repeat_interleave(copies, 0)
        self.mask = None if attention_mask is None else attention_mask.repeat_interleave(copies, 0)
        self.caches = net.new_caches() if use_cache else None
        rows = input_ids.shape[0] * copies
        self.prompt = input_ids.new_full((rows, 1), net.config.decoder_start_token_id)

    def next_logits(self, sequences: Tensor) -> Tensor:
        hidden = self.net.decode(self.new_tokens(sequences), self.memory, self.mask, self.caches)
        return self.net.logits(hidden[:, -1]).float()


class CausalDecoding(Decoding):
    """A decoder-only model continuing its left-padded prompt (``input_ids``). Position ids
    count the non-pad tokens, as transformers' ``generate`` numbers them: a prompt's first real
    token is position 0 (its pads 0 too), each generated token one more than the last."""

    def __init__(self, net: nn.Module, input_ids: Tensor, attention_mask: Tensor, copies: int,
                 use_cache: bool):
        if bool((attention_mask[:, -1] == 0).any()):
            raise ValueError("a decoder-only prompt must be left-padded: its last token is a pad")
        self.net = net
        self.prompt = input_ids.repeat_interleave(copies, 0)
        self.mask = attention_mask.repeat_interleave(copies, 0)
        self.caches = net.new_caches() if use_cache else None

    def next_logits(self, sequences: Tensor) -> Tensor:
        generated = sequences.shape[1] - self.mask.shape[1]
        mask = torch.cat([self.mask, self.mask.new_ones(len(sequences), generated)], 1)
        positions = (mask.cumsum(1) - 1).masked_fill(mask == 0, 0)
        new = self.new_tokens(sequences)
        hidden = self.net(input_ids=new, attention_mask=mask,
                          position_ids=positions[:, -new.shape[1]:], caches=self.caches)
        return self.net.logits(hidden.last_hidden_state[:, -1]).float()


def constrain_(scores: Tensor, sequences: Tensor, generated: int, cfg: GenerationConfig,
               eos: int) -> Tensor:
    """Set to -inf, in place, the scores [R, V] of the tokens ``cfg`` forbids after
    ``sequences`` [R, T] (``generated`` of them new): the end token before ``min_new_tokens``,
    and every token that would repeat an n-gram of ``no_repeat_ngram_size``."""
    if generated < cfg.min_new_tokens:
        scores[:, eos] = -float("inf")
    n, T = cfg.no_repeat_ngram_size, sequences.shape[1]
    if n and T >= n:  # some n-gram is complete
        windows = sequences.unfold(1, n, 1)  # [R, T - n + 1, n]: every n-gram so far
        prefix = sequences[:, T - n + 1:]  # the n - 1 tokens the next one would extend
        seen = (windows[..., :-1] == prefix[:, None]).all(-1)
        V = scores.shape[1]
        ends = torch.where(seen, windows[..., -1], V)  # V: a column for "nothing banned"
        banned = torch.zeros(scores.shape[0], V + 1, dtype=torch.bool, device=scores.device)
        banned.scatter_(1, ends, True)
        scores.masked_fill_(banned[:, :V], -float("inf"))
    return scores


@torch.no_grad()
def generate(net: nn.Module, input_ids: Tensor, attention_mask: Tensor | None,
             cfg: GenerationConfig) -> Tensor:
    """Generated ids [B, T'] after the prompt (an encoder-decoder's decoder start token; a
    decoder-only model's left-padded ``input_ids``), each row ending at its end token and padded
    after it; T' is the longest row's length."""
    config = net.config
    kind = Seq2SeqDecoding if hasattr(net, "encode") else CausalDecoding
    decoding = kind(net, input_ids, attention_mask, cfg.num_beams, cfg.use_cache)
    if cfg.num_beams == 1:
        out = greedy_search(decoding, cfg, config.eos_token_id, config.pad_token_id)
    else:
        out = beam_search(decoding, cfg, config.eos_token_id, config.pad_token_id)
    return out[:, decoding.prompt.shape[1]:]


def greedy_search(decoding: Decoding, cfg: GenerationConfig, eos: int, pad: int) -> Tensor:
    """The most probable next token, step after step; finished rows are padded. -> [R, T]"""
    sequences = decoding.prompt
    done = torch.zeros(sequences.shape[0], dtype=torch.bool, device=sequences.device)
    for step in range(cfg.max_new_tokens):
        scores = constrain_(decoding.next_logits(sequences), sequences, step, cfg, eos)
        token = scores.argmax(-1).masked_fill(done, pad)
        sequences = torch.cat([sequences, token[:, None]], 1)
        done |= token == eos
        if done.all():
            break
    return sequences


def _gather(x: Tensor, index: Tensor) -> Tensor:
    """x [B, N, ...] -> [B, M, ...] rows ``index`` [B, M] of each batch item."""
    return torch.take_along_dim(x, index.view(*index.shape, *[1] * (x.dim() - 2)), dim=1)


def beam_search(decoding: Decoding, cfg: GenerationConfig, eos: int, pad: int) -> Tensor:
    """The best finished hypothesis of each example (module docstring). -> [B, T]"""
    prompt = decoding.prompt[::cfg.num_beams]
    (B, P), K, device = prompt.shape, cfg.num_beams, prompt.device
    max_length = P + cfg.max_new_tokens
    lp, early = cfg.length_penalty, cfg.early_stopping
    running = torch.full((B, K, max_length), pad, dtype=torch.long, device=device)
    running[:, :, :P] = prompt[:, None]
    finished = running.clone()
    # all beams start equal: only the first may expand at step one, so no duplicates
    running_scores = torch.full((B, K), NEVER, device=device)
    running_scores[:, 0] = 0.0
    finished_scores = torch.full((B, K), NEVER, device=device)
    is_finished = torch.zeros(B, K, dtype=torch.bool, device=device)
    improvable = torch.ones(B, 1, dtype=torch.bool, device=device)
    first_k = torch.arange(2 * K, device=device) < K  # of the 2K candidates, the top K
    offsets = torch.arange(B, device=device)[:, None] * K
    for cur in range(P, max_length):
        flat = running[:, :, :cur].reshape(B * K, cur)
        log_probs = F.log_softmax(decoding.next_logits(flat), dim=-1)
        log_probs = constrain_(log_probs, flat, cur - P, cfg, eos)
        V = log_probs.shape[-1]
        totals = (log_probs.view(B, K, V) + running_scores[..., None]).view(B, K * V)
        scores, index = totals.topk(2 * K)  # [B, 2K] candidates: beam index // V, token % V
        candidates = _gather(running, index // V)
        candidates[:, :, cur] = index % V
        ended = (index % V == eos) | (cur + 1 >= max_length)
        # the K best candidates that did not end run on
        alive = scores + ended * NEVER
        keep = alive.topk(K).indices
        running, running_scores = _gather(candidates, keep), _gather(alive, keep)
        if decoding.caches is not None:
            decoding.reorder((_gather(index // V, keep) + offsets).flatten())
        # those among the top K that ended join the finished pool if they beat its worst
        final = scores / (cur + 1 - P) ** lp
        full = is_finished.all(-1, keepdim=True) & (early is True)
        final = final + (full | ~improvable | ~(ended & first_k)) * NEVER
        pool_scores = torch.cat([finished_scores, final], 1)
        best = pool_scores.topk(K).indices
        finished = _gather(torch.cat([finished, candidates], 1), best)
        finished_scores = _gather(pool_scores, best)
        is_finished = _gather(torch.cat([is_finished, ended & first_k], 1), best)
        # can a running beam still beat the worst finished one?
        length = max_length - P if early == "never" and lp > 0 else cur + 1 - P
        best_running = running_scores[:, :1] / length ** lp
        worst = torch.where(is_finished, finished_scores.min(1, keepdim=True).values, NEVER)
        improvable = improvable & (best_running > worst).any(-1, keepdim=True)
        stop_full = is_finished.all() & (early is True)
        if not improvable.any() or stop_full or ended.all():
            break
    best = finished[:, 0]
    ends = (best[:, P:] == eos).int()
    lengths = torch.where(ends.any(1), ends.argmax(1) + 1, best.shape[1] - P)
    return best[:, :P + int(lengths.max())]
