"""``plmbench claims experiment=claims_small``: the literature's claims a harness can test, each
as a paired comparison under one budget, run and reported.

A claim is configuration (``conf/claims/<id>.yaml``, listed by ``conf/experiment/_claims.yaml``):
the claim in our words and its paper, the board whose rows are its arms A and B (row labels), the
test, and the study entries (``study.runs``) that make the arms. The command runs those entries
and the ones they start from with ``plmbench study``'s machinery (``bench/study.py``: in order,
each run with its record, a re-run skipping what finished), then compares B with A on the
board's score by ``bench/significance.py`` (the paired bootstrap over examples and seeds, and the
almost stochastic order test) and gives a verdict at this scale:

- ``greater`` (B beats A): supported when the 95% interval of B - A is above 0, contradicted when
  below, else inconclusive; ``less`` the other way round;
- ``not_worse`` (B at least as good, up to ``margin`` points or ``margin_share`` of A's score):
  contradicted when B is significantly worse (the interval below 0), supported when the interval
  stays above -margin, else inconclusive; ``fewer_parameters`` adds that B must be smaller.

A claim of ``kind: parameters`` trains nothing: each preset's encoder is built on the meta device
and its parameters counted against the published ``counts`` (within ``tolerance``). The report,
``<results_dir>/claims.md`` and ``claims.html``, gives per claim its paper, the two arms, the effect
with its interval, the verdict and the cost (training FLOPs and wall time of every run behind the
two arms, pretraining included).
"""

from __future__ import annotations

import html
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from bench.board_config import get_board
from bench.board_sections import build_tables
from bench.leaderboard import Row
from bench.records import Unused, read_record, read_records
from bench.significance import Line, compare, find_rows, render
from bench.study import composed, run_study
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text

TESTS = ("greater", "less", "not_worse")
VERDICTS = ("supported", "contradicted", "inconclusive")


@dataclass
class Result:
    """One claim's outcome: its verdict, the effect B - A and what the report shows of it."""

    id: str
    spec: dict
    verdict: str
    effect: Line | None = None
    lines: list[Line] = field(default_factory=list)
    cost: dict = field(default_factory=dict)
    detail: str = ""


def preset_parameters(preset: str, *overrides: str) -> int:
    """Parameters of a model preset's encoder (with pooler), built on the meta device."""
    import torch

    from lit_models.archs import get_arch
    from lit_models.core.build import net_config

    model = composed([f"model={preset}", *overrides]).model
    arch = get_arch(model.arch)
    with torch.device("meta"):
        net = arch.encoder(net_config(arch, model, model.vocab_size, 0))
    return sum(p.numel() for p in net.parameters())


def claims_of(cfg) -> dict[str, dict]:
    """The composed config's claims, checked: one line naming a claim's bad key."""
    claims = cfg.get("claims")
    claims = {} if claims is None else OmegaConf.to_container(claims, resolve=True)
    if not claims:
        raise PlmbenchError("this configuration holds no claims: pass experiment=claims_small or "
                            "experiment=claims_tiny (conf/experiment/_claims.yaml)")
    chosen = (cfg.get("study") or {}).get("claims")
    if chosen is not None:
        if unknown := sorted(set(chosen) - set(claims)):
            raise PlmbenchError(f"study.claims names {unknown}, which are no claims; known: "
                                f"{', '.join(claims)}")
        claims = {name: spec for name, spec in claims.items() if name in chosen}
    for name, spec in claims.items():
        if spec.get("kind") == "parameters":
            continue
        missing = [k for k in ("board", "a", "b", "test", "runs") if k not in spec]
        if missing or spec["test"] not in TESTS:
            wrong = missing or "test"
            raise PlmbenchError(f"claims.{name}: needs board, a, b, test (one of "
                                f"{', '.join(TESTS)}) and runs; missing or wrong: {wrong}")
    return claims


def _margin(spec: Mapping, a_score: float) -> float:
    return float(spec.get("margin") or 0.0) + float(spec.get("margin_share") or 0.0) * abs(a_score)


def verdict(spec: Mapping, effect: Line, rows: tuple[Row, Row]) -> str:
    """The claim's verdict from B - A's interval (module docstring)."""
    test = effect.test
    if test is None:
        return "inconclusive"
    if spec["test"] == "greater":
        return "supported" if test.low > 0 else "contradicted" if test.high < 0 else "inconclusive"
    if spec["test"] == "less":
        return "supported" if test.high < 0 else "contradicted" if test.low > 0 else "inconclusive"
    a, b = rows
    if spec.get("fewer_parameters") and (a.parameters or 0) <= (b.parameters or 0):
        return "contradicted"
    if test.high < 0:
        return "contradicted"
    return "supported" if test.low > -_margin(spec, effect.a) else "inconclusive"


def _cost(rows: tuple[Row, Row]) -> dict:
    """Training FLOPs and wall time of every run behind the two rows: theirs and the chain of
    pretraining runs their checkpoints came from, each run counted once."""
    runs: dict[str, Mapping] = {}
    for row in rows:
        for records in row.records.values():
            for record in records:
                runs[str(record.get("run_dir"))] = record
                for source in (record.get("pretraining") or {}).get("runs") or []:
                    if source not in runs and (found := read_record(source)) is not None:
                        runs[source] = found
    flops = sum((r.get("throughput") or {}).get("train_flops") or 0 for r in runs.values())
    seconds = sum(r.get("wall_time_s") or 0 for r in runs.values())
    return {"runs": len(runs), "flops": flops, "wall_time_s": seconds}


def _parameters(claim_id: str, spec: Mapping) -> Result:
    counted = {preset: preset_parameters(preset) for preset in spec["counts"]}
    off = {p: n for p, n in counted.items()
           if abs(n - spec["counts"][p]) > spec.get("tolerance", 0.03) * spec["counts"][p]}
    lines = [f"| {p} | {spec['counts'][p] / 1e6:.0f}M | {n / 1e6:.1f}M | "
             f"{'no' if p in off else 'yes'} |" for p, n in counted.items()]
    detail = "\n".join(["| preset | published | counted | within tolerance |",
                        "|:--|--:|--:|:--|", *lines])
    return Result(claim_id, dict(spec), "contradicted" if off else "supported", detail=detail)


def evaluate(claim_id: str, spec: Mapping, records: list[Mapping], resamples: int,
             aso_iterations: int) -> Result:
    """One claim's result from the study's records (or, for a parameter count, the presets)."""
    if spec.get("kind") == "parameters":
        return _parameters(claim_id, spec)
    board = get_board(spec["board"]).with_aggregate(spec.get("aggregate"))
    try:
        table, *rows = find_rows(build_tables(records, board), spec["a"]["label"],
                                 spec["b"]["label"])
    except PlmbenchError as err:
        return Result(claim_id, dict(spec), "not run", detail=str(err))
    lines = compare(*rows, table.columns, board, resamples, aso_iterations=aso_iterations)
    effect = lines[-1]
    return Result(claim_id, dict(spec), verdict(spec, effect, rows), effect, lines, _cost(rows),
                  render(lines, spec["a"]["label"], spec["b"]["label"],
                         f"{spec['board']} board, {board.score_label}", resamples))


def _effect_text(result: Result) -> str:
    if result.effect is None:
        return "–"
    test = result.effect.test
    if test is None:
        return f"{result.effect.b - result.effect.a:+.2f} (untested)"
    return f"{test.value:+.2f} [{test.low:+.2f}, {test.high:+.2f}]"


def _cost_text(result: Result) -> str:
    cost = result.cost
    if not cost:
        return "–"
    return f"{cost['flops']:.3g} FLOPs, {cost['wall_time_s'] / 3600:.2f} h, {cost['runs']} runs"


def _arm(spec: Mapping, side: str) -> str:
    arm = spec.get(side)
    return f"{arm['label']}: {arm.get('arm', '')}" if arm else "–"


def summary_rows(results: list[Result]) -> list[list[str]]:
    return [[r.id, r.spec.get("claim", ""), r.spec.get("paper", ""), _arm(r.spec, "a"),
             _arm(r.spec, "b"), _effect_text(r), r.verdict, _cost_text(r)] for r in results]


HEADER = ["claim", "in our words", "paper", "A", "B", "effect B - A [95% CI]", "verdict", "cost"]


def render_markdown(results: list[Result], title: str, unused: Sequence[Unused] = ()) -> str:
    lines = [f"# {title}", "", "| " + " | ".join(HEADER) + " |",
             "|" + "|".join([":--"] * len(HEADER)) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in summary_rows(results)]
    lines += ["", "Verdicts are at this scale (the budget and seeds of this report): supported or "
              "contradicted when the 95% interval of B - A says so, inconclusive otherwise "
              "(bench/claims.py). Effects are on each claim's board score.", ""]
    for result in results:
        lines += [f"## {result.id}: {result.verdict}", "", result.spec.get("claim", ""), "",
                  result.detail, ""]
    if unused:  # records no claim could read: named, not left out in silence
        lines += [f"## Records not used ({len(unused)})", "",
                  *(f"- {u.source}: {u.why}" for u in unused), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_html(results: list[Result], title: str, unused: Sequence[Unused] = ()) -> str:
    """The report as one self-contained page: the summary table, then each claim's detail."""
    def esc(text: object) -> str:
        return html.escape(str(text), quote=True)

    head = "".join(f"<th>{esc(h)}</th>" for h in HEADER)
    body = "".join(
        f'<tr class="{esc(r.verdict.replace(" ", "-"))}">'
        + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>"
        for r, row in zip(results, summary_rows(results), strict=True))
    details = "".join(f"<h2>{esc(r.id)}: {esc(r.verdict)}</h2><p>{esc(r.spec.get('claim', ''))}"
                      f"</p><pre>{esc(r.detail)}</pre>" for r in results)
    if unused:
        details += (f'<h2>Records not used ({len(unused)})</h2><ul id="unused">'
                    + "".join(f"<li><code>{esc(u.source)}</code>: {esc(u.why)}</li>"
                              for u in unused) + "</ul>")
    style = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:"
             "collapse}th,td{padding:.3em .6em;border-bottom:1px solid #ddd;vertical-align:top}"
             "tr.supported td:nth-child(7){color:#1a7f37}tr.contradicted td:nth-child(7)"
             "{color:#c0392b}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}'
            f'</title><style>{style}</style></head><body><h1>{esc(title)}</h1>'
            f'<table id="claims"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f"{details}</body></html>\n")


def report(cfg, results_dir: Path, resamples: int = 1000, aso_iterations: int = 1000
           ) -> list[Result]:
    """Evaluate every claim of ``cfg`` on the records under ``results_dir``; write claims.md and
    claims.html there."""
    records, unused = read_records(results_dir)
    for record in unused:  # no record leaves the report in silence
        print(f"warning: {record.source}: not used by the claims: {record.why}", file=sys.stderr)
    results = [evaluate(claim_id, spec, records, resamples, aso_iterations)
               for claim_id, spec in claims_of(cfg).items()]
    title = f"Claims of the literature at this scale ({results_dir})"
    atomic_write_text(results_dir / "claims.md", render_markdown(results, title, unused))
    atomic_write_text(results_dir / "claims.html", render_html(results, title, unused))
    return results


def cmd_claims(overrides: list[str]) -> int:
    """``plmbench claims OVERRIDES``: run the claims' arms, then write and print the report."""
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="[%(asctime)s][%(name)s][%(levelname)s] %(message)s")
    claims = claims_of(composed(overrides))
    runs = {name for spec in claims.values() for name in spec.get("runs") or []}
    cfg = run_study(overrides, select=runs)
    results_dir = Path(cfg.results_dir)
    report(cfg, results_dir, cfg.study.get("resamples", 1000),
           cfg.study.get("aso_iterations", 1000))
    print((results_dir / "claims.md").read_text(encoding="utf-8"))
    print(f"wrote {results_dir / 'claims.md'} and {results_dir / 'claims.html'}")
    return 0
