"""The Agent protocol and the agents that need no model.

An :class:`Agent` is reset with a task and then asked for one action text per observation; one
agent object plays one episode at a time. Model agents live with their models (the trainer's
``PolicyAgent``, arpo-eval's OpenAI agent); the ones here replay a task's oracle or end at once.

>>> from osworld_gym.actions import make_action_set
>>> from osworld_gym.support import builtin_task
>>> uitars = make_action_set("uitars", screen_size=(640, 360))
>>> for text in oracle_script(builtin_task("os-mkdir-001"), uitars):
...     print(text)
Action: hotkey(key='ctrl alt t')
Action: type(content='mkdir -p /home/user/Desktop/projects\\n')
Action: finished(content='')
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from osworld_gym.actions import ActionSet, ParsedAction, make_action_set
from osworld_gym.errors import ActionError
from osworld_gym.protocol.primitives import Press, Primitive, TypeText, Wait


@runtime_checkable
class Agent(Protocol):
    """What an episode loop needs from an agent."""

    def reset(self, task: Any) -> None:
        """Forget the previous episode; ``task`` (an ``osworld_gym`` Task) is about to start."""

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        """The next action text for this observation (``obs["screenshot"]``,
        ``obs["instruction"]``)."""
        ...


class NoopAgent:
    """Ends every episode at once with DONE (scores what an untouched desktop scores: 0)."""

    def reset(self, task: Any) -> None:
        pass

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        return "DONE"


class FailAgent:
    """Ends every episode at once with FAIL (scores 1 on exactly the infeasible tasks)."""

    def reset(self, task: Any) -> None:
        pass

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        return "FAIL"


class ScriptAgent:
    """Answers a fixed list of action texts, one per turn; asking for more is an agent failure.

    The same script is played every episode (``reset`` rewinds it).
    """

    def __init__(self, script: list[str]):
        self.script = list(script)
        self._turn = 0

    def reset(self, task: Any) -> None:
        self._turn = 0

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        if self._turn >= len(self.script):
            raise RuntimeError("the episode did not end after the last action")
        self._turn += 1
        return self.script[self._turn - 1]


def replay_script(task: Any) -> list[str]:
    """A task's pyautogui oracle verbatim, ending in DONE (FAIL if the task is infeasible).

    Raises:
        ValueError: the task has no oracle.
    """
    oracle = list(getattr(task, "oracle", None) or [])
    if not oracle:
        raise ValueError(f"task {getattr(task, 'id', task)!r} has no oracle to replay")
    final = "FAIL" if getattr(task, "is_infeasible", False) else "DONE"
    return oracle if oracle[-1] in ("DONE", "FAIL") else [*oracle, final]


class ReplayOracleAgent:
    """Replays a task's pyautogui oracle verbatim (waits included), then DONE (FAIL if
    infeasible).

    This is exactly what ``osworld-gym tasks check`` proves scores 1 on every built-in task.
    """

    def __init__(self) -> None:
        self._script: list[str] = []
        self._turn = 0

    def reset(self, task: Any) -> None:
        self._script = replay_script(task)
        self._turn = 0

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        text = self._script[self._turn] if self._turn < len(self._script) else "DONE"
        self._turn += 1
        return text


class OracleAgent:
    """Plays each task's built-in oracle, rendered in ``action_set``'s syntax (a sanity
    baseline)."""

    def __init__(self, action_set: ActionSet):
        self.action_set = action_set
        self._script: list[str] = []
        self._turn = 0

    def reset(self, task: Any) -> None:
        self._script, self._turn = oracle_script(task, self.action_set), 0

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        text = (
            self._script[self._turn]
            if self._turn < len(self._script)
            else done_text(self.action_set)
        )
        self._turn += 1
        return text


def done_text(action_set: ActionSet) -> str:
    """The action set's own way of saying DONE."""
    text = action_set.render(ParsedAction((), "DONE"))
    assert isinstance(text, str)
    return text


def _split_trailing_enter(prims: tuple[Primitive, ...]) -> list[Primitive]:
    """``TypeText("ls\\n")`` -> ``TypeText("ls"), Press("enter")`` (how UI-TARS writes "type,
    then submit")."""
    out: list[Primitive] = []
    for p in prims:
        if isinstance(p, TypeText) and p.text.endswith("\n") and p.text.rstrip("\n"):
            stripped = p.text.rstrip("\n")
            out.append(TypeText(stripped))
            out.extend(Press("enter") for _ in range(len(p.text) - len(stripped)))
        else:
            out.append(p)
    return out


def oracle_script(task: Any, action_set: ActionSet, *, keep_waits: bool = False) -> list[str]:
    """The task's oracle as one action text per turn in ``action_set``'s syntax.

    One oracle action is one turn; pure ``time.sleep`` steps are dropped (``keep_waits``: kept as
    the set's WAIT) because the desktop already waits for the screen to settle; a final DONE (or
    the oracle's FAIL) is added.

    Raises:
        ValueError: the task has no oracle, or an oracle action cannot be expressed in the set.
    """
    oracle = getattr(task, "oracle", None)
    if not oracle:
        raise ValueError(f"task {getattr(task, 'id', task)!r} has no oracle to demonstrate")
    source = make_action_set("pyautogui", screen_size=action_set.screen_size)
    script: list[str] = []
    special = None
    for step in oracle:
        parsed = source.parse(step)
        prims = _split_trailing_enter(parsed.primitives)
        waits = [p for p in prims if isinstance(p, Wait)]
        prims = [p for p in prims if not isinstance(p, Wait)]
        if parsed.special in ("DONE", "FAIL"):
            special = parsed.special
        if not prims:
            if waits and keep_waits:
                script.append(_render(action_set, ParsedAction((), "WAIT")))
            continue
        script.append(_render(action_set, ParsedAction(tuple(prims))))
    script.append(_render(action_set, ParsedAction((), special or "DONE")))
    return script


def _render(action_set: ActionSet, parsed: ParsedAction) -> str:
    try:
        text = action_set.render(parsed)
    except ActionError as e:
        raise ValueError(
            f"the {action_set.name} action set cannot express {parsed.primitives}: {e}"
        ) from e
    assert isinstance(text, str)
    return text
