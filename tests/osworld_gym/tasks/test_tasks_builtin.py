"""Built-in tasks: every one loads, validates, and carries an oracle the action set accepts.

Whether the oracles really solve their tasks, and whether doing nothing scores 0, is proven on
live desktops in test_builtin_oracles.py.
"""

from __future__ import annotations

import pytest
from osworld_gym.evaluators import validate_evaluator
from osworld_gym.support import builtin_task, builtin_tasks, load_tasks
from osworld_gym.tasks import BUILTIN_DIR, Task

TASKS = builtin_tasks()


def test_the_suite_has_at_least_100_tasks_in_8_domains_with_infeasible_ones():
    assert len(TASKS) >= 100
    assert {
        "os",
        "terminal",
        "text_editor",
        "libreoffice_calc",
        "libreoffice_writer",
        "libreoffice_impress",
        "chrome",
        "multi_apps",
    } <= set(TASKS.domains())
    assert sum(t.is_infeasible for t in TASKS) >= 5
    assert builtin_tasks("text_editor").domains() == ["text_editor"]


def test_load_tasks_builtin_alias():
    assert load_tasks("builtin").ids() == TASKS.ids()
    assert load_tasks("builtin", domains="os").domains() == ["os"]


@pytest.mark.parametrize("task", list(TASKS), ids=lambda t: t.id)
def test_builtin_task_is_well_formed(task: Task):
    assert task.id.startswith(f"{task.domain}-") and task.id[-4] == "-"
    assert task.instruction.strip() and task.oracle
    validate_evaluator(task.evaluator, task_id=task.id)
    # the task file alone (without the meta file) loads the same task
    single = load_tasks(BUILTIN_DIR / "examples" / task.domain / f"{task.id}.json")[0]
    assert single == task
    assert builtin_task(task.id) == task


@pytest.mark.parametrize("task", list(TASKS), ids=lambda t: t.id)
def test_oracle_actions_parse_in_the_pyautogui_action_set(task: Task):
    from osworld_gym.actions import make_action_set

    action_set = make_action_set("pyautogui")
    parsed = [action_set.parse(a) for a in task.oracle or []]
    assert all(p.primitives or p.special for p in parsed)
    if task.is_infeasible:
        assert parsed[-1].special == "FAIL"
