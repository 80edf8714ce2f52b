"""Self-contained HTML reports: the openb benchmark and a simulation comparison.

A report is one file with inline SVG charts and tables, readable offline and attachable to a
ticket. Numbers in tables are the same ones ``--json`` prints.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from gpusched.report.charts import bar_chart, line_chart
from gpusched.sim.bench import PolicySummary
from gpusched.sim.runs import SimRun

__all__ = ["BENCH_HEADERS", "bench_report", "bench_rows", "simulate_report"]

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1000px;color:#222;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;
border-bottom:1px solid #ddd;padding-bottom:.2rem}
.meta{color:#666;font-size:.9rem}
table{border-collapse:collapse;margin:1rem 0;font-size:.92rem}
th,td{border:1px solid #ddd;padding:.35rem .7rem;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f4f6f8}
tr.best td{background:#eef7ee;font-weight:600}
.chart svg{max-width:100%;height:auto}
.note{color:#555;font-size:.9rem}
"""


def _page(title: str, subtitle: str, body: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p class='meta'>{html.escape(subtitle)} "
        f"&middot; generated {stamp} by gpusched</p>{body}</body></html>"
    )


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], best: int | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    out = [f"<table><thead><tr>{head}</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = " class='best'" if i == best else ""
        cells = "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _write(path: str | Path, title: str, subtitle: str, body: Sequence[str]) -> None:
    Path(path).write_text(_page(title, subtitle, "".join(body)), encoding="utf-8")


_Series = Mapping[str, tuple[Sequence[float], Sequence[float]]]


def _alloc_and_frag_charts(
    alloc: _Series,
    frag: _Series,
    *,
    over: str,
    xlabel: str,
    alloc_ylabel: str,
    xlim: tuple[float, float] | None = None,
) -> list[str]:
    """The GPU allocation (0-100 %) and fragmentation charts both reports draw, ``over`` the
    same x axis."""
    return [
        line_chart(
            alloc,
            title=f"GPU allocation {over}",
            xlabel=xlabel,
            ylabel=alloc_ylabel,
            xlim=xlim,
            ylim=(0, 100),
        ),
        line_chart(
            frag,
            title=f"Fragmentation {over}",
            xlabel=xlabel,
            ylabel="fragmented GPU % of capacity",
            xlim=xlim,
        ),
    ]


BENCH_HEADERS = (
    "policy",
    "allocation %",
    "paper %",
    "Δ",
    "frag % of capacity",
    "paper frag %",
    "s / run",
)


def bench_rows(summaries: Sequence[PolicySummary], paper: Mapping[str, Any]) -> list[list[str]]:
    """One row per policy under :data:`BENCH_HEADERS` (shared by the report and the CLI)."""
    rows = []
    for s in summaries:
        ref = paper.get(s.policy)
        rows.append(
            [
                s.policy,
                f"{s.alloc_mean:.2f} ± {s.alloc_std:.2f}",
                f"{ref.alloc_mean:.2f} ± {ref.alloc_std:.2f}" if ref else "—",
                f"{s.alloc_mean - ref.alloc_mean:+.2f}" if ref else "—",
                f"{s.frag_mean:.2f}",
                f"{ref.frag_mean:.2f}" if ref else "—",
                f"{s.seconds_per_run:.2f}",
            ]
        )
    return rows


def bench_report(
    path: str | Path,
    workload: str,
    summaries: Sequence[PolicySummary],
    paper: Mapping[str, Any],
    seeds: Sequence[int],
) -> None:
    """Write the openb benchmark report to ``path``."""
    best = int(np.argmax([s.alloc_mean for s in summaries])) if summaries else None
    rows = bench_rows(summaries, paper)
    x = list(range(131))
    alloc = {s.policy: (x, list(s.mean_curve("alloc_pct"))) for s in summaries}
    frag_series = {}
    for s in summaries:
        curve = s.mean_curve("frag_pct")
        keep = ~np.isnan(curve)
        frag_series[s.policy] = (list(np.array(x)[keep]), list(curve[keep]))
    names = [s.policy for s in summaries]
    values: dict[str, list[float]] = {"gpusched": [s.alloc_mean for s in summaries]}
    errors: dict[str, list[float]] = {"gpusched": [s.alloc_std for s in summaries]}
    if paper:
        values["FGD authors"] = [paper[n].alloc_mean if n in paper else 0.0 for n in names]
        errors["FGD authors"] = [paper[n].alloc_std if n in paper else 0.0 for n in names]
    lo = min(min(v) for v in values.values() if v) - 3 if summaries else 0
    body = [
        "<h2>GPU allocation at 100% arrived load</h2>",
        "<p class='note'>Mean ± population std over seeds "
        f"{html.escape(_seed_text(seeds))}. The KPI is the share of the cluster's GPU capacity "
        "allocated when the arrived GPU request first reaches 100% of capacity.</p>",
        _table(BENCH_HEADERS, rows, best),
        "<div class='chart'>",
        bar_chart(
            names,
            values,
            errors=errors,
            title="Allocation at 100% arrived",
            ylabel="GPU allocation %",
            ylim=(max(lo, 0), 100),
        ),
        *_alloc_and_frag_charts(
            alloc,
            frag_series,
            over="vs arrived load",
            xlabel="arrived GPU load %",
            alloc_ylabel="allocated %",
            xlim=(0, 130),
        ),
        "</div>",
    ]
    _write(path, f"openb benchmark: {workload}", f"{len(seeds)} seeds", body)


def _seed_text(seeds: Sequence[int]) -> str:
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


_SUMMARY_ROWS = (
    ("jobs_started", "jobs started", "{:.0f}"),
    ("jobs_completed", "jobs completed", "{:.0f}"),
    ("gpu_allocation_pct", "GPU allocation % (requested)", "{:.2f}"),
    ("gpu_held_pct", "GPU held %", "{:.2f}"),
    ("fragmentation_pct", "fragmentation % of capacity", "{:.2f}"),
    ("avg_wait_s", "average wait (s)", "{:,.0f}"),
    ("p95_wait_s", "p95 wait (s)", "{:,.0f}"),
    ("avg_jct_s", "average job completion time (s)", "{:,.0f}"),
    ("seconds", "simulation wall time (s)", "{:.2f}"),
)


def simulate_report(path: str | Path, title: str, runs: Sequence[SimRun]) -> None:
    """Write a side-by-side report of simulated runs to ``path``."""
    headers = ["metric", *[r.policy for r in runs]]
    rows = [
        [label, *[fmt.format(r.summary.get(key, 0)) for r in runs]]
        for key, label, fmt in _SUMMARY_ROWS
    ]
    hours = 3600.0
    alloc = {r.policy: ([t / hours for t in r.series.time], r.series.alloc_pct) for r in runs}
    frag = {r.policy: ([t / hours for t in r.series.frag_time], r.series.frag_pct) for r in runs}
    waits = {}
    for r in runs:
        w = np.sort([rec.wait for rec in r.simulation.records.values() if rec.wait is not None])
        if len(w):
            waits[r.policy] = (list(w / 60.0), list(np.arange(1, len(w) + 1) / len(w) * 100))
    body = [
        "<h2>Summary</h2>",
        _table(headers, rows),
        "<div class='chart'>",
        *_alloc_and_frag_charts(
            alloc,
            frag,
            over="over time",
            xlabel="hours",
            alloc_ylabel="requested GPU % of capacity",
        ),
        line_chart(
            waits,
            title="Queue wait (CDF)",
            xlabel="wait (minutes)",
            ylabel="% of started jobs",
            ylim=(0, 100),
        ),
        "</div>",
    ]
    _write(path, title, ", ".join(r.policy for r in runs), body)
