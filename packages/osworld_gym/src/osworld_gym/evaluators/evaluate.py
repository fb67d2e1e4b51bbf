"""Score a finished episode exactly as OSWorld's ``DesktopEnv.evaluate`` does.

1. Run the evaluator's ``postconfig`` steps (e.g. focus the window, press Ctrl+S).
2. ``func == "infeasible"``: 1 iff the last action is ``FAIL``. Otherwise a final ``FAIL`` is 0.
3. Each metric: ``result = get_<result.type>(ctx, result)``, ``expected`` likewise when given,
   ``score = metric(result[, expected], **options)``.
4. Several metrics: ``conj == "and"`` (default) returns 0 at the first 0, else the mean;
   ``"or"`` returns 1 at the first 1, else the maximum.

Who is to blame when something fails is decided by the provenance of the input that failed
(:mod:`.provenance`): whatever fails while reading or scoring what the agent produced (its
files, its apps' state, output it can shape) scores 0 with the reason in the metric's
``note`` -- a missing or unusable result file, a command that hung on what it left, a listener
of its own on an app's port, output over the cap, a parser raising on its file while the gold
scored against itself does not. Only failures on judge inputs (gold data, task JSON, a metric
that cannot score its own gold, the desktop not answering) raise
:class:`~osworld_gym.errors.EvaluatorError` or another :class:`~osworld_gym.errors.InfraError`:
such an episode has no trustworthy score and must never be reported as 0.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osworld_gym.errors import EvaluatorError, OSWorldGymError
from osworld_gym.evaluators import provenance
from osworld_gym.evaluators.context import EvalContext
from osworld_gym.evaluators.metrics.general import infeasible
from osworld_gym.tasks import evaluator_registry as registry
from osworld_gym.tasks.evaluator_spec import MetricSpec, plan
from osworld_gym.tasks.placeholders import placeholder_values, substitute
from osworld_gym.tasks.setup import SetupRunner

if TYPE_CHECKING:
    from osworld_gym.tasks.task import Task

logger = logging.getLogger(__name__)

_REPR_CHARS = 300
#: the guest's answer when a command it ran timed out (it is alive; the command hung)
_COMMAND_TIMED_OUT = 504
#: the guest's answer when an evaluator command names a port the agent's process listens on
_UNTRUSTED_LISTENER = 409


@dataclass
class EvalResult:
    """A score in ``[0, 1]`` and how it was reached.

    ``details`` holds ``conj``, ``last_action_fail``, ``infeasible`` and, per metric run,
    ``{"func", "score", "result_type", "expected_type", "result", "note"}`` under ``"metrics"``
    (``result`` is a shortened ``repr``; ``note`` says why a metric scored 0 without running).
    """

    score: float
    details: dict[str, Any] = field(default_factory=dict)


def evaluate(task: Task, ctx: EvalContext, runner: SetupRunner | None = None) -> EvalResult:
    """Evaluate ``task`` on the desktop behind ``ctx``.

    Args:
        task: the task (its ``evaluator``).
        ctx: desktop client, cache dir and the episode's last action.
        runner: runs ``postconfig``; built from ``ctx`` when omitted.

    Raises:
        EvaluatorError: a getter or metric failed; there is no score.
        SetupError: a ``postconfig`` step failed.
        TaskError: the evaluator is malformed.
    """
    p = plan(task.evaluator, task_id=task.id)
    details: dict[str, Any] = {
        "conj": p.conj,
        "infeasible": p.infeasible,
        "last_action_fail": ctx.last_action_is_fail,
        "metrics": [],
    }
    if p.postconfig:
        if runner is None:
            runner = SetupRunner(
                ctx.client,
                cache_dir=ctx.cache_dir.parent,
                task_id=ctx.task_id,
                client_password=ctx.client_password,
                screen_size=ctx.screen_size,
                home=ctx.home,
            )
        runner.run(p.postconfig, phase="postconfig")
        if runner.skipped:  # refused on the desktop the agent left (a window it closed, ...)
            details["postconfig_skipped"] = list(runner.skipped)

    if p.infeasible:
        return EvalResult(infeasible(ctx.last_action), details)
    if ctx.last_action_is_fail:
        details["note"] = "the agent answered FAIL on a feasible task"
        return EvalResult(0.0, details)

    values = placeholder_values(client_password=ctx.client_password, screen_size=ctx.screen_size)
    outputs = provenance.postconfig_outputs(p.postconfig)
    scores: list[float] = []
    for i, spec in enumerate(p.metrics):
        score, info = _score_metric(task.id, i, spec, ctx, values, outputs)
        details["metrics"].append(info)
        if p.conj == "and" and score == 0.0:
            return EvalResult(0.0, details)
        if p.conj == "or" and score == 1.0:
            return EvalResult(1.0, details)
        scores.append(score)
    total = sum(scores) / len(scores) if p.conj == "and" else max(scores)
    return EvalResult(total, details)


def _score_metric(
    task_id: str,
    index: int,
    spec: MetricSpec,
    ctx: EvalContext,
    values: dict[str, str],
    outputs: frozenset[str] = frozenset(),
) -> tuple[float, dict[str, Any]]:
    if spec.result is None:  # plan() rejects this; kept for type checkers
        raise EvaluatorError(f"task {task_id!r}, metric {index}: no result getter")
    info: dict[str, Any] = {
        "func": spec.func,
        "result_type": spec.result["type"],
        "expected_type": spec.expected["type"] if spec.expected else None,
    }
    label = f"task {task_id!r}, metric {index} ({spec.func})"
    getters = [("result", spec.result)] + ([("expected", spec.expected)] if spec.expected else [])

    args: list[Any] = []
    shaped: list[bool] = []
    for side, config in getters:
        agent = provenance.agent_shaped(config, outputs)
        try:
            value = _get(config, ctx, values)
        except Exception as exc:
            why = provenance.getter_blame(exc, agent)
            if why is None:
                raise EvaluatorError(
                    f"{label}: {side} getter {config['type']!r} raised {type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(exc, (OSWorldGymError, FileNotFoundError)):
                _blame_agent(f"getter {config['type']}", label, exc)
                info["raised"] = f"{config['type']}: {type(exc).__name__}"
            logger.info("%s: %s %s", label, side, why)
            return 0.0, {
                **info,
                "score": 0.0,
                "result": info.get("result"),
                "note": f"{side} {why}",
            }
        if side == "result":
            info["result"] = _short(value)
        if value is None:
            if side == "expected" and not agent:
                raise EvaluatorError(f"{label}: expected getter {config['type']!r} gave nothing")
            what = (
                "result missing (e.g. file not on the desktop)"
                if side == "result"
                else ("expected value missing on the desktop the agent left")
            )
            return 0.0, {**info, "score": 0.0, "note": what}
        args.append(value)
        shaped.append(agent)

    try:
        fn = registry.metric(spec.func)
    except Exception as exc:
        raise EvaluatorError(f"{label}: cannot load the metric: {exc}") from exc
    unfit = provenance.options_fit(fn, len(args), spec.options)
    if unfit is not None:
        raise EvaluatorError(f"{label}: the task's options do not fit the metric: {unfit}")
    try:
        score = _check_score(fn(*args, **spec.options), label)
    except Exception as exc:
        gold = [c["type"] in provenance.GOLD_FILE_GETTERS for _, c in getters]
        note = _metric_failed(exc, fn, spec, args, shaped, gold, label)
        return 0.0, {
            **info,
            "score": 0.0,
            "raised": f"{spec.func}: {type(exc).__name__}",
            "note": note,
        }
    info["score"] = score
    logger.debug("%s scored %s", label, score)
    return score, info


def _metric_failed(
    exc: Exception,
    fn: Any,
    spec: MetricSpec,
    args: list[Any],
    shaped: list[bool],
    gold: list[bool],
    label: str,
) -> str:
    """Blame a metric's failure (see :mod:`.provenance`): raise an EvaluatorError when it is
    the judge's; else the reason the agent's episode scores 0."""
    what = f"{type(exc).__name__}: {provenance.short(exc)}"
    if isinstance(exc, provenance.JUDGE_TYPES) or not any(shaped):
        raise EvaluatorError(f"{label} raised {what}") from exc
    gold = [g and not a for g, a in zip(gold, shaped, strict=True)]
    control = provenance.control_args(args, shaped, gold)
    if control is not None:
        try:
            _check_score(fn(*control, **spec.options), label)
        except Exception as again:
            raise EvaluatorError(
                f"{label} raised {what}; it fails on the gold scored against itself too "
                f"({type(again).__name__}: {provenance.short(again)}): the gold or the metric "
                "is broken"
            ) from exc
    _blame_agent(f"metric {spec.func}", label, exc)
    checked = (
        "the gold scored against itself does not"
        if control is not None
        else ("no gold file to check against")
    )
    return f"the metric raised {what} on what the agent left ({checked})"


def _blame_agent(name: str, label: str, exc: BaseException) -> None:
    provenance.count(name)
    logger.warning(
        "%s: %s raised on what the agent left; scored 0 (a bug if the file is well-formed)",
        label,
        name,
        exc_info=exc,
    )


def _get(config: dict[str, Any], ctx: EvalContext, values: dict[str, str]) -> Any:
    fn = registry.getter(config["type"])
    return fn(ctx, substitute(config, values))


def _check_score(raw: Any, label: str) -> float:
    try:
        score = float(raw)
    except (TypeError, ValueError) as exc:
        raise EvaluatorError(f"{label} returned {raw!r}, not a number") from exc
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise EvaluatorError(f"{label} returned {score}, outside [0, 1]")
    return score


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."
