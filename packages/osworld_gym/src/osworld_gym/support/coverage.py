"""``osworld-gym tasks coverage PATH``: how much of an OSWorld task set runs here, and why not.

Reads OSWorld's layout (``evaluation_examples/`` with ``test_all.json`` and
``examples/<domain>/<id>.json``, or a meta file directly), classifies every task with
:func:`osworld_gym.support.classifier.classify` for a provider, and groups the tasks that cannot run
by the kind of their blockers (``needs a live website``, ``unknown metric``, ...), each kind with
its details, so a user sees what to install or implement to run more.

>>> cov = Coverage()
>>> cov.add("os", "a", classifier.Support(True))
>>> cov.add("os", "b", classifier.Support(False, "needs VS Code (code command)",
...                                     ("needs VS Code (code command)",)))
>>> cov.totals()
(2, 1)
>>> cov.blockers("os")
{'needs VS Code': ['code command']}
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osworld_gym.errors import TaskError
from osworld_gym.support import classifier

DEFAULT_META = "test_all.json"
_KIND = re.compile(r"^(.*?)(?: \((.*)\)|: (.*))?$")


def reason_kind(reason: str) -> tuple[str, str]:
    """``"unknown metric: a, b"`` -> ``("unknown metric", "a, b")``; ``"needs X (why)"`` ->
    ``("needs X", "why")``."""
    m = _KIND.match(reason)
    assert m is not None  # the pattern matches any string
    return m.group(1), m.group(2) or m.group(3) or ""


@dataclass
class Coverage:
    """Per domain: every task's classification."""

    #: domain -> [(task id, Support)]
    domains: dict[str, list[tuple[str, classifier.Support]]] = field(default_factory=dict)

    def add(self, domain: str, task_id: str, result: classifier.Support) -> None:
        self.domains.setdefault(domain, []).append((task_id, result))

    def totals(self, domain: str | None = None) -> tuple[int, int]:
        """(tasks, supported) of one domain or of all."""
        rows = (
            self.domains.get(domain, [])
            if domain
            else [r for rs in self.domains.values() for r in rs]
        )
        return len(rows), sum(1 for _, s in rows if s.supported)

    def supported_ids(self) -> dict[str, list[str]]:
        """``{domain: [ids that run here]}`` (a meta file of the supported tasks)."""
        return {d: [i for i, s in rows if s.supported] for d, rows in self.domains.items()}

    def blockers(self, domain: str | None = None, *, every: bool = False) -> dict[str, list[str]]:
        """Kind of the first reason (or of ``every`` reason) -> its details, one per task."""
        rows = (
            self.domains.get(domain, [])
            if domain
            else [r for rs in self.domains.values() for r in rs]
        )
        out: dict[str, list[str]] = {}
        for _, s in rows:
            for reason in (s.reasons if every else (s.reason,)) if not s.supported else ():
                kind, detail = reason_kind(str(reason))
                out.setdefault(kind, []).append(detail)
        return dict(sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0])))

    def format(self, *, details: int = 4) -> str:
        """The per-domain table, then per domain its blockers with their commonest details."""
        lines = [f"{'domain':<22}{'tasks':>6}{'supported':>11}", "-" * 39]
        for d in sorted(self.domains):
            n, ok = self.totals(d)
            lines.append(f"{d:<22}{n:>6}{ok:>11}")
        n, ok = self.totals()
        lines += [
            "-" * 39,
            f"{'total':<22}{n:>6}{ok:>11}",
            "",
            "why not (first blocker of each task; count, then the commonest details):",
        ]
        for d in sorted(self.domains):
            kinds = self.blockers(d)
            if not kinds:
                continue
            lines.append(f"  {d}")
            for kind, items in kinds.items():
                common = Counter(i for i in items if i).most_common(details)
                shown = "; ".join(
                    f"{text[:90]}" + (f" x{c}" if c > 1 else "") for text, c in common
                )
                lines.append(f"    {len(items):>3}  {kind}" + (f": {shown}" if shown else ""))
        return "\n".join(lines)

    def markdown(self) -> str:
        """A README table: domain, tasks, supported here, main blockers."""
        lines = [
            "| domain | tasks | supported here | main blockers (tasks) |",
            "|---|---:|---:|---|",
        ]
        for d in sorted(self.domains):
            n, ok = self.totals(d)
            kinds = ", ".join(f"{k} ({len(v)})" for k, v in list(self.blockers(d).items())[:3])
            lines.append(f"| {d} | {n} | {ok} | {kinds} |")
        n, ok = self.totals()
        lines.append(f"| **all** | **{n}** | **{ok}** | |")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "total": dict(zip(("tasks", "supported"), self.totals(), strict=True)),
            "domains": {
                d: {
                    "tasks": self.totals(d)[0],
                    "supported": self.totals(d)[1],
                    "unsupported": {i: list(s.reasons) for i, s in rows if not s.supported},
                }
                for d, rows in sorted(self.domains.items())
            },
        }


def official_tasks(
    path: str | os.PathLike[str], meta: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``[(domain, task JSON)]`` of an OSWorld ``evaluation_examples`` folder (its meta file,
    default ``test_all.json``, else every ``examples/*/*.json``) or of a meta file.

    Raises:
        TaskError: the path is not in OSWorld's layout, or a listed file is missing.
    """
    path = Path(path)
    if path.is_file():
        meta_file, examples = path, path.parent / "examples"
    elif (path / "examples").is_dir():
        examples = path / "examples"
        meta_file = path / (meta or DEFAULT_META)
        if not meta_file.is_file():
            if meta:
                raise TaskError(f"meta file {meta_file} not found")
            return [(f.parent.name, _read(f)) for f in sorted(examples.glob("*/*.json"))]
    else:
        raise TaskError(
            f"{path} is not an OSWorld evaluation_examples folder (no examples/ in "
            "it) nor a meta file such as test_all.json"
        )
    listing = _read(meta_file)
    if not isinstance(listing, dict):
        raise TaskError(f"{meta_file} is not a meta file of the form {{domain: [task ids]}}")
    out = []
    for domain, ids in listing.items():
        for task_id in ids:
            file = examples / domain / f"{task_id}.json"
            if not file.is_file():
                raise TaskError(f"{meta_file} lists {task_id!r} but {file} does not exist")
            out.append((domain, _read(file)))
    return out


def _read(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TaskError(f"cannot read task file {file}: {exc}") from exc


def coverage(
    path: str | os.PathLike[str],
    *,
    provider: str = "local",
    meta: str | None = None,
    profile: str | None = None,
    provider_kwargs: dict[str, Any] | None = None,
) -> Coverage:
    """Classify every task of the OSWorld task set at ``path`` for desktops of ``provider``
    made with ``provider_kwargs`` (desktop ``profile``, default as the provider's; docker: the
    image's manifest), as :func:`.classifier.capabilities` reads them."""
    caps = classifier.capabilities(provider, profile, provider_kwargs)
    cov = Coverage()
    for domain, raw in official_tasks(path, meta):
        task_id = str(raw.get("id", "?")) if isinstance(raw, dict) else "?"
        cov.add(domain, task_id, classifier.classify(raw, caps))
    return cov
