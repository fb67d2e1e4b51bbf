"""Tasks: OSWorld task JSON, loaded, validated, set up on a desktop.

* :class:`Task` (:mod:`.task`): one task record; :func:`load_tasks` / :class:`TaskSet`
  (:mod:`.loader`): files, directories, OSWorld ``evaluation_examples``.
* :class:`SetupRunner` (:mod:`.setup`): runs ``config``/``postconfig`` steps.
* :mod:`.cache`: OSWorld's host file cache layout and downloads; :mod:`.placeholders`:
  ``{CLIENT_PASSWORD}`` and friends; :mod:`.paths`: guest path rules.
* :func:`builtin_tasks` (:mod:`.builtin`): tasks shipped with osworld-gym.

>>> from osworld_gym.tasks import builtin_tasks
>>> len(builtin_tasks()) >= 10
True
"""

from osworld_gym.tasks.builtin import BUILTIN_DIR, builtin_task, builtin_tasks
from osworld_gym.tasks.cache import cloud_file_cache_path, download_cache_path, fetch
from osworld_gym.tasks.loader import TaskSet, load_tasks
from osworld_gym.tasks.paths import GUEST_HOME, guest_path
from osworld_gym.tasks.placeholders import placeholder_values, substitute
from osworld_gym.tasks.setup import SetupRunner, validate_steps
from osworld_gym.tasks.task import Task
from osworld_gym.tasks.validation import HostAccess

__all__ = [
    "BUILTIN_DIR",
    "GUEST_HOME",
    "HostAccess",
    "SetupRunner",
    "Task",
    "TaskSet",
    "builtin_task",
    "builtin_tasks",
    "cloud_file_cache_path",
    "download_cache_path",
    "fetch",
    "guest_path",
    "load_tasks",
    "placeholder_values",
    "substitute",
    "validate_steps",
]
