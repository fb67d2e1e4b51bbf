"""Where a run's results live on disk, and reading them back.

A run directory ``DIR`` (``arpo-eval run --out DIR``) holds OSWorld's result layout, one
*model directory* per trial, plus our own files::

    DIR/arpo_eval.json                 the run's manifest (agent, protocol, tasks, ...)
    DIR/summary.json                   tables (arpo_eval.tables), rewritten after every run
    DIR/<action_space>/<observation_type>/<model>/<domain>/<task_id>/          trial 0
    DIR/<action_space>/<observation_type>/<model>.trial<k>/<domain>/<task_id>/ trial k >= 1

Each episode directory is what :class:`osworld_gym.recording.RecordEpisode` writes
(``traj.jsonl``, ``step_<n>_<timestamp>.png``, ``result.txt`` only when the episode was scored,
``infra_error.txt`` when it was not) plus ``episode.json`` (our record of it, below). Trial 0 is
exactly OSWorld's layout, so OSWorld's ``show_result.py --action_space <action_space>
--observation_type screenshot --model <model> --result_dir DIR`` reads it; trial ``k`` is read
the same way with ``--model <model>.trial<k>`` (the precedent is ARPO's own evaluation, which
also keeps one model-level directory per trial).

An episode is *done* when its directory has a ``result.txt``; anything else (no directory, a
partial trajectory, an ``infra_error.txt``) is re-run by a resumed run, as OSWorld's
``get_unfinished`` does.

>>> trial_model("ui-tars", 0), trial_model("ui-tars", 3)
('ui-tars', 'ui-tars.trial3')
>>> split_trial("ui-tars.trial3"), split_trial("ui-tars")
(('ui-tars', 3), ('ui-tars', 0))
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from osworld_gym.outcome import counts, read_infra_error, read_score

log = logging.getLogger(__name__)

MANIFEST = "arpo_eval.json"
SUMMARY = "summary.json"
EPISODE = "episode.json"
MANIFEST_KIND = "arpo-eval-run"
_TRIAL = re.compile(r"^(?P<model>.+)\.trial(?P<k>\d+)$")


class RunLayoutError(ValueError):
    """A directory is not a run we can read or resume."""


def trial_model(model: str, trial: int) -> str:
    """The model-level directory name of ``trial``."""
    return model if trial == 0 else f"{model}.trial{trial}"


def split_trial(name: str) -> tuple[str, int]:
    """Inverse of :func:`trial_model`."""
    m = _TRIAL.match(name)
    return (m["model"], int(m["k"])) if m else (name, 0)


@dataclass
class EpisodeRecord:
    """One episode (task x trial) of a run.

    Attributes:
        score: the evaluator's score (fractional scores kept); ``None`` when not scored.
        infra_error: why the episode has no score (desktop, evaluator or agent backend failed);
            such episodes are counted apart, never as 0.
        replaced_last_action: the standard protocol replaced the last answer by FAIL.
        episode_dir: where its files are (``None`` when nothing was recorded).
    """

    task_id: str
    domain: str
    trial: int = 0
    score: float | None = None
    infra_error: str | None = None
    steps: int = 0
    infeasible: bool = False
    replaced_last_action: bool = False
    protocol: str = "standard"
    seconds: float = 0.0
    episode_dir: str | None = None

    @property
    def scored(self) -> bool:
        """Whether the episode counts (:func:`osworld_gym.outcome.counts`)."""
        return counts(self.score, self.infra_error)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunManifest:
    """What a run directory holds; written as ``arpo_eval.json``.

    ``tasks`` lists every task of the run as ``{"id", "domain", "infeasible", "instruction"}``,
    so that reports know about tasks that have not run yet.
    """

    model: str
    agent: str = "unknown"
    protocol: str = "standard"
    max_steps: int = 15
    trials: int = 1
    action_space: str = "pyautogui"
    observation_type: str = "screenshot"
    tasks_spec: str = ""
    provider: str = ""
    tasks: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def model_root(self, out: Path, trial: int) -> Path:
        return (
            Path(out) / self.action_space / self.observation_type / trial_model(self.model, trial)
        )

    def episode_dir(self, out: Path, trial: int, domain: str, task_id: str) -> Path:
        return self.model_root(out, trial) / domain / task_id

    def write(self, out: Path) -> Path:
        path = Path(out) / MANIFEST
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"kind": MANIFEST_KIND, **asdict(self)}, indent=2) + "\n")
        return path

    @classmethod
    def read(cls, out: Path) -> RunManifest | None:
        path = Path(out) / MANIFEST
        if not path.is_file():
            return None
        doc = json.loads(path.read_text())
        if doc.pop("kind", None) != MANIFEST_KIND:
            raise RunLayoutError(f"{path} is not an arpo-eval manifest")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in doc.items() if k in known})


def discover(out: Path) -> RunManifest:
    """The manifest of ``out``; for a plain OSWorld result directory (no manifest) one is
    inferred from the single ``<action_space>/<observation_type>/<model>`` found.

    Raises:
        RunLayoutError: nothing, or several models, found.
    """
    out = Path(out)
    manifest = RunManifest.read(out)
    if manifest is not None:
        return manifest
    models: dict[tuple[str, str, str], int] = {}
    for model_dir in sorted(p for p in out.glob("*/*/*") if p.is_dir()):
        if not any(model_dir.glob("*/*/result.txt")) and not any(model_dir.glob("*/*/traj.jsonl")):
            continue
        name, k = split_trial(model_dir.name)
        key = (model_dir.parent.parent.name, model_dir.parent.name, name)
        models[key] = max(models.get(key, 0), k + 1)
    if not models:
        raise RunLayoutError(
            f"{out} holds no arpo-eval run ({MANIFEST}) and no OSWorld results "
            "(<action_space>/<observation_type>/<model>/<domain>/<task_id>/result.txt)"
        )
    if len(models) > 1:
        names = ", ".join("/".join(k) for k in models)
        raise RunLayoutError(f"{out} holds results of several models ({names}); point at one run")
    (action_space, obs_type, model), trials = next(iter(models.items()))
    return RunManifest(
        model=model,
        agent="unknown",
        action_space=action_space,
        observation_type=obs_type,
        trials=trials,
    )


def read_episode(
    episode_dir: Path,
    *,
    task_id: str,
    domain: str,
    trial: int,
    infeasible: bool = False,
    protocol: str = "standard",
) -> EpisodeRecord | None:
    """The record of one episode directory; ``None`` when it never ran.

    ``result.txt`` is the truth about the score (as for OSWorld's tools); ``episode.json`` adds
    what we know beyond it; an unreadable ``result.txt`` counts 0.0 as in ``show_result.py``.
    """
    if not episode_dir.is_dir():
        return None
    rec = EpisodeRecord(
        task_id=task_id,
        domain=domain,
        trial=trial,
        infeasible=infeasible,
        protocol=protocol,
        episode_dir=str(episode_dir),
    )
    side = episode_dir / EPISODE
    if side.is_file():
        try:
            doc = json.loads(side.read_text())
            for key in ("steps", "infeasible", "replaced_last_action", "protocol", "seconds"):
                if key in doc:
                    setattr(rec, key, doc[key])
        except (json.JSONDecodeError, OSError) as e:
            log.warning("unreadable %s: %s", side, e)
    score = read_score(episode_dir)
    if score is not None:
        rec.score = score
        rec.infra_error = None
        if not rec.steps:
            rec.steps = _count_steps(episode_dir)
        return rec
    rec.steps = rec.steps or _count_steps(episode_dir)
    rec.infra_error = (
        read_infra_error(episode_dir) or "unfinished: the episode stopped before it was scored"
    )
    return rec


def _count_steps(episode_dir: Path) -> int:
    traj = episode_dir / "traj.jsonl"
    if not traj.is_file():
        return 0
    return sum(1 for line in traj.read_text(encoding="utf-8").splitlines() if line.strip())


def read_run(out: Path) -> tuple[RunManifest, list[EpisodeRecord]]:
    """The manifest and every episode on disk (episodes that never ran are left out).

    Without a task list in the manifest, tasks are found by walking the model directories.
    """
    out = Path(out)
    manifest = discover(out)
    records: list[EpisodeRecord] = []
    for trial in range(max(1, manifest.trials)):
        root = manifest.model_root(out, trial)
        if manifest.tasks:
            entries = [(t["domain"], t["id"], bool(t.get("infeasible"))) for t in manifest.tasks]
        else:
            entries = [
                (d.parent.name, d.name, False) for d in sorted(root.glob("*/*")) if d.is_dir()
            ]
        for domain, task_id, infeasible in entries:
            rec = read_episode(
                root / domain / task_id,
                task_id=task_id,
                domain=domain,
                trial=trial,
                infeasible=infeasible,
                protocol=manifest.protocol,
            )
            if rec is not None:
                records.append(rec)
    return manifest, records


def read_steps(episode_dir: str | Path) -> list[dict[str, Any]]:
    """``traj.jsonl`` lines of an episode (``[]`` if none); lines that do not parse are skipped."""
    traj = Path(episode_dir) / "traj.jsonl"
    if not traj.is_file():
        return []
    steps = []
    for line in traj.read_text(encoding="utf-8").splitlines():
        try:
            steps.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return steps


def first_screenshot(episode_dir: str | Path) -> Path | None:
    """``step_0_*.png``: the observation the first action was chosen on."""
    found = sorted(Path(episode_dir).glob("step_0_*.png"))
    return found[0] if found else None
