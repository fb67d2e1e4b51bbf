"""``arpo-eval report DIR``: one self-contained ``report.html`` for a run.

Inline CSS and JS, plots embedded as PNG data URLs, screenshots linked relatively (so the
report works offline next to the run directory) or, with ``embed_images``, inlined as JPEG data
URLs (one movable file). What it shows:

* the run (model, agent, protocol and what it means, trials, step limit) and headline numbers;
* the per-domain table (tasks, scored tasks, mean@k, pass@k, solved, infra errors, not run),
  in-domain / held-out rows with a training task list, the per-domain bar plot and, with a
  trainer log dir, the training curves;
* one row per task (scores per trial, mean, status); clicking a row expands it into each
  trial's steps: the screen the agent saw, its thought and action, what was executed;
* filters by domain and status (pass / partial / fail / infra / not-run). The URL hash sets
  them and opens rows: ``report.html#domain=os&status=fail&task=os-copy-001``.
"""

from __future__ import annotations

import base64
import html
import importlib.resources
import io
import json
import logging
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from arpo_eval.layout import first_screenshot, read_run, read_steps
from arpo_eval.plots import domain_bars, training_curves
from arpo_eval.run import write_summary

log = logging.getLogger(__name__)

PROTOCOL_TEXT = {
    "standard": "standard (OSWorld): at the step limit an ordinary last answer is replaced by "
    "FAIL, so infeasible tasks score 1 and feasible ones 0 when the agent runs out of "
    "turns.",
    "hard": "hard (ARPO's OSWorld Hard): no replacement at the step limit; the last answer is "
    "executed and the evaluator scores the desktop as it is (infeasible tasks score 0 "
    "unless the agent itself said FAIL).",
}
_ACTION = re.compile(r"(?m)^\s*Action:\s*")
_THOUGHT = re.compile(r"^\s*(Thought|Reflection):\s*")


def split_response(text: str) -> tuple[str, str]:
    """``(thought, action)`` of an answer (UI-TARS ``Thought: ... Action: ...``; else no thought).

    >>> split_response("Thought: open it\\nAction: click(start_box='(1,2)')")
    ('open it', "click(start_box='(1,2)')")
    >>> split_response("pyautogui.click(5, 5)")
    ('', 'pyautogui.click(5, 5)')
    """
    text = text or ""
    m = _ACTION.search(text)
    if m is None:
        return "", text.strip()
    return _THOUGHT.sub("", text[: m.start()]).strip(), text[m.end() :].strip()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _status(row: dict[str, Any]) -> str:
    if row["scored_trials"] == 0:
        return "infra" if row["infra_errors"] else "not-run"
    if row["best"] >= 1.0:
        return "pass"
    return "partial" if row["best"] > 0 else "fail"


class _Images:
    """How screenshots are referenced: a relative URL, or an inlined (downscaled) JPEG."""

    def __init__(self, base: Path, embed: bool, max_side: int = 1280):
        self.base, self.embed, self.max_side = base, embed, max_side

    def __call__(self, path: Path | None) -> str | None:
        if path is None or not path.is_file():
            return None
        if not self.embed:
            rel = os.path.relpath(path.resolve(), self.base.resolve())
            return "/".join(quote(part) for part in Path(rel).parts)
        from PIL import Image

        img = Image.open(path).convert("RGB")
        img.thumbnail((self.max_side, self.max_side))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=80)
        return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _episode_data(
    records: list[Any], tasks: dict[str, dict[str, Any]], images: _Images
) -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: (r.task_id, r.trial)):
        d = Path(r.episode_dir) if r.episode_dir else None
        steps = []
        for line in read_steps(d) if d else []:
            if "step_num" not in line:
                continue
            info = line.get("info") or {}
            thought, action = split_response(str(line.get("response") or line.get("action") or ""))
            executed = line.get("action")
            steps.append(
                {
                    "n": line["step_num"],
                    "thought": thought,
                    "action": action,
                    "executed": executed if isinstance(executed, str) else json.dumps(executed),
                    "replaced": bool(info.get("protocol_replaced")),
                    "action_error": info.get("action_error"),
                    "infra_error": info.get("infra_error"),
                    "done": bool(line.get("done")),
                    "reward": line.get("reward"),
                    "shot": images(d / line["screenshot_file"])
                    if d and line.get("screenshot_file")
                    else None,
                }
            )
        data.setdefault(r.task_id, []).append(
            {
                "trial": r.trial,
                "score": r.score,
                "infra_error": r.infra_error,
                "instruction": tasks.get(r.task_id, {}).get("instruction", ""),
                "first": images(first_screenshot(d)) if d else None,
                "steps": steps,
            }
        )
    return data


def _group_row(name: str, g: dict[str, Any], cls: str = "") -> str:
    cells = [
        g["tasks"],
        g["scored_tasks"],
        _pct(g["mean_at_k"]),
        _pct(g["pass_at_k"]),
        g["solved_tasks"],
        g["infra_errors"],
        g["not_run"],
    ]
    keys = ["tasks", "scored", "mean", "pass", "solved", "infra", "not-run"]
    tds = "".join(
        f'<td class="num {k}">{html.escape(str(v))}</td>' for k, v in zip(keys, cells, strict=True)
    )
    return (
        f'<tr class="{cls}" data-group="{html.escape(name)}"><td>{html.escape(name)}</td>{tds}</tr>'
    )


def render_report(
    out: str | Path,
    *,
    output: str | Path | None = None,
    train_log: str | Path | None = None,
    train_tasks: str | None = None,
    embed_images: bool = False,
) -> str:
    """The report's HTML text (see the module docstring)."""
    out = Path(out)
    target = Path(output) if output else out / "report.html"
    summary = write_summary(out, train_tasks=train_tasks)
    manifest, records = read_run(out)
    k = summary["trials"]
    tasks = {t["id"]: t for t in manifest.tasks}
    images = _Images(target.parent, embed_images)
    esc = html.escape

    head_cells = "".join(
        f'<th class="num">{h}</th>'
        for h in ("tasks", "scored", f"mean@{k}", f"pass@{k}", "solved", "infra errors", "not run")
    )
    domain_rows = [_group_row(d, g) for d, g in summary["domains"].items()]
    domain_rows.append(_group_row("overall", summary["overall"], "total"))
    for name, g in [
        ("feasible", summary["feasible"]),
        ("infeasible", summary["infeasible"]),
        *summary.get("categories", {}).items(),
        *[(n.replace("_", "-"), g) for n, g in summary.get("split", {}).items()],
    ]:
        if g["tasks"]:
            domain_rows.append(_group_row(name, g, "extra"))

    plots = [
        f'<img alt="success per domain" src="data:image/png;base64,'
        f'{base64.b64encode(domain_bars(summary, title=manifest.model)).decode()}">'
    ]
    if train_log:
        try:
            png = training_curves(train_log, title=f"training: {Path(train_log).name}")
            plots.append(
                '<img alt="training curves" '
                f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            )
        except (FileNotFoundError, ValueError) as e:
            log.warning("no training curves: %s", e)
            plots.append(f'<p class="meta">no training curves: {esc(str(e))}</p>')

    task_rows = []
    for row in summary["task_results"]:
        status = _status(row)
        scores = " ".join("·" if s is None else f"{s:g}" for s in row["scores"])
        mean = "-" if row["mean"] is None else f"{row['mean']:.2f}"
        tid, dom = esc(row["task_id"]), esc(row["domain"])
        task_rows.append(
            f'<tr class="task" data-task="{tid}" data-domain="{dom}" data-status="{status}">'
            '<td><span class="toggle">▸</span> '
            f"{tid}{' <small>(infeasible)</small>' if row['infeasible'] else ''}</td>"
            f'<td>{dom}</td><td class="num scores">{esc(scores)}</td><td class="num '
            f'mean">{mean}</td>'
            f'<td class="status status-{status}">{status}</td></tr>'
            f'<tr class="detail hidden" data-for="{tid}"><td colspan="5"></td></tr>'
        )

    episodes = json.dumps(_episode_data(records, tasks, images)).replace("</", "<\\/")
    assets = importlib.resources.files("arpo_eval") / "assets"
    css, js = (assets / "report.css").read_text(), (assets / "report.js").read_text()
    run = summary["run"]
    o = summary["overall"]
    cards = [
        (_pct(o["mean_at_k"]), f"mean@{k}"),
        (_pct(o["pass_at_k"]), f"pass@{k}"),
        (f"{o['scored_tasks']}/{o['tasks']}", "tasks scored"),
        (str(o["infra_errors"]), "infra errors (not scored)"),
        (_pct(o.get("infra_rate")), "infra rate of episodes run"),
        (str(o["not_run"]), "episodes not run"),
    ]
    meta = esc(
        f"agent {run['agent']} · tasks {run['tasks_spec']} · provider {run['provider']} · "
        f"{k} trial(s) · at most {run['max_steps']} steps · action space "
        f"{run['action_space']}"
    )
    card_html = "".join(
        f'<div class="card"><div class="value">{esc(v)}</div>'
        f'<div class="label">{esc(lbl)}</div></div>'
        for v, lbl in cards
    )
    domain_opts = "".join(f'<option value="{esc(d)}">{esc(d)}</option>' for d in summary["domains"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>arpo-eval: {esc(run["model"])} ({esc(run["protocol"])})</title>
<style>{css}</style></head>
<body>
<h1>{esc(run["model"])}</h1>
<p class="meta">{meta}</p>
<p class="protocol"><b>Protocol:</b> {esc(PROTOCOL_TEXT.get(run["protocol"], str(run["protocol"])))}
Infrastructure errors (desktop, evaluator or model server failures) are counted apart and never
as 0.</p>
<div class="cards">{card_html}</div>
<h2>Per domain</h2>
<table id="domain-table"><thead><tr><th>domain</th>{head_cells}</tr></thead>
<tbody>{"".join(domain_rows)}</tbody></table>
<div class="plots">{"".join(plots)}</div>
<h2>Tasks</h2>
<div class="filters">domain <select id="f-domain"><option value="">all</option>{domain_opts}
</select>
status <select id="f-status"><option value="">all</option><option value="pass">pass</option>
<option value="partial">partial</option><option value="fail">fail</option>
<option value="infra">infra error</option><option value="not-run">not run</option></select>
<span id="shown-count"></span></div>
<table id="task-table"><thead><tr><th>task</th><th>domain</th><th class="num">scores per trial</th>
<th class="num">mean</th><th>status</th></tr></thead>
<tbody>{"".join(task_rows)}</tbody></table>
<p class="meta">OSWorld tools read trial 0 with: {esc(summary["osworld_show_result"])}</p>
<script type="application/json" id="episodes">{episodes}</script>
<script>{js}</script>
</body></html>
"""


def write_report(
    out: str | Path,
    *,
    output: str | Path | None = None,
    train_log: str | Path | None = None,
    train_tasks: str | None = None,
    embed_images: bool = False,
) -> Path:
    """Write the report (default ``DIR/report.html``) and return its path."""
    target = Path(output) if output else Path(out) / "report.html"
    text = render_report(
        out, output=target, train_log=train_log, train_tasks=train_tasks, embed_images=embed_images
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
