"""Who is to blame when an evaluation fails: the provenance of every input.

Under RL the agent learns whatever turns a failure into something better than a 0. An episode
whose evaluation raised is excluded from training (``info["infra_error"]``), so if a corrupt
result file made a metric crash, "corrupt the file when failing" would hide every failure. The
rule below decides, once for every getter and metric, whether a failure is the **agent's** (the
episode scores 0, the reason in ``eval_note``) or the **judge's** (an
:class:`~osworld_gym.errors.EvaluatorError`: no trustworthy score).

**Inputs.** A getter's value is *agent-shaped* when the agent could have changed it: every
getter that reads the desktop (its files, command output, app state, the accessibility tree),
and a ``cache_file`` written by a ``postconfig`` step (a command run on the desktop the agent
left). *Judge* inputs are the task JSON (``rule``, ``rule_relativeTime``, options) and gold
files (``cloud_file``; a ``cache_file`` written by setup before the agent acted or placed in the
cache). A getter added later counts as agent-shaped unless listed in :data:`JUDGE_GETTERS`:
the safe side.

**A getter fails.**

* The guest or the transport failed (a :class:`~osworld_gym.errors.GuestError` other than the
  statuses below), or the getter raised an :class:`~osworld_gym.errors.InfraError` on purpose
  (a gold file that cannot be downloaded, a program missing on the desktop): the judge's.
* The guest said the desktop the agent left is the cause -- 409 (the agent's process serves a
  port the getter names), 413 (a command's output over the cap), 504 (a command hung on what
  the agent left), :class:`~osworld_gym.errors.UnusableResultFile` (a directory, a fifo, a file
  over the cap...): the agent's.
* Anything else raised while reading an agent-shaped input (a parser choking on deeply nested
  JSON, a zip that is not one): the agent's. While reading a judge input: the judge's.
  :class:`~osworld_gym.errors.TaskError` is always the judge's (the task JSON).

**A metric fails** (raises, or returns something that is not a number in ``[0, 1]``).

* Options that do not fit the metric's signature, :class:`~osworld_gym.errors.TaskError`,
  :class:`~osworld_gym.errors.MissingDependencyError` and ``NotImplementedError`` (a rule or
  option the metric does not implement): the judge's, whatever the input.
* No agent-shaped argument: the judge's.
* Otherwise the **control**: the same metric, same options, with each agent-shaped argument
  replaced by the gold file it is compared with -- the gold scored against itself. It exists
  when exactly one judge-side argument is a file (or list of files) of the same type as the
  agent's (same suffix, same count). If the control fails too, the metric cannot score even
  its own gold: broken gold or a bug on inputs we control, the judge's. If the control runs,
  what differs is the agent's file: the agent's.
* No control (the expected value is a rule, or also agent-shaped): the agent's. Between two
  episodes of such a task only what the agent left varies, so a failure that depends on the
  input is the input's; one that does not (a metric that always raises) scores every episode 0
  -- visible, as below, and caught by the built-in tasks' oracle runs and the metric fuzzer.

Whether an episode is excluded therefore never depends on what the agent did once the metric
raised: only on judge inputs (the control) and types that name a judge-side cause.

**Bugs stay visible.** Every failure blamed on the agent is logged at WARNING with its
traceback, recorded in the metric's details (``"raised"``) and counted per getter or metric
(:func:`raised_counts`), so a metric that raises on well-formed files shows as a count, not as
silent zeros.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from osworld_gym.errors import (
    GuestError,
    InfraError,
    MissingDependencyError,
    TaskError,
    UnusableResultFile,
)

logger = logging.getLogger(__name__)

#: Getters whose values come from the judge: the task JSON and gold files.
JUDGE_GETTERS = frozenset({"rule", "rule_relativeTime", "cloud_file", "cache_file"})
#: Getters that return gold *files* (a local path, or a list of paths).
GOLD_FILE_GETTERS = frozenset({"cloud_file", "cache_file"})
#: Guest answers meaning "the desktop the agent left is the cause", with what it means.
AGENT_STATUSES = {
    409: "source not the task's app",
    413: "output over the size limit",
    504: "command timed out on the desktop the agent left",
}
#: Exception types that name a judge-side cause whatever the input.
JUDGE_TYPES: tuple[type[BaseException], ...] = (
    TaskError,
    MissingDependencyError,
    NotImplementedError,
)

_counts: Counter[str] = Counter()
_lock = threading.Lock()


def raised_counts() -> dict[str, int]:
    """How often each getter (``"getter vm_file"``) or metric (``"metric compare_table"``) has
    raised on an agent-shaped input in this process, blamed on the agent and scored 0.

    A metric that raises on files an honest agent writes would show here; the trainer and
    ``arpo-eval`` see the same per episode in ``info["eval_note"]``.
    """
    with _lock:
        return dict(_counts)


def count(name: str) -> None:
    with _lock:
        _counts[name] += 1


def postconfig_outputs(postconfig: Sequence[dict[str, Any]]) -> frozenset[str]:
    """File names ``postconfig`` steps write (``stdout``/``stderr`` of an ``execute``): what a
    command run on the agent's desktop printed.

    >>> sorted(postconfig_outputs([{"type": "execute", "parameters": {"command": "ls",
    ...     "stdout": "ls.out"}}, {"type": "sleep", "parameters": {"seconds": 1}}]))
    ['ls.out']
    """
    out = set()
    for step in postconfig:
        params = step.get("parameters") or {}
        for key in ("stdout", "stderr"):
            if isinstance(params.get(key), str):
                out.add(params[key])
    return frozenset(out)


def agent_shaped(config: dict[str, Any], outputs: frozenset[str] = frozenset()) -> bool:
    """Whether the value of the getter ``config`` is something the agent could have changed.

    >>> agent_shaped({"type": "vm_file", "path": "a", "dest": "a"})
    True
    >>> agent_shaped({"type": "cloud_file", "path": "https://x/g", "dest": "g"})
    False
    >>> agent_shaped({"type": "cache_file", "path": "ls.out"}, frozenset({"ls.out"}))
    True
    """
    if config["type"] == "cache_file":
        return config.get("path") in outputs
    return config["type"] not in JUDGE_GETTERS


def getter_blame(exc: BaseException, agent: bool) -> str | None:
    """Why ``exc``, raised by a getter, is the agent's doing (a phrase after "result" or
    "expected"); None when it is the judge's (raise an EvaluatorError).

    >>> getter_blame(GuestError("port 1337 is served by nc", status=409), agent=True)
    "source not the task's app: port 1337 is served by nc"
    >>> getter_blame(RecursionError("too deep"), agent=True)
    'raised RecursionError while being read: too deep'
    >>> getter_blame(RecursionError("too deep"), agent=False) is None
    True
    """
    if isinstance(exc, JUDGE_TYPES):
        return None
    if isinstance(exc, UnusableResultFile):
        return f"unusable: {exc}"
    if isinstance(exc, GuestError):
        why = AGENT_STATUSES.get(exc.status or 0)
        return f"{why}: {exc}" if why else None
    if isinstance(exc, InfraError):
        return None
    if isinstance(exc, FileNotFoundError):
        return f"not found: {exc}" if agent else None
    return f"raised {type(exc).__name__} while being read: {short(exc)}" if agent else None


def options_fit(fn: Callable[..., Any], n_args: int, options: dict[str, Any]) -> str | None:
    """Why ``fn(*n_args values, **options)`` cannot be called, or None if it can."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: let the call tell
    try:
        sig.bind(*([None] * n_args), **options)
    except TypeError as exc:
        return str(exc)
    return None


def _suffixes(value: Any) -> tuple[str, ...] | None:
    """The suffixes of a file path or a list of them; None if ``value`` is not that."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v for v in items):
        return None
    return tuple(Path(v).suffix.lower() for v in items)


def control_args(
    args: Sequence[Any], shaped: Sequence[bool], gold_files: Sequence[bool]
) -> list[Any] | None:
    """``args`` with each agent-shaped argument replaced by the one gold file of the same type
    (the gold scored against itself), or None when no such control exists.

    >>> control_args(["/w/out.xlsx", "/c/gold.xlsx"], [True, False], [False, True])
    ['/c/gold.xlsx', '/c/gold.xlsx']
    >>> control_args(["/w/out.txt", {"expected": "x"}], [True, False], [False, False]) is None
    True
    >>> control_args(["/w/out.docx", "/c/gold.pdf"], [True, False], [False, True]) is None
    True
    """
    golds = [a for a, g in zip(args, gold_files, strict=True) if g and _suffixes(a) is not None]
    if len(golds) != 1 or not any(shaped):
        return None
    gold = golds[0]
    out = []
    for arg, agent in zip(args, shaped, strict=True):
        if not agent:
            out.append(arg)
        elif _suffixes(arg) is not None and _suffixes(arg) == _suffixes(gold):
            out.append(gold)
        else:
            return None
    return out


def short(exc: BaseException, n: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= n else text[: n - 3] + "..."
