"""``arpo-eval run``: one evaluation run into a directory, resumable.

:func:`run` resolves the tasks, builds the agent, checks the directory's manifest (a resumed run
must use the same protocol, step limit, model directory and action set), plays the missing
episodes with :func:`~arpo_eval.runner.evaluate_agent` and writes ``summary.json``.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osworld_gym.providers.sources import DesktopSlot, DesktopSource, parse_desktop_source

from arpo_eval.agents import AgentSpec, build_agent
from arpo_eval.layout import SUMMARY, RunLayoutError, RunManifest, read_run
from arpo_eval.protocol import Protocol
from arpo_eval.runner import evaluate_agent
from arpo_eval.tables import summarize
from arpo_eval.tasks import resolve_task_spec, task_entry, training_ids

log = logging.getLogger(__name__)


@dataclass
class RunConfig:
    """Everything ``arpo-eval run`` needs (its flags).

    Attributes:
        agent: how to build the agent.
        tasks: the ``--tasks`` spec (:mod:`arpo_eval.tasks`).
        out: the run directory.
        provider: desktop backend (``local``, ``docker``, ``remote``; ``fake`` for tests).
        provider_kwargs: extra provider arguments (``remote``: ``url``, ``token``; ``docker``:
            ``image``, ...).
        desktops: where the desktops come from: the trainer's ``desktops`` section
            (:mod:`osworld_gym.providers.sources`), e.g. ``{source: remote, token_file: ...,
            urls: [...], reset_hook: ...}``: each desktop gets its own guest. ``None``: every
            desktop is ``provider`` with ``provider_kwargs``.
        num_envs: desktops at once (``None``: the section's ``num_desktops``, else one per URL of
            a ``remote`` section, else 1).
        max_steps: turns per episode (OSWorld/ARPO: 15).
        trials: episodes per task (``k`` of mean@k / pass@k).
        protocol: ``standard`` or ``hard`` (:mod:`arpo_eval.protocol`).
        meta: meta file for an ``evaluation_examples`` directory.
        skip_unsupported: drop OSWorld tasks the provider cannot run.
        settle_max_s: longest wait for the screen to settle after an action (0: capture at once).
        resume: keep finished episodes (default); ``False`` starts the run over.
        infra_retries: re-runs of an episode whose desktop/evaluator/agent failed, in this run.
        train_tasks: a training task list: adds in-domain vs held-out tables.
        record_video: save each episode's screen recording.
        progress: show the progress bar.
    """

    agent: AgentSpec
    tasks: str = "builtin"
    out: str = "results"
    provider: str = "local"
    provider_kwargs: dict[str, Any] = field(default_factory=dict)
    desktops: dict[str, Any] | None = None
    num_envs: int | None = None
    max_steps: int = 15
    trials: int = 1
    protocol: str = "standard"
    meta: str | None = None
    skip_unsupported: bool = False
    settle_max_s: float = 3.0
    resume: bool = True
    infra_retries: int = 1
    train_tasks: str | None = None
    record_video: bool = False
    progress: bool = True


def _check_resumable(old: RunManifest, new: RunManifest, out: Path) -> None:
    for key in ("protocol", "max_steps", "model", "action_space", "observation_type"):
        a, b = getattr(old, key), getattr(new, key)
        if a != b:
            raise RunLayoutError(
                f"{out} holds a run with {key}={a!r}, but this run has {key}={b!r}; use another "
                "--out, or --fresh to start this directory over"
            )


def desktop_slots(cfg: RunConfig) -> tuple[DesktopSource, list[DesktopSlot]]:
    """The run's desktop source and what each of its desktops runs (one guest per remote
    desktop); every mistake is a ``ValueError`` saying which option to change."""
    source = parse_desktop_source(cfg.desktops, cfg.provider)
    if cfg.desktops and cfg.provider not in ("local", source.provider):
        raise ValueError(
            f"--provider {cfg.provider} contradicts --desktops source {source.source!r} (whose "
            f"desktops run {source.provider!r}): give one of them"
        )
    if source.source == "ray":
        raise ValueError(
            "--desktops source 'ray' is the trainer's (a Ray vector env); arpo-eval drives each "
            "desktop from a thread of its own: use source local, docker or remote"
        )
    num_envs = cfg.num_envs
    if num_envs is None:
        num_envs = source.num_desktops or len(source.remotes) or 1
    if num_envs < 1:
        raise ValueError(f"--num-envs must be at least 1, got {num_envs}")
    if source.num_desktops is not None and source.num_desktops != num_envs:
        raise ValueError(
            f"desktops.num_desktops is {source.num_desktops}, but --num-envs is {num_envs}: "
            "change one of them"
        )
    return source, source.slots(
        num_envs, provider_kwargs=cfg.provider_kwargs, fewer="lower --num-envs"
    )


def run(cfg: RunConfig) -> dict[str, Any]:
    """Run (or resume) an evaluation; returns the summary also written to ``summary.json``."""
    protocol = Protocol.parse(cfg.protocol)
    if cfg.trials < 1 or cfg.max_steps < 1:
        raise ValueError("--trials and --max-steps must be at least 1")
    source, slots = desktop_slots(cfg)
    provider = source.provider
    tasks = resolve_task_spec(
        cfg.tasks, meta=cfg.meta, skip_unsupported=cfg.skip_unsupported, provider=provider
    )
    bundle = build_agent(cfg.agent)
    out = Path(cfg.out)
    manifest = RunManifest(
        model=bundle.model_name,
        agent=cfg.agent.kind,
        protocol=protocol.value,
        max_steps=cfg.max_steps,
        trials=cfg.trials,
        action_space=bundle.action_set,
        observation_type="screenshot",
        tasks_spec=str(cfg.tasks),
        provider=provider,
        tasks=[task_entry(t) for t in tasks],
        extra={
            "agent": bundle.describe,
            "num_envs": len(slots),
            "train_tasks": str(Path(cfg.train_tasks).resolve()) if cfg.train_tasks else None,
            "screen_size": list(cfg.agent.screen_size),
            "action_set_kwargs": bundle.action_set_kwargs,
        },
    )
    if source.remotes:  # which guests played (their URLs; never a token)
        manifest.extra["desktops"] = [s["provider_kwargs"]["url"] for s in slots]
    old = RunManifest.read(out)
    if old is not None and not cfg.resume:
        for trial in range(max(old.trials, 1)):
            shutil.rmtree(old.model_root(out, trial), ignore_errors=True)
        (out / SUMMARY).unlink(missing_ok=True)
    elif old is not None:
        _check_resumable(old, manifest, out)
        known = {t["id"] for t in manifest.tasks}
        manifest.tasks += [t for t in old.tasks if t["id"] not in known]
        manifest.trials = max(manifest.trials, old.trials)
        if manifest.extra.get("train_tasks") is None:
            manifest.extra["train_tasks"] = old.extra.get("train_tasks")
    manifest.write(out)
    env_kwargs: dict[str, Any] = {
        "provider": provider,
        "provider_kwargs": cfg.provider_kwargs or None,
        "action_set": bundle.action_set,
        "action_set_kwargs": bundle.action_set_kwargs or None,
        "max_steps": cfg.max_steps,
        "screen_size": tuple(cfg.agent.screen_size),
    }
    if cfg.settle_max_s <= 0:
        env_kwargs["settle"] = None
    else:
        from osworld_gym.settle import SettleConfig

        env_kwargs["settle"] = SettleConfig(max_s=cfg.settle_max_s)
    log.info(
        "evaluating %s on %d tasks x %d trials (%s protocol) into %s",
        bundle.model_name,
        len(tasks),
        cfg.trials,
        protocol.value,
        out,
    )
    evaluate_agent(
        bundle.factory,
        tasks,
        env_kwargs=env_kwargs,
        desktops=slots,
        num_envs=len(slots),
        trials=cfg.trials,
        protocol=protocol,
        out_dir=out,
        manifest=manifest,
        resume=cfg.resume,
        infra_retries=cfg.infra_retries,
        record_video=cfg.record_video,
        progress=cfg.progress,
    )
    return write_summary(out, train_tasks=cfg.train_tasks)


def write_summary(out: str | Path, *, train_tasks: str | None = None) -> dict[str, Any]:
    """Read every episode of ``out`` from disk, write ``summary.json`` and return it.

    ``train_tasks`` defaults to the list the run was started with (kept in its manifest).
    """
    out = Path(out)
    manifest, records = read_run(out)
    saved = manifest.extra.get("train_tasks")
    if train_tasks is None and saved:
        if Path(saved).is_file():
            train_tasks = str(saved)
        else:
            log.warning(
                "the run's training task list %s is gone; no in-domain/held-out split", saved
            )
    summary = summarize(
        records,
        trials=manifest.trials,
        tasks=manifest.tasks or None,
        train_ids=training_ids(train_tasks) if train_tasks else None,
    )
    summary = {
        "run": {
            "model": manifest.model,
            "agent": manifest.agent,
            "protocol": manifest.protocol,
            "max_steps": manifest.max_steps,
            "tasks_spec": manifest.tasks_spec,
            "provider": manifest.provider,
            "action_space": manifest.action_space,
            "observation_type": manifest.observation_type,
            "train_tasks": str(train_tasks) if train_tasks else None,
        },
        "osworld_show_result": (
            f"python show_result.py --action_space {manifest.action_space} --observation_type "
            f"{manifest.observation_type} --model {manifest.model} --result_dir {out}"
        ),
        **summary,
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return summary
