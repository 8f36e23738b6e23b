"""``plmbench claims experiment=claims_small``: the literature's claims a harness can test, each
as a paired comparison under one budget, run and reported.

A claim is configuration (``conf/claims/<id>.yaml``, listed by ``conf/experiment/_claims.yaml``):
the claim in our words and its paper, the board whose rows are its arms A and B (row labels), the
test, and the study entries (``study.runs``) that make the arms. The command runs those entries
and the ones they start from with ``plmbench study``'s machinery (``bench/studies/study.py``: in
order, each run with its record, a re-run skipping what finished), then compares B with A on the
board's score by ``bench/boards/significance.py`` (the paired bootstrap over examples and seeds, and
the almost stochastic order test) and gives a verdict at this scale, in this order:

- ``not run``: a row of the claim is not on the board (its runs did not finish);
- ``no evidence``: a row has not learned its task, its score not above the task's trivial
  baseline by more than its interval (``bench/boards/trivial.py``: two rows predicting the majority
  class differ by exactly 0, which says nothing about the claim);
- otherwise the claim's test, one two-sided p-value per claim, adjusted for the other claims of
  the report (Holm by default, ``study.correction``; ``bench/boards/corrections.py``) and read at
  ALPHA = 0.05:
  - ``greater`` (B beats A), null B - A = 0: supported where the adjusted p < ALPHA and B - A > 0,
    contradicted where p < ALPHA and B - A < 0, else inconclusive; ``less`` the other way round;
  - ``not_worse`` (B not worse than A by more than ``margin`` points, or ``margin_share`` of A's
    score), null B - A = -margin: supported where p < ALPHA and B - A > -margin (the interval
    clears the margin), contradicted where p < ALPHA and B - A < -margin (worse by more than
    the margin), else inconclusive: the non-inferiority reading of the CONSORT extension
    (Piaggio et al. 2012, JAMA 308(24), Figure 2), where B significantly worse but within the
    margin is still non-inferior. ``fewer_parameters`` adds that B must be smaller (else
    contradicted, with no test).

Every verdict shows its minimum detectable effect (``bench/boards/stats.py``: the |B - A| its test
finds with 80% power at ALPHA, from the standard error at the report's examples and seeds), so an
inconclusive claim at an MDE of 6 points reads apart from one at 0.5, and every
non-inferiority claim its margin.

A claim with ``gpu: {command, hours}`` is decided on a GPU (released base encoders fine-tuned on
GLUE: ModernBERT against DeBERTa-v3, the gain of starting RTE, MRPC and STS-B from MNLI): at CPU
size (``trainer.accelerator`` cpu: claims_tiny, claims_cpu) its runs are not made and it reads
``no evidence``, its cost the estimated GPU-hours, its detail the command that decides it.

A claim of ``kind: parameters`` trains nothing: each preset's encoder is built on the meta device
and its parameters counted against the published ``counts`` (within ``tolerance``): an exact
count, its verdict no test and outside the correction; the report shows the largest gap. The report,
``<results_dir>/claims.md`` and ``claims.html``, gives per claim its paper, the two arms, the effect
with its interval, the verdict, a sentence reading it generated from those numbers (``reading``)
and the cost (training FLOPs and wall time of every run behind the two arms: pretraining and
every ``ckpt:`` start included; FLOPs "–" where no run recorded them, a lower bound "≥" naming how
many did not where some did).

A claim decides on the dev splits: its test reads the board's scoring columns of every split but
the test splits, whose comparison is shown apart, below it, and never moves the verdict.
"""

from __future__ import annotations

import html
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from omegaconf import OmegaConf

from bench.boards.config import Column, get_board
from bench.boards.corrections import DEFAULT, NAMES, adjust
from bench.boards.rows import Row
from bench.boards.significance import Line, compare, find_rows, mde_text, render
from bench.boards.stats import ALPHA, POWER
from bench.boards.tables import tables_of
from bench.boards.trivial import Learned, learned
from bench.record import Record, Unused, read_record, records_in
from bench.studies.study import composed, run_study
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.init_from import InitFrom

TESTS = ("greater", "less", "not_worse")
VERDICTS = ("supported", "contradicted", "inconclusive", "no evidence", "not run")


@dataclass
class Result:
    """One claim's outcome: its verdict, the effect B - A and what the report shows of it;
    ``p`` the two-sided p-value of the claim's null (B - A = ``null``), ``p_adjusted`` that
    adjusted for the report's other claims."""

    id: str
    spec: dict
    verdict: str
    effect: Line | None = None
    lines: list[Line] = field(default_factory=list)
    cost: dict = field(default_factory=dict)
    detail: str = ""
    learned: list[Learned] = field(default_factory=list)
    null: float = 0.0
    p: float | None = None
    p_adjusted: float | None = None
    smaller: bool = True  # B has fewer parameters than A (what fewer_parameters asks)
    evidence: tuple[str, str, str] | None = None  # A, B and effect cells of a parameter count


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
        gpu = spec.get("gpu")
        if gpu is not None and not (isinstance(gpu, Mapping) and isinstance(gpu.get("command"), str)
                                    and isinstance(gpu.get("hours"), int | float)):
            raise PlmbenchError(f"claims.{name}.gpu: give its command (the GPU study that decides "
                                "it) and hours (estimated), e.g. {command: 'plmbench claims ...', "
                                "hours: 0.5}")
        if spec.get("kind") == "parameters":
            continue
        missing = [k for k in ("board", "a", "b", "test", "runs") if k not in spec]
        if missing or spec["test"] not in TESTS:
            wrong = missing or "test"
            raise PlmbenchError(f"claims.{name}: needs board, a, b, test (one of "
                                f"{', '.join(TESTS)}) and runs; missing or wrong: {wrong}")
    return claims


def margin(spec: Mapping, a_score: float) -> float:
    """A non-inferiority claim's margin in points: ``margin`` plus ``margin_share`` of A's
    score."""
    return float(spec.get("margin") or 0.0) + float(spec.get("margin_share") or 0.0) * abs(a_score)


def null_of(spec: Mapping, a_score: float) -> float:
    """B - A under the claim's null hypothesis: -margin for ``not_worse``, else 0."""
    return -margin(spec, a_score) if spec.get("test") == "not_worse" else 0.0


def stated_test(spec: Mapping, a_score: float | None = None) -> str:
    """The claim's test in words, a non-inferiority claim with its margin."""
    if spec.get("kind") == "parameters":
        return f"each count within {spec.get('tolerance', 0.03):.0%} of the published"
    if spec["test"] != "not_worse":
        return "B > A" if spec["test"] == "greater" else "B < A"
    share, fixed = spec.get("margin_share"), float(spec.get("margin") or 0.0)
    parts = ([f"{fixed:g} point{'s' * (fixed != 1)}"] if fixed else []) + (
        [f"{share:.0%} of A's score"] if share else [])
    shown = " + ".join(parts) or "0 points"
    if share and a_score is not None:
        shown = f"{margin(spec, a_score):.2f} points ({shown})"
    smaller = ", with fewer parameters" if spec.get("fewer_parameters") else ""
    return f"B not worse than A by more than {shown}{smaller}"


def verdict(spec: Mapping, effect: Line, p: float | None, smaller: bool = True,
            alpha: float = ALPHA) -> str:
    """The claim's verdict from the p-value of its null (adjusted for the other claims) and
    the direction of B - A against the null (module docstring)."""
    if spec.get("fewer_parameters") and not smaller:
        return "contradicted"
    if effect.test is None or p is None or not p < alpha:
        return "inconclusive"
    above = effect.test.value > null_of(spec, effect.a)
    if spec["test"] == "less":
        above = not above
    return "supported" if above else "contradicted"


def _sources(record: Record) -> list[str]:
    """The runs a record's model came from: its pretraining chain and its ``ckpt:`` start (a
    pruning run's fine-tuned model, an importance run's)."""
    found = list(record.pretraining.runs) if record.pretraining else []
    try:
        start = InitFrom.parse(record.init_from).run_dir()
    except PlmbenchError:
        start = None
    return found + ([str(start)] if start is not None else [])


def _cost(rows: tuple[Row, Row]) -> dict:
    """Training FLOPs and wall time of every run behind the two rows: theirs and, transitively,
    the runs their models came from (pretraining, ``ckpt:`` starts), each counted once; the
    FLOPs of those that recorded them, and how many did not (a cost unknown is no 0)."""
    runs: dict[str, Record] = {}
    todo = [record for row in rows for records in row.records.values() for record in records]
    while todo:
        record = todo.pop()
        key = str(record.run_dir)
        if key in runs:
            continue
        runs[key] = record
        todo += [Record.from_json(found) for source in _sources(record)
                 if source not in runs and (found := read_record(source)) is not None]
    flops = [r.at("throughput.train_flops") for r in runs.values()]
    seconds = sum(r.wall_time_s or 0 for r in runs.values())
    return {"runs": len(runs), "wall_time_s": seconds, "flops": sum(f or 0 for f in flops),
            "unrecorded": sum(f is None for f in flops)}


def _parameters(claim_id: str, spec: Mapping) -> Result:
    counted = {preset: preset_parameters(preset) for preset in spec["counts"]}
    off = {p: n for p, n in counted.items()
           if abs(n - spec["counts"][p]) > spec.get("tolerance", 0.03) * spec["counts"][p]}
    lines = [f"| {p} | {spec['counts'][p] / 1e6:.0f}M | {n / 1e6:.1f}M | "
             f"{'no' if p in off else 'yes'} |" for p, n in counted.items()]
    detail = "\n".join(["| preset | published | counted | within tolerance |",
                        "|:--|--:|--:|:--|", *lines])
    worst = max(counted, key=lambda p: abs(counted[p] / spec["counts"][p] - 1))
    gap = (f"{worst}: {counted[worst] / 1e6:.1f}M for {spec['counts'][worst] / 1e6:.0f}M "
           f"({counted[worst] / spec['counts'][worst] - 1:+.1%}), the largest gap")
    evidence = (f"published counts of {len(counted)} presets",
                "the presets counted (meta device)", gap)
    return Result(claim_id, dict(spec), "contradicted" if off else "supported", detail=detail,
                  evidence=evidence)


def on_cpu(cfg) -> bool:
    """Whether the composed claims study trains on CPU (claims_tiny, claims_cpu): where a GPU
    claim (``gpu:`` in its YAML) is not run."""
    trainer = cfg.get("trainer") or {}
    return trainer.get("accelerator") == "cpu"


def gpu_only(spec: Mapping, cpu: bool) -> bool:
    """Whether the claim is one a GPU decides (released base encoders fine-tuned on GLUE) and
    the report is made at CPU size: its runs are not made and it reads "no evidence"."""
    return cpu and spec.get("gpu") is not None


def _not_at_this_size(claim_id: str, spec: Mapping) -> Result:
    gpu = spec["gpu"]
    detail = (f"A GPU claim, not run at CPU size: its arms are released base encoders "
              f"fine-tuned on GLUE, about {gpu['hours']:g} GPU-hours (estimated). Decide it "
              f"with: {gpu['command']}")
    return Result(claim_id, dict(spec), "no evidence", detail=detail,
                  cost={"gpu_hours": gpu["hours"]})


def evaluate(claim_id: str, spec: Mapping, records: list[Record], resamples: int,
             aso_iterations: int, correction: str = DEFAULT, cpu: bool = False) -> Result:
    """One claim's result from the study's records (or, for a parameter count, the presets),
    its verdict pending the correction (``decide``) where it has a test; a GPU claim at CPU
    size (``cpu``) reads "no evidence", with its command and estimated hours."""
    if spec.get("kind") == "parameters":
        return _parameters(claim_id, spec)
    if gpu_only(spec, cpu):
        return _not_at_this_size(claim_id, spec)
    board = get_board(spec["board"]).with_aggregate(spec.get("aggregate"))
    try:
        table, *rows = find_rows(tables_of(records, board), spec["a"]["label"],
                                 spec["b"]["label"])
    except PlmbenchError as err:
        return Result(claim_id, dict(spec), "not run", detail=str(err))
    dev, test = _dev_and_test(table.columns)
    lines = compare(*rows, dev, board, resamples, aso_iterations=aso_iterations,
                    correction=correction)
    effect = lines[-1]
    checked = [learned(row, dev, board, resamples,
                       higher_is_better=table.score_higher_is_better) for row in rows]
    a, b = rows
    title = f"{spec['board']} board, {board.score_label}"
    detail = render(lines, spec["a"]["label"], spec["b"]["label"], title, resamples,
                    table.score_higher_is_better, correction=correction)
    if test:  # reported apart: the verdict never reads the test set
        try:
            apart = compare(*rows, test, board, resamples, aso_iterations=0,
                            correction=correction)
            detail += "\n" + render(apart, spec["a"]["label"], spec["b"]["label"],
                                    f"{title} on the test split (reported, not deciding)",
                                    resamples, table.score_higher_is_better,
                                    correction=correction)
        except PlmbenchError:  # the rows share no scored test column
            pass
    result = Result(claim_id, dict(spec), "inconclusive", effect, lines, _cost(rows), detail,
                    checked, null_of(spec, effect.a),
                    smaller=(a.parameters or 0) > (b.parameters or 0))
    if any(check.learned is False for check in checked):
        result.verdict = "no evidence"
    elif effect.test is not None:
        result.p = effect.test.p_against(result.null)
    return result


def _is_test(column: Column) -> bool:
    """Whether a column reads a test split (``metrics.test.f1``, ``metrics.test_matched...``)."""
    parts = column.value.split(".")
    return len(parts) > 2 and parts[0] == "metrics" and parts[1].startswith("test")


def _dev_and_test(columns: Sequence[Column]) -> tuple[list[Column], list[Column]]:
    """The columns a claim decides on (the scoring columns of dev splits; all of them where no
    dev split scores), and those it reports apart (the test splits', scoring; empty where
    there are none or no dev split scores)."""
    if not any(c.score and not _is_test(c) for c in columns):
        return list(columns), []
    dev = [replace(c, score=c.score and not _is_test(c)) for c in columns]
    test = [replace(c, score=c.score and _is_test(c)) for c in columns]
    return dev, test if any(c.score for c in test) else []


def reading(result: Result) -> str:
    """The claim's verdict in one sentence generated from its numbers: B - A, where its interval
    lies against the null (0, or the non-inferiority margin), and the adjusted p against α."""
    test = None if result.effect is None else result.effect.test
    if test is None or result.verdict in ("no evidence", "not run"):
        return ""
    null = result.null
    what = f"the margin {null:+.2f}" if result.spec.get("test") == "not_worse" else "0"
    where = ("lies entirely below" if test.high < null else
             "lies entirely above" if test.low > null else "includes")
    if (exact := test.exact_zero_text()) is not None:
        return f"Reading: B - A is exactly 0 ({exact}): {result.verdict}."
    p = result.p_adjusted
    against = "" if p is None else (f"; p (adjusted) {p:.3f} {'<' if p < ALPHA else '≥'} "
                                    f"α = {ALPHA:.2f}")
    return (f"Reading: B - A = {test.value:+.2f}, its 95% interval [{test.low:+.2f}, "
            f"{test.high:+.2f}] {where} {what}{against}: {result.verdict}.")


def decide(results: Sequence[Result], correction: str = DEFAULT) -> None:
    """Adjust the p-values of the claims that were tested for each other and give each its
    verdict (module docstring)."""
    tested = [r for r in results if r.p is not None]
    for result, p in zip(tested, adjust([r.p for r in tested], correction), strict=True):
        result.p_adjusted = p
        result.verdict = verdict(result.spec, result.effect, p, result.smaller)
    for result in results:
        if result.p is None and result.effect is not None and result.verdict == "inconclusive":
            result.verdict = verdict(result.spec, result.effect, None, result.smaller)


def _effect_text(result: Result) -> str:
    if result.evidence is not None:
        return result.evidence[2]
    if result.effect is None:
        return "–"
    test = result.effect.test
    if test is None:
        return f"{result.effect.b - result.effect.a:+.2f} (untested)"
    if (exact := test.exact_zero_text()) is not None:
        return f"+0 exactly ({exact})"
    return f"{test.value:+.2f} [{test.low:+.2f}, {test.high:+.2f}]"


def _p_text(result: Result) -> str:
    if result.p_adjusted is None:
        return "–"
    raw = f" (raw {result.p:.3f})" if result.p_adjusted != result.p else ""
    return f"{result.p_adjusted:.3f}{raw}"


def _cost_text(result: Result) -> str:
    cost = result.cost
    if not cost:
        return "–"
    if "gpu_hours" in cost:
        return f"not run at CPU size: ~{cost['gpu_hours']:g} GPU-hours (estimated)"
    runs, unrecorded = cost["runs"], cost.get("unrecorded", 0)
    flops = ("– FLOPs" if unrecorded == runs else  # unknown, never 0
             f"≥{cost['flops']:.3g} FLOPs ({unrecorded} of {runs} runs unrecorded)" if unrecorded
             else f"{cost['flops']:.3g} FLOPs")
    return f"{flops}, {cost['wall_time_s'] / 3600:.2f} h, {runs} runs"


def _arm(result: Result, side: str) -> str:
    if result.evidence is not None:
        return result.evidence[side == "b"]
    arm = result.spec.get(side)
    return f"{arm['label']}: {arm.get('arm', '')}" if arm else "–"


def summary_rows(results: list[Result]) -> list[list[str]]:
    return [[r.id, r.spec.get("claim", ""), r.spec.get("paper", ""), _arm(r, "a"), _arm(r, "b"),
             stated_test(r.spec, None if r.effect is None else r.effect.a), _effect_text(r),
             _p_text(r), mde_text(None if r.effect is None else r.effect.test), r.verdict,
             _cost_text(r)] for r in results]


HEADER = ["claim", "in our words", "paper", "A", "B", "test", "effect B - A [95% CI]",
          "p (adjusted)", "MDE", "verdict", "cost"]
#: the verdict's column (1-based, for the HTML page's colours)
VERDICT_COLUMN = HEADER.index("verdict") + 1


def _legend(results: Sequence[Result], correction: str) -> str:
    tested = sum(r.p is not None for r in results)
    adjusted = {0: "no claim was tested, so none is adjusted",
                1: f"one claim tested, so {NAMES[correction]} leaves its p as it is"}.get(
        tested, f"adjusted for the {tested} claims tested together by {NAMES[correction]}")
    return (f"Verdicts are at this scale (the budget, examples and seeds of this report; "
            f"bench/studies/claims.py), read at α = {ALPHA:.2f} (two-sided) from each claim's "
            f"p-value, {adjusted}: supported or contradicted where the adjusted p is below α, "
            "by the direction of B - A against the claim's null (0; -margin for a "
            "non-inferiority claim), inconclusive otherwise. No evidence: a row is not above "
            "its task's trivial baseline (the best constant predictor on the same examples) by "
            "more than its interval, so it has not learned the task and the claim is not "
            "tested; or the claim is a GPU claim, not run at CPU size (its cost says the GPU "
            "hours it takes, its detail the command). MDE: the smallest |B - A| the test finds "
            f"with {POWER:.0%} power at α, from its standard error; an inconclusive claim whose "
            "MDE is above the effect the paper reports could not have been decided at this size. "
            "Effects are on each claim's board score.")


def _checks(result: Result) -> list[str]:
    if not result.learned:
        return []
    return ["Against the trivial baseline:", "",
            *(f"- {check.text()}" for check in result.learned), ""]


def render_markdown(results: list[Result], title: str, unused: Sequence[Unused] = (),
                    correction: str = DEFAULT) -> str:
    lines = [f"# {title}", "", "| " + " | ".join(HEADER) + " |",
             "|" + "|".join([":--"] * len(HEADER)) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in summary_rows(results)]
    lines += ["", _legend(results, correction), ""]
    for result, row in zip(results, summary_rows(results), strict=True):
        said = reading(result)
        lines += [f"## {result.id}: {result.verdict}", "", result.spec.get("claim", ""), "",
                  f"Test: {row[5]}; p (adjusted) {row[7]}; MDE {row[8]}.", "",
                  *([said, ""] if said else []), *_checks(result), result.detail, ""]
    if unused:  # records no claim could read: named, not left out in silence
        lines += [f"## Records not used ({len(unused)})", "",
                  *(f"- {u.source}: {u.why}" for u in unused), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_html(results: list[Result], title: str, unused: Sequence[Unused] = (),
                correction: str = DEFAULT) -> str:
    """The report as one self-contained page: the summary table, then each claim's detail."""
    def esc(text: object) -> str:
        return html.escape(str(text), quote=True)

    head = "".join(f"<th>{esc(h)}</th>" for h in HEADER)
    body = "".join(
        f'<tr class="{esc(r.verdict.replace(" ", "-"))}">'
        + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>"
        for r, row in zip(results, summary_rows(results), strict=True))
    details = f"<p>{esc(_legend(results, correction))}</p>" + "".join(
        f"<h2>{esc(r.id)}: {esc(r.verdict)}</h2><p>{esc(r.spec.get('claim', ''))}</p>"
        + (f"<p>{esc(reading(r))}</p>" if reading(r) else "")
        + "".join(f"<p>{esc(line)}</p>" for line in _checks(r) if line)
        + f"<pre>{esc(r.detail)}</pre>" for r in results)
    if unused:
        details += (f'<h2>Records not used ({len(unused)})</h2><ul id="unused">'
                    + "".join(f"<li><code>{esc(u.source)}</code>: {esc(u.why)}</li>"
                              for u in unused) + "</ul>")
    style = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:"
             "collapse}th,td{padding:.3em .6em;border-bottom:1px solid #ddd;vertical-align:top}"
             f"tr.supported td:nth-child({VERDICT_COLUMN}){{color:#1a7f37}}tr.contradicted "
             f"td:nth-child({VERDICT_COLUMN}){{color:#c0392b}}tr.no-evidence "
             f"td:nth-child({VERDICT_COLUMN}){{color:#888}}"
             "pre{background:#f6f6f6;padding:.6em;overflow-x:auto}")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}'
            f'</title><style>{style}</style></head><body><h1>{esc(title)}</h1>'
            f'<table id="claims"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f"{details}</body></html>\n")


def evaluate_all(cfg, results_dir: Path, resamples: int = 1000, aso_iterations: int = 1000
                 ) -> tuple[list[Result], list[Unused], str]:
    """Every claim of ``cfg`` evaluated on the records under ``results_dir``, adjusted for each
    other by ``study.correction``: (results, records not used, the correction's name)."""
    correction = (cfg.get("study") or {}).get("correction") or DEFAULT
    adjust([], correction)  # an unknown correction: one line before any work
    records, unused = records_in(results_dir)
    for record in unused:  # no record leaves the report in silence
        print(f"warning: {record.source}: not used by the claims: {record.why}", file=sys.stderr)
    results = [evaluate(claim_id, spec, records, resamples, aso_iterations, correction,
                        on_cpu(cfg))
               for claim_id, spec in claims_of(cfg).items()]
    decide(results, correction)
    return results, unused, correction


def report(cfg, results_dir: Path, resamples: int = 1000, aso_iterations: int = 1000
           ) -> list[Result]:
    """``evaluate_all``, written to claims.md and claims.html under ``results_dir``."""
    results, unused, correction = evaluate_all(cfg, results_dir, resamples, aso_iterations)
    title = f"Claims of the literature at this scale ({results_dir})"
    atomic_write_text(results_dir / "claims.md",
                      render_markdown(results, title, unused, correction))
    atomic_write_text(results_dir / "claims.html", render_html(results, title, unused, correction))
    return results


#: ``plmbench claims --from-records ...``: report on the records already under results_dir, run
#: nothing and write nothing (how the docs render a committed study's report)
FROM_RECORDS = "--from-records"


def cmd_claims(overrides: list[str]) -> int:
    """``plmbench claims [--from-records] OVERRIDES``: run the claims' arms, then write and print
    the report; with ``--from-records`` only print the report of the records there are."""
    from_records = FROM_RECORDS in overrides
    overrides = [o for o in overrides if o != FROM_RECORDS]
    if from_records:
        cfg = composed(overrides)
        results_dir = Path(cfg.results_dir)
        if not results_dir.is_dir():
            raise PlmbenchError(f"{FROM_RECORDS}: no results directory {results_dir}; run "
                                f"`plmbench claims {' '.join(overrides)}` first or fix "
                                "results_dir")
        results, unused, correction = evaluate_all(cfg, results_dir,
                                                   cfg.study.get("resamples", 1000),
                                                   cfg.study.get("aso_iterations", 1000))
        title = f"Claims of the literature at this scale ({results_dir})"
        print(render_markdown(results, title, unused, correction), end="")
        return 0
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="[%(asctime)s][%(name)s][%(levelname)s] %(message)s")
    cfg = composed(overrides)
    runs = {name for spec in claims_of(cfg).values() if not gpu_only(spec, on_cpu(cfg))
            for name in spec.get("runs") or []}
    cfg = run_study(overrides, select=runs)
    results_dir = Path(cfg.results_dir)
    report(cfg, results_dir, cfg.study.get("resamples", 1000),
           cfg.study.get("aso_iterations", 1000))
    print((results_dir / "claims.md").read_text(encoding="utf-8"))
    print(f"wrote {results_dir / 'claims.md'} and {results_dir / 'claims.html'}")
    return 0
