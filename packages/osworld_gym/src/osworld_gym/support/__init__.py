"""Support: which tasks a backend can run, and why not; proving the tasks solvable.

This floor sits above :mod:`osworld_gym.tasks` (task records) and :mod:`osworld_gym.evaluators`
(getters, metrics) and reads both, and the providers' capabilities:

* :func:`load_tasks`, :func:`builtin_tasks`, :func:`builtin_task` (:mod:`.load`): tasks read,
  validated, and those a provider cannot run left out (``TaskSet.unsupported`` says why);
* :func:`resolve_tasks` (:mod:`.specs`): what a ``--tasks`` spec means, for every CLI
  (``builtin:DOMAIN``, ``pixels:...``, id lists, task lists, OSWorld folders);
* :func:`classify` (:mod:`.classifier`): can a task run on a provider, and the reasons why not;
* :mod:`.coverage`: classify a whole OSWorld task set, grouped by reason
  (``osworld-gym tasks coverage``);
* :mod:`.needs`: network steps, systemd and missing programs, three of the classifier's checks;
* :mod:`.programs`: the programs a task runs (also read by ``osworld-gym doctor``);
* :mod:`.packages`: the Debian package of each program, and the desktop's PATH;
* :mod:`.check`: play every task's oracle and a do-nothing agent (``osworld-gym tasks check``).

>>> from osworld_gym.support import classify
>>> classify({"id": "t", "instruction": "x", "evaluator": {"func": "infeasible"}}).supported
True
"""

from osworld_gym.providers.capabilities import Capabilities, local_capabilities
from osworld_gym.support.classifier import Support, capabilities, classify
from osworld_gym.support.load import builtin_task, builtin_tasks, load_tasks
from osworld_gym.support.specs import (
    TASK_LIST_KIND,
    TaskSpecError,
    read_id_list,
    resolve_tasks,
    write_task_list,
)

__all__ = [
    "TASK_LIST_KIND",
    "TaskSpecError",
    "Capabilities",
    "Support",
    "builtin_task",
    "builtin_tasks",
    "capabilities",
    "classify",
    "load_tasks",
    "local_capabilities",
    "read_id_list",
    "resolve_tasks",
    "write_task_list",
]
