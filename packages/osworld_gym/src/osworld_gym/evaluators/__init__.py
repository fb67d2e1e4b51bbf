"""Evaluators: getters read desktop state, metrics score it, :func:`evaluate` combines them.

Task JSON names getters by ``type`` and metrics by ``func`` exactly as OSWorld does. The names
and the shape of a task's ``evaluator`` object are part of the task format, one floor below
this package, so loading a task never imports an evaluator: see
:mod:`osworld_gym.tasks.evaluator_registry` for the supported names and how to add one (entry
points into this package, imported on first use) and :mod:`osworld_gym.tasks.evaluator_spec`
for the shape; :mod:`.evaluate` for the scoring rules. Which OSWorld tasks can run at all
(getters, metrics, rules and options implemented; apps installed) is decided one floor above,
by :func:`osworld_gym.support.classify`.

>>> from osworld_gym.evaluators import metric_names
>>> "exact_match" in metric_names()
True
"""

from osworld_gym.evaluators.context import EvalContext, is_fail_action
from osworld_gym.evaluators.evaluate import EvalResult, evaluate
from osworld_gym.tasks.evaluator_registry import (
    getter,
    getter_names,
    has_getter,
    has_metric,
    metric,
    metric_names,
    register_getter,
    register_metric,
)
from osworld_gym.tasks.evaluator_spec import EvaluatorPlan, MetricSpec, plan, validate_evaluator

__all__ = [
    "EvalContext",
    "EvalResult",
    "EvaluatorPlan",
    "MetricSpec",
    "evaluate",
    "getter",
    "getter_names",
    "has_getter",
    "has_metric",
    "is_fail_action",
    "metric",
    "metric_names",
    "plan",
    "register_getter",
    "register_metric",
    "validate_evaluator",
]
