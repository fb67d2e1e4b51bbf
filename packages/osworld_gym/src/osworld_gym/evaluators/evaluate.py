"""Score a finished episode exactly as OSWorld's ``DesktopEnv.evaluate`` does.

1. Run the evaluator's ``postconfig`` steps (e.g. focus the window, press Ctrl+S).
2. ``func == "infeasible"``: 1 iff the last action is ``FAIL``. Otherwise a final ``FAIL`` is 0.
3. Each metric: ``result = get_<result.type>(ctx, result)``, ``expected`` likewise when given,
   ``score = metric(result[, expected], **options)``.
4. Several metrics: ``conj == "and"`` (default) returns 0 at the first 0, else the mean;
   ``"or"`` returns 1 at the first 1, else the maximum.

What the agent could have caused scores 0: a result file that does not exist (``None`` from a
getter, or ``FileNotFoundError`` from a *result* getter, as in OSWorld), and a file the agent
left unusable (:class:`~osworld_gym.errors.UnusableResultFile`: a directory, a fifo, ``chmod
000``, a symlink out of the desktop, a file over the size cap) or a result command that timed
out in a guest that still answers (504: it hung on what the agent left, e.g. reading a fifo),
with the reason in the metric's ``note``. Everything else that
goes wrong (a getter or metric raising, gold data missing, the desktop not answering) raises
:class:`~osworld_gym.errors.EvaluatorError` or another
:class:`~osworld_gym.errors.InfraError`: such an episode has no trustworthy score and must never
be reported as 0.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osworld_gym.errors import EvaluatorError, GuestError, UnusableResultFile
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
    scores: list[float] = []
    for i, spec in enumerate(p.metrics):
        score, info = _score_metric(task.id, i, spec, ctx, values)
        details["metrics"].append(info)
        if p.conj == "and" and score == 0.0:
            return EvalResult(0.0, details)
        if p.conj == "or" and score == 1.0:
            return EvalResult(1.0, details)
        scores.append(score)
    total = sum(scores) / len(scores) if p.conj == "and" else max(scores)
    return EvalResult(total, details)


def _score_metric(
    task_id: str, index: int, spec: MetricSpec, ctx: EvalContext, values: dict[str, str]
) -> tuple[float, dict[str, Any]]:
    if spec.result is None:  # plan() rejects this; kept for type checkers
        raise EvaluatorError(f"task {task_id!r}, metric {index}: no result getter")
    info: dict[str, Any] = {
        "func": spec.func,
        "result_type": spec.result["type"],
        "expected_type": spec.expected["type"] if spec.expected else None,
    }
    label = f"task {task_id!r}, metric {index} ({spec.func})"

    try:
        result = _get(spec.result, ctx, values)
    except FileNotFoundError as exc:
        logger.info("%s: result not found: %s", label, exc)
        return 0.0, {**info, "score": 0.0, "result": None, "note": f"result not found: {exc}"}
    except UnusableResultFile as exc:
        logger.info("%s: result unusable: %s", label, exc)
        return 0.0, {**info, "score": 0.0, "result": None, "note": f"result unusable: {exc}"}
    except GuestError as exc:
        if exc.status == _UNTRUSTED_LISTENER:  # the agent's process on a task app's port
            logger.info("%s: result source forged: %s", label, exc)
            return 0.0, {
                **info,
                "score": 0.0,
                "result": None,
                "note": f"result source not the task's app: {exc}",
            }
        if exc.status != _COMMAND_TIMED_OUT:
            raise EvaluatorError(
                f"{label}: result getter {spec.result['type']!r} raised GuestError: {exc}"
            ) from exc
        # the guest answered: its command hung on what the agent left (``cat`` of a fifo)
        logger.info("%s: result command timed out: %s", label, exc)
        return 0.0, {
            **info,
            "score": 0.0,
            "result": None,
            "note": f"result command timed out on the desktop the agent left: {exc}",
        }
    except Exception as exc:
        raise EvaluatorError(
            f"{label}: result getter {spec.result['type']!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    info["result"] = _short(result)
    if result is None:
        return 0.0, {**info, "score": 0.0, "note": "result missing (e.g. file not on the desktop)"}

    args: list[Any] = [result]
    if spec.expected:
        try:
            expected = _get(spec.expected, ctx, values)
        except UnusableResultFile as exc:  # a desktop file the agent could reach
            return 0.0, {**info, "score": 0.0, "note": f"expected file unusable: {exc}"}
        except GuestError as exc:
            # the agent's doing as much on this side as on the result's: a listener of its own
            # on a port the expected getter names (409), or a command that hung on what it left
            # (a fifo, a frozen forger: 504). Scored 0, never excluded as an infra error.
            if exc.status == _UNTRUSTED_LISTENER:
                logger.info("%s: expected source forged: %s", label, exc)
                return 0.0, {
                    **info,
                    "score": 0.0,
                    "note": f"expected source not the task's app: {exc}",
                }
            if exc.status == _COMMAND_TIMED_OUT:
                logger.info("%s: expected command timed out: %s", label, exc)
                return 0.0, {
                    **info,
                    "score": 0.0,
                    "note": f"expected command timed out on the desktop the agent left: {exc}",
                }
            raise EvaluatorError(
                f"{label}: expected getter {spec.expected['type']!r} raised GuestError: {exc}"
            ) from exc
        except Exception as exc:
            raise EvaluatorError(
                f"{label}: expected getter {spec.expected['type']!r} raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if expected is None:
            return 0.0, {**info, "score": 0.0, "note": "expected value missing"}
        args.append(expected)

    try:
        fn = registry.metric(spec.func)
        raw = fn(*args, **spec.options)
    except Exception as exc:
        raise EvaluatorError(f"{label} raised {type(exc).__name__}: {exc}") from exc
    score = _check_score(raw, label)
    info["score"] = score
    logger.debug("%s scored %s", label, score)
    return score, info


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
