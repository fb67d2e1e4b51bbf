"""One task: the OSWorld task JSON record, checked and typed.

>>> t = Task.from_dict({
...     "id": "demo-1", "instruction": "Create ~/x", "related_apps": ["os"],
...     "config": [{"type": "sleep", "parameters": {"seconds": 1}}],
...     "evaluator": {"func": "exact_match",
...                   "result": {"type": "vm_command_line", "command": "ls ~"},
...                   "expected": {"type": "rule", "rules": {"expected": "x\\n"}}},
... })
>>> t.domain, t.is_infeasible, len(t.config)
('os', False, 1)
>>> Task.from_dict({"id": "demo-2", "instruction": "hi", "evaluator": {"func": "nope"}})
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
osworld_gym.errors.TaskError: task 'demo-2': evaluator.func names unknown metric 'nope' (...)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from osworld_gym.errors import TaskError
from osworld_gym.tasks.evaluator_spec import validate_evaluator
from osworld_gym.tasks.setup import validate_steps
from osworld_gym.tasks.validation import check_task_id, normalize_booleans, validate_task
from osworld_gym.tasks.variation import instantiate_dict

#: related_apps / snapshot spellings that differ from OSWorld's domain folder names.
DOMAIN_ALIASES: dict[str, str] = {"vscode": "vs_code", "multiapps": "multi_apps"}


@dataclass(frozen=True)
class Task:
    """A desktop task in OSWorld's JSON format.

    Attributes:
        id: unique task id (OSWorld uses UUIDs; ours look like ``os-mkdir-001``).
        instruction: what the agent is asked to do.
        domain: the group the task belongs to (``os``, ``chrome``, ``text_editor``, ...).
        config: setup steps run at reset (see :mod:`osworld_gym.tasks.setup`).
        evaluator: ``func``/``result``/``expected``/``options``/``conj``/``postconfig``
            (see :mod:`osworld_gym.evaluators`).
        related_apps: applications the task involves.
        snapshot: OSWorld's VM snapshot name (informational; OSWorld ignores it too).
        source: where the task came from (a URL or "authors").
        proxy: OSWorld's flag for tasks that need a residential proxy.
        oracle: optional proof of solvability: pyautogui action strings that solve the task
            through the GUI (``"pyautogui.hotkey('ctrl', 's')"``, ``"time.sleep(1)"``, ``"FAIL"``).
        raw: the original JSON object (unknown fields included), as loaded.
    """

    id: str
    instruction: str
    domain: str
    config: list[dict[str, Any]] = field(default_factory=list)
    evaluator: dict[str, Any] = field(default_factory=dict)
    related_apps: list[str] = field(default_factory=list)
    snapshot: str | None = None
    source: str | None = None
    proxy: bool = False
    oracle: list[str] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    template: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def variables(self) -> dict[str, Any]:
        """The task's seeded variables (see :mod:`osworld_gym.tasks.variation`), if any."""
        return dict((self.template or {}).get("variables") or {})

    def instantiate(self, seed: int | None) -> Task:
        """The instance of this task for a variation seed (``None``: the default instance).

        Tasks without variables return themselves.
        """
        if self.template is None:
            return self
        task = Task.from_dict(instantiate_dict(self.template, seed), domain=self.domain)
        return replace(task, template=self.template)

    @property
    def is_infeasible(self) -> bool:
        """True for tasks whose correct answer is the ``FAIL`` action."""
        return self.evaluator.get("func") == "infeasible"

    @classmethod
    def from_dict(
        cls,
        d: Any,
        domain: str | None = None,
        *,
        origin: str | None = None,
        validate: bool = True,
    ) -> Task:
        """Build a task from its JSON object, checking every field.

        Args:
            d: the task JSON object.
            domain: the domain, when known from where the task was found (e.g. the meta file);
                otherwise ``d["domain"]``, else the single entry of ``related_apps`` (several
                apps: ``multi_apps``), else ``snapshot``, else ``"unknown"``.
            origin: where ``d`` came from (a file path), added to error messages.
            validate: also check setup steps and the evaluator against what osworld-gym
                supports (:meth:`validate`).

        Raises:
            TaskError: naming the task id, the field and what is wrong.
        """
        where = f" (in {origin})" if origin else ""
        if not isinstance(d, dict):
            raise TaskError(f"a task must be a JSON object, got {type(d).__name__}{where}")
        task_id = d.get("id")
        if not isinstance(task_id, str) or not task_id.strip():
            raise TaskError(f"task without a valid 'id' field{where}: got {task_id!r}")
        who = f"task {task_id!r}{where}"
        template = None
        if d.get("variables") and "variation" not in d:
            if not isinstance(d["variables"], dict):
                raise TaskError(f"{who}: field 'variables' must be an object")
            template, d = d, instantiate_dict(d, None)

        def need(name: str, kind: type, default: Any = None) -> Any:
            value = d.get(name)
            if value is None:
                return default
            if not isinstance(value, kind):
                raise TaskError(
                    f"{who}: field {name!r} must be {_kind_name(kind)}, got {type(value).__name__}"
                )
            return value

        instruction = need("instruction", str, "")
        if not instruction.strip():
            raise TaskError(f"{who}: field 'instruction' is missing or empty")
        config = copy.deepcopy(need("config", list, []))
        evaluator = copy.deepcopy(d.get("evaluator"))
        if not isinstance(evaluator, dict):
            raise TaskError(f"{who}: field 'evaluator' must be an object, got {evaluator!r}")
        normalize_booleans(config)  # OSWorld writes "shell": "true"
        normalize_booleans(evaluator)
        related_apps = need("related_apps", list, [])
        if not all(isinstance(a, str) for a in related_apps):
            raise TaskError(f"{who}: field 'related_apps' must be a list of strings")
        snapshot = need("snapshot", str)
        source = d.get("source")
        if source is not None and not isinstance(source, str):
            source = str(source)
        proxy = need("proxy", bool, False)
        oracle = d.get("oracle")
        if oracle is not None and not (
            isinstance(oracle, list) and all(isinstance(a, str) for a in oracle)
        ):
            raise TaskError(f"{who}: field 'oracle' must be a list of action strings")
        explicit = domain or need("domain", str)
        task = cls(
            id=task_id,
            instruction=instruction,
            domain=explicit or infer_domain(related_apps, snapshot),
            config=config,
            evaluator=evaluator,
            related_apps=list(related_apps),
            snapshot=snapshot,
            source=source,
            proxy=proxy,
            oracle=list(oracle) if oracle is not None else None,
            raw=copy.deepcopy(d),
            template=copy.deepcopy(template),
        )
        if validate:
            task.validate(origin=origin)
        return task

    def validate(self, *, origin: str | None = None) -> None:
        """Check setup steps and evaluator against what osworld-gym can run.

        Raises:
            TaskError: an unknown or malformed step, getter or metric;
                :class:`~osworld_gym.errors.TaskValidationError` for an unsafe id, path, URL or
                number (:mod:`osworld_gym.tasks.validation`).
        """
        try:
            check_task_id(self.id)
            validate_steps(self.config, phase="config", task_id=self.id)
            validate_evaluator(self.evaluator, task_id=self.id)
            validate_task(self)
        except TaskError as exc:
            if origin:
                raise TaskError(f"{exc} (in {origin})") from None
            raise

    def to_dict(self) -> dict[str, Any]:
        """The task as a JSON object (the loaded one, with ``domain`` added when missing)."""
        out = copy.deepcopy(self.raw) if self.raw else {}
        out.update(
            id=self.id,
            instruction=self.instruction,
            config=copy.deepcopy(self.config),
            evaluator=copy.deepcopy(self.evaluator),
            related_apps=list(self.related_apps),
        )
        out.setdefault("domain", self.domain)
        if self.oracle is not None:
            out["oracle"] = list(self.oracle)
        return out


def infer_domain(related_apps: list[str], snapshot: str | None) -> str:
    """Guess a task's domain from ``related_apps`` and ``snapshot`` (OSWorld spellings mapped).

    >>> infer_domain(["vscode"], "vscode"), infer_domain(["chrome", "gimp"], None)
    ('vs_code', 'multi_apps')
    >>> infer_domain([], "os"), infer_domain([], None)
    ('os', 'unknown')
    """
    if len(related_apps) == 1:
        name = related_apps[0]
    elif len(related_apps) > 1:
        name = "multi_apps"
    elif snapshot:
        name = snapshot
    else:
        name = "unknown"
    return DOMAIN_ALIASES.get(name, name)


def _kind_name(kind: type) -> str:
    names = {str: "a string", list: "a list", bool: "true or false", dict: "an object"}
    return names.get(kind, kind.__name__)
