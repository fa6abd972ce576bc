"""Write a built report as ``summary.md`` (also printed) and a self-contained ``index.html`` (the PNGs
embedded as base64, no external files or scripts).

Both are made from the same sections: a title, some lines of text, tables (header + rows of strings)
and plots.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

from sweep.report.build import Report
from sweep.report.envs import STATUSES


@dataclass
class Section:
    anchor: str
    title: str
    lines: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    plots: list[tuple[str, Path]] = field(default_factory=list)


def _f(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and 0 < abs(value) < 1e-2:
        return f"{value:.2e}"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def _verdict(rep: Report) -> Section:
    return Section("verdict", "Verdict", [rep.verdict])


def _gain(j) -> str:
    s = j.score
    if s.gain is None:
        return "-"
    spread = f" [{s.low:+.3f}, {s.high:+.3f}]" if s.low is not None else ""
    return f"{s.gain:+.3f}{spread}" + (" (tie)" if s.tied else "")


def _leaderboard(rep: Report) -> Section:
    total_steps = sum(t.steps for t in rep.trials)
    total_s = sum(t.wall_s or 0.0 for t in rep.trials)
    unknown = sum(t.wall_s is None for t in rep.trials)
    untimed = f" ({unknown} trial(s) without it: their last step is not in Tune's result.json: lost, cut, or not synced yet)" if unknown else ""
    base = f" (the shared base: {rep.base:.3f})" if rep.base is not None else ""
    what = "held-out pass@1" if rep.use_eval else f"`{rep.metric}` (training reward (eval was off): step 1's rollouts are the base's; no interval)"
    s = Section("leaderboard", "Leaderboard", [
        f"Ranked by the gain of {what} over the base{base}: the mean of each trial's last evals minus the base's (base → last shows both), with a 90% "
        "bootstrap interval over eval tasks; (tie) marks trials within noise of the best gain (#1 is the middle of the learners among them by update size), and a trial that fell below the base comes after "
        "every trial that held or rose. Where trials spent different episodes per step, each is scored at the cheapest finished trial's budget.",
        f"{len(rep.trials)} trials, {total_steps} trial-steps, {total_s:.0f} s of trial wall time{untimed}.",
        *[f"Trial {t.trial_id}: {t.mended}." for t in rep.trials if t.mended],
        *([f"The sweep's leaderboard.json ranks {len(rep.absent)} trial(s) whose folders are not here (deleted or moved): "
           f"{', '.join(rep.absent)}; this report is without them."] if rep.absent else []),
    ])
    s.header = ["#", "trial", *rep.swept_keys, "base → last", "gain [90%]", "verdict", "steps", "restarts", "stopped", "wall s"]
    for i, (t, j) in enumerate(zip(rep.trials, rep.judged), 1):
        stop = f"{t.stop}: {t.error}" if t.error else t.stop
        course = f"{_f(j.evidence.base.pass_at_1 if j.evidence.base else None)} → {_f(j.last)}"
        s.rows.append([str(i), t.trial_id, *[_f(t.config.get(k)) for k in rep.swept_keys], course, _gain(j), j.verdict.label,
                       str(t.steps), str(t.restarts), stop, "-" if t.wall_s is None else f"{t.wall_s:.0f}"])
    return s


def _confirmation(rep: Report) -> Section:
    c = rep.confirmation
    s = Section("confirmation", "Confirmation with fresh seeds")
    if not c:
        s.lines = ["No confirm stage ran (`confirm.top: 0`); `python -m sweep confirm SWEEP` runs one: the top settings again with fresh "
                   "RL seeds over a longer horizon."]
        return s
    seeds = c.get("seeds") or []
    s.lines = [f"The top {len(c['settings'])} settings again with fresh RL seeds {seeds} over {c.get('steps')} steps (the sweep "
               f"`{rep.name}_confirm` beside this one): {'#1 holds' if c.get('holds') else '#1 does not hold'}."]
    s.header = ["sweep rank", *rep.swept_keys, "sweep gain", *[f"seed {seed}" for seed in seeds], "mean", "verdicts"]
    for r in c["settings"]:
        gains = [f"{g:+.3f}" if g is not None else "-" for g in r.get("gains") or []]
        s.rows.append([str(r["original_rank"]), *[_f(r["setting"].get(k)) for k in rep.swept_keys],
                       f"{r['original_gain']:+.3f}" if r.get("original_gain") is not None else "-", *gains,
                       f"{r['mean']:+.3f}" if r.get("mean") is not None else "-", ", ".join(r.get("verdicts") or [])])
    return s


def _verdicts(rep: Report) -> Section:
    s = Section("verdicts", "Why each trial got its verdict",
                ["One label per trial (sweep/verdict/labels.py: the first rule that holds), with the numbers behind it."])
    s.header = ["trial", "verdict", "evidence"]
    s.rows = [[j.trial_id, j.verdict.label, j.verdict.why] for j in rep.judged]
    return s


def _delta(r) -> str:
    spread = f" [{r.low:+.3f}, {r.high:+.3f}]" if r.low is not None else ""
    return f"{r.delta:+.3f}{spread}"


def _envs(rep: Report) -> Section:
    th = rep.thresholds
    last = "the mean of its last evals" if rep.use_eval else "the mean of its last training steps"
    s = Section("envs", "Environments, trial by trial", [
        f"Each trial's pass@1 per env: base → last ({last}), its best point beside it, and the change last − base with a 90% bootstrap "
        f"interval over the env's held-out tasks. Status on base vs last and its noise: REGRESSED if below the base beyond noise by ≥ "
        f"{th.min_delta}; SATURATED if the base ≥ {th.saturated}; FAILING if base and last ≤ {th.failing}; IMPROVED if above the base "
        f"beyond noise by ≥ {th.min_delta}; else FLAT. Signal: share of training steps with the env's variance_per_prompt > {th.no_signal}.",
    ])
    s.header = ["#", "trial", "env", "base → last", "best (step)", "change [90%]", "status", "steps with signal", "mean variance_per_prompt",
                "env errors"]
    for rank, j in enumerate(rep.judged, 1):
        for r in rep.env_tables.get(j.trial_id, []):
            signal = f"{100 * r.signal_frac:.0f}%" if r.signal_frac is not None else "-"
            errors = f"{100 * r.env_error_frac:.0f}%" if r.env_error_frac is not None else "-"
            s.rows.append([str(rank), j.trial_id, r.env, f"{_f(r.base)} → {_f(r.last)}", f"{_f(r.best)} ({r.best_step})", _delta(r), r.status,
                           signal, _f(r.variance_mean), errors])
    if not s.rows:
        s.lines = ["No per-env results (no trial reported a per-env pass@1)."]
    return s


def _sweep_envs(rep: Report) -> Section:
    s = Section("sweep-envs", "Environments across the sweep", [
        "Each env over every trial: how many trials gave it each status, and the share of all their training steps with signal. "
        "No signal: no trial learned from it (no step with signal, or SATURATED or FAILING in every trial)."])
    s.header = ["env", "base", *STATUSES, "steps with signal", "no signal"]
    s.rows = [[e.env, _f(e.base), *[str(e.statuses.get(status, 0)) for status in STATUSES],
               f"{100 * e.signal_frac:.0f}%" if e.signal_frac is not None else "-", "yes" if e.no_signal else ""] for e in rep.envs]
    if not s.rows:
        s.lines = ["No per-env results."]
    return s


def _importance(rep: Report) -> Section:
    imp = rep.importance
    s = Section("importance", "Hyperparameter importance")
    if imp.importances:
        s.lines.append(f"{imp.evaluator} over {imp.complete} finished trials of the Optuna study ({imp.pruned} stopped early are left out).")
        s.header = ["key", "importance"]
        s.rows = [[k, f"{v:.3f}"] for k, v in imp.importances.items()]
    else:
        s.lines.append(f"No importance: {imp.reason}.")
    s.plots = [(t, rep.plots[t]) for t in ("hyperparameter importance", "score vs swept keys") if t in rep.plots]
    return s


def _looked(rep: Report) -> Section:
    s = Section("looked", "Where the sweep looked",
                ["Each numeric swept key's widest stretch with no trial in it (sweep/report/coverage.py: the range's ends count, "
                 "log keys on a log scale). What lies there was not measured: `search.points_to_evaluate` there, or (Optuna) "
                 "`search.startup: spread` in the next sweep, would look."])
    s.header = ["key", "range", "trials", "widest stretch without a trial", "share of the range"]
    for k in rep.looked:
        span = f"{_f(k.gap_low)} to {_f(k.gap_high)}" + (f" ({k.decades:.2f} decades)" if k.decades is not None else "")
        s.rows.append([k.key, f"{_f(k.low)} to {_f(k.high)}" + (" (log)" if k.log else ""), str(k.tried), span, f"{k.share:.0%}"])
    if not s.rows:
        s.lines = ["No numeric swept key (or no saved space) to measure."]
    return s


def _diagnoses(rep: Report) -> Section:
    s = Section("diagnoses", "Environment diagnoses", ["Explicit rules (sweep/report/rules.py) on the winner's environments (#1's rows above), with their numbers."])
    s.header = ["rule", "subject", "finding", "evidence"]
    s.rows = [[d.rule, d.subject, d.finding, d.evidence] for d in rep.diagnoses]
    if not s.rows:
        s.lines.append("No rule fired.")
    return s


def _trajectories(rep: Report) -> Section:
    a = rep.trajectories
    s = Section("trajectories", "Trajectories (eval dumps)", [f"{a.episodes} eval episodes over all trials and eval steps."])
    if a.without_kinds:
        s.lines.append(f"{a.without_kinds} of them come from dumps written before failure kinds were recorded: they count in the "
                       "stop-reason groups (false completion, context overflow, cut turns, environment errors) but not per failed turn.")
    if not a.episodes:
        s.lines = ["No eval dumps (eval was off, or the trials wrote no trajectories)."]
        return s
    s.lines += [f"- {e.env}: {e.episodes} episodes, pass {e.pass_rate:.3f}, {e.avg_turns:.2f} turns, {e.avg_tool_calls:.2f} tool calls on average" for e in a.envs]
    s.header = ["failure group", "episodes", "of which failed", "example", "where"]
    s.rows = [[g.name, str(g.episodes), str(g.failed), g.example, g.where] for g in a.failures]
    return s


def sections(rep: Report) -> list[Section]:
    curves = Section("curves", "Learning curves", [f"Per trial, in its verdict's colour, steps shared: `{rep.metric}` (the dashed line is the "
                                                  "shared base), variance_per_prompt, the update's KL and the KL to the reference (log scales)."],
                     plots=[("learning curves", rep.plots["learning curves"])] if "learning curves" in rep.plots else [])
    return [_verdict(rep), _leaderboard(rep), _confirmation(rep), curves, _verdicts(rep), _envs(rep), _sweep_envs(rep), _importance(rep), _looked(rep), _diagnoses(rep), _trajectories(rep)]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(rep: Report, parts: list[Section]) -> str:
    out = [f"# Sweep report: {rep.name}", "", f"Source: `{rep.uri}`", ""]
    for s in parts:
        out += [f"## {s.title}", "", *s.lines, ""]
        if s.header:
            out += ["| " + " | ".join(s.header) + " |", "|" + " --- |" * len(s.header)]
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in s.rows] + [""]
        out += [f"![{title}]({path.name})" for title, path in s.plots] + ([""] if s.plots else [])
    return "\n".join(out)


CSS = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
       "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left;vertical-align:top}"
       "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}code{background:#f6f6f6}")


def _html_section(s: Section) -> str:
    body = [f'<section id="{s.anchor}"><h2>{html.escape(s.title)}</h2>']
    body += [f"<p>{html.escape(line)}</p>" for line in s.lines]
    if s.header:
        body.append(f'<table id="{s.anchor}-table"><tr>' + "".join(f"<th>{html.escape(h)}</th>" for h in s.header) + "</tr>")
        body += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in s.rows]
        body.append("</table>")
    for title, path in s.plots:
        data = base64.b64encode(path.read_bytes()).decode()
        slug = title.replace(" ", "-")
        body.append(f'<figure><img id="plot-{slug}" alt="{html.escape(title)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(title)}</figcaption></figure>')
    return "\n".join(body + ["</section>"])


def to_html(rep: Report, parts: list[Section], status: str = "", script: str = "") -> str:
    """The page; the live page (``sweep.watch.live_page``) adds a ``status`` line under the title and its refresh ``script``."""
    title = f"Sweep report: {rep.name}"
    return "\n".join([
        "<!doctype html>", '<html><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>", *([f'<p id="live-status"><b>{html.escape(status)}</b></p>'] if status else []),
        f"<p>Source: <code>{html.escape(rep.uri)}</code></p>", *[_html_section(s) for s in parts], *([script] if script else []), "</body></html>",
    ])


REPORT_FILES = ("summary.md", "index.html")  # what write_report writes (the plots are build's)


def write_report(rep: Report, out: Path) -> tuple[Path, Path, str]:
    """Write summary.md and index.html under ``out``; returns their paths and the markdown."""
    parts = sections(rep)
    out.mkdir(parents=True, exist_ok=True)
    markdown = to_markdown(rep, parts)
    summary, index = (out / name for name in REPORT_FILES)
    summary.write_text(markdown)
    index.write_text(to_html(rep, parts))
    return summary, index, markdown
