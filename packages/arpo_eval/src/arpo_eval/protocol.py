"""Scoring protocols: what happens to the agent's answer at the step limit.

Both protocols give the agent ``max_steps`` turns (OSWorld and ARPO: 15) and score an episode
with the task's own evaluator (fractional scores are kept as they are). They differ only in the
**last allowed turn** (turn ``max_steps``), when the agent has not ended the episode itself:

``standard`` (OSWorld, as UI-TARS is evaluated there)
    OSWorld's UI-TARS agent (``mm_agents/uitars_agent.py``) returns ``FAIL`` instead of its
    model's answer once its history reaches ``max_trajectory_length`` (= ``max_steps``): the
    answer is **replaced** by ``FAIL`` and never executed. We do the same: at turn
    ``max_steps`` an answer that is an ordinary GUI action, or that cannot be parsed, is
    replaced by ``FAIL``. The desktop then ends the episode on ``FAIL`` and scores it as
    OSWorld's ``DesktopEnv.evaluate`` does:

    * infeasible task (``evaluator.func == "infeasible"``): **1** (the last action is FAIL);
    * any other task: **0** (OSWorld scores a final FAIL on a feasible task 0, whatever the
      desktop shows).

    An answer that is itself ``DONE``, ``FAIL`` or ``WAIT`` is kept (the UI-TARS agent returns
    those before its replacement check): DONE/FAIL end the episode as usual; a final WAIT
    truncates it and the evaluator scores the desktop with WAIT as the last action (infeasible
    → 0).

``hard`` (ARPO's "OSWorld Hard", Table 1: "forbids replacing the last action with FAIL at the
step limit")
    Nothing is replaced. The last answer is executed, the episode is truncated, and the
    evaluator scores the desktop as it is:

    * infeasible task: **0** unless the agent itself answered FAIL;
    * any other task: whatever the evaluator says about the final desktop (an agent that did
      the work but never said DONE can still score 1).

Episodes the agent ends before the limit (DONE/FAIL) score identically under both protocols.
An agent that runs out of turns therefore gains the infeasible tasks under ``standard`` (a
floor of ~8% on OSWorld's 369 tasks, OSWorld#177) and can gain feasible ones only under
``hard``. Episodes whose desktop or evaluator failed are never scored (see
:mod:`arpo_eval.runner`).

>>> from osworld_gym.actions import make_action_set
>>> aset = make_action_set("uitars", screen_size=(1920, 1080))
>>> click = "Thought: open it\\nAction: click(start_box='(10,10)')"
>>> last_action(Protocol.STANDARD, click, turn=15, max_steps=15, action_set=aset)
('FAIL', True)
>>> last_action(Protocol.STANDARD, click, turn=14, max_steps=15, action_set=aset)[1]
False
>>> last_action(Protocol.HARD, click, turn=15, max_steps=15, action_set=aset)[1]
False
>>> last_action(Protocol.STANDARD, "Action: finished(content='')", turn=15, max_steps=15,
...             action_set=aset)
("Action: finished(content='')", False)
"""

from __future__ import annotations

import enum
import logging

from osworld_gym.actions import ActionSet
from osworld_gym.errors import ActionError

log = logging.getLogger(__name__)

#: What replaces the last answer under the standard protocol (every action set accepts it).
FAIL = "FAIL"


class Protocol(str, enum.Enum):  # noqa: UP042 - str() and f-strings name the member
    """How the step limit is scored (module docstring)."""

    STANDARD = "standard"
    HARD = "hard"

    @classmethod
    def parse(cls, value: str | Protocol) -> Protocol:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(
                f"unknown protocol {value!r}; choose 'standard' (OSWorld) or 'hard' (OSWorld Hard)"
            ) from None


def last_action(
    protocol: Protocol | str, text: str, *, turn: int, max_steps: int, action_set: ActionSet
) -> tuple[str, bool]:
    """The action to execute for the agent's answer ``text`` at turn ``turn`` (1-based).

    Returns:
        ``(action, replaced)``: ``("FAIL", True)`` when the standard protocol replaces the answer,
        else ``(text, False)``.
    """
    if Protocol.parse(protocol) is Protocol.HARD or turn < max_steps:
        return text, False
    try:
        special = action_set.parse(text).special
    except ActionError:
        special = None
    if special in ("DONE", "FAIL", "WAIT"):
        return text, False
    log.debug("turn %d is the last: the answer is replaced by FAIL (standard protocol)", turn)
    return FAIL, True
