"""``OSWorldEnv``: an OSWorld desktop task as a Gymnasium environment.

One episode = one task on a clean desktop. The agent sees a screenshot and the instruction,
answers with text in the chosen action set, and gets the task evaluator's score on the final
step (when it says DONE/FAIL, or when ``max_steps`` truncates the episode, as OSWorld scores it).

>>> import gymnasium as gym, osworld_gym
>>> env = gym.make("OSWorld-v0", provider="fake", tasks=[osworld_gym.testing.FAKE_TASK])
>>> obs, info = env.reset(seed=0)
>>> obs["screenshot"].shape, info["task_id"]
((1080, 1920, 3), 'fake-always-fail')
>>> obs, reward, terminated, truncated, info = env.step("FAIL")
>>> reward, terminated, truncated, info["action_error"], info["infra_error"]
(1.0, True, False, None, None)
>>> env.close()

``info`` always carries ``task_id``, ``domain``, ``step``, ``variation`` (the instance's seed,
-1 for a default instance), ``action_error`` (the parser's message
when the action was rejected: nothing was executed), ``infra_error`` (set when the judge's side
failed, see below: the reward is then **not** a score and the episode is truncated),
``app_exits`` (task apps that died of a signal during the episode, e.g. ``"libreoffice (pid
52) died of SIGKILL"``), ``eval_note`` (on the final step, why the evaluator scored 0 without
comparing, e.g. ``"result unusable: ... is a directory"``) and ``timings`` in milliseconds.

What counts as an infrastructure error (``info["infra_error"]``, episode excluded) is only what
the *judge* side does: the guest server or X server not answering, setup steps failing (a
``postconfig`` step the guest refuses on the desktop the agent left, e.g. a window it closed,
is skipped as OSWorld skips it), a failure on the judge's own inputs (gold data missing, task
JSON, a metric that cannot score its gold against itself: see
:mod:`osworld_gym.evaluators.provenance`), host resources (a step or reset timeout) and the
transport. Everything the *player* side -- the agent's apps and whatever it runs in the
desktop -- can cause is scored: an unusable result file (a directory, ``chmod 000``, a fifo, a
symlink out of the desktop, a file over the size cap or one that unpacks to too much), output
over the cap, or a getter or metric raising on what the agent left scores 0 with the reason in
``eval_note``; a task app killed mid-episode (Linux does not say who sent
the signal, and the agent can ``kill -9`` its own apps) is scored normally on the state left
and listed in ``app_exits``; an evaluator failing *after* such an app exit is scored 0 (the
getter needed the app the agent's desktop lost). Unsafe task JSON is a
:class:`~osworld_gym.errors.TaskValidationError` from ``reset`` before anything runs. After a
failed ``reset``, ``step`` returns a truncated transition with ``infra_error`` set (a blank
screen) instead of raising, so wrappers and the passive env checker see a well-formed tuple.
Actions that are neither ``str`` nor (``computer_13``) a plain JSON ``dict`` are rejected by
type with an ``action_error`` before anything of the object runs (no ``repr``, no ``__eq__``).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from osworld_gym.actions import ActionSet, ParsedAction, make_action_set
from osworld_gym.actions.typecheck import action_type_error
from osworld_gym.errors import ActionError, EvaluatorError, InfraError, TaskError
from osworld_gym.evaluators import EvalContext, evaluate
from osworld_gym.evaluators.evaluate import EvalResult
from osworld_gym.protocol import DesktopClient
from osworld_gym.protocol.primitives import Wait
from osworld_gym.providers import Provider, make_provider
from osworld_gym.settle import SettleConfig, wait_until_settled
from osworld_gym.spaces import MAX_A11Y_CHARS, MAX_INSTRUCTION_CHARS, UnicodeText
from osworld_gym.support import resolve_tasks
from osworld_gym.tasks import SetupRunner, Task, TaskSet
from osworld_gym.tasks.validation import HostAccess, check_host_access, validate_task

log = logging.getLogger(__name__)

ObsType = dict[str, Any]


def default_cache_dir() -> Path:
    """``$OSWORLD_GYM_CACHE`` or ``~/.cache/osworld-gym``: task files in OSWorld's cache layout."""
    return Path(os.environ.get("OSWORLD_GYM_CACHE") or Path.home() / ".cache" / "osworld-gym")


class OSWorldEnv(gym.Env[ObsType, Any]):
    """A real desktop running one OSWorld-format task per episode.

    Args:
        provider: ``"local"`` (a sandboxed Xvfb desktop on this machine, the default),
            ``"fake"`` (canned frames; for API tests only), or a :class:`Provider` instance.
        tasks: where ``reset`` draws tasks from: ``"builtin"`` (our suite), anything
            :func:`osworld_gym.support.resolve_tasks` accepts, or ``None`` (then every reset must
            pass ``options={"task": ...}``).
        action_set: ``"pyautogui"``, ``"computer_13"``, ``"uitars"`` or an :class:`ActionSet`.
        screen_size: desktop size in pixels, ``(width, height)``.
        max_steps: steps before the episode is truncated (and scored).
        a11y_tree: add the accessibility tree (XML text) to observations.
        settle: how to wait for the screen after actions; ``None`` captures at once.
        wait_s: how long the special ``WAIT`` action sleeps.
        setup_retries: on a setup failure, restart the desktop and retry this many times.
        cache_dir: OSWorld-style file cache for task downloads and gold files.
        provider_kwargs: extra arguments for the provider named by ``provider``.
        action_set_kwargs: extra arguments for the action set named by ``action_set``.
        render_mode: ``"rgb_array"`` returns the latest screenshot from :meth:`render`.
        host_access: what of the host task setup may read or reach
            (:class:`~osworld_gym.tasks.validation.HostAccess`: ``file://`` and ``upload_file``
            roots besides the cache, ``allow_private_urls`` for loopback/private downloads).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(
        self,
        provider: str | Provider = "local",
        tasks: Any = "builtin",
        action_set: str | ActionSet = "pyautogui",
        *,
        screen_size: tuple[int, int] = (1920, 1080),
        max_steps: int = 15,
        a11y_tree: bool = False,
        settle: SettleConfig | None = SettleConfig(),
        wait_s: float = 2.0,
        setup_retries: int = 1,
        cache_dir: str | os.PathLike[str] | None = None,
        provider_kwargs: dict[str, Any] | None = None,
        action_set_kwargs: dict[str, Any] | None = None,
        render_mode: str | None = None,
        host_access: HostAccess | None = None,
    ):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.provider = make_provider(provider, screen_size=screen_size, **(provider_kwargs or {}))
        w, h = self.provider.screen_size
        self.screen_size: tuple[int, int] = (int(w), int(h))
        # what the tasks may use depends on the desktop: its provider, and on local desktops
        # its profile (gsettings)
        self.tasks: TaskSet | None = (
            None
            if tasks is None
            else resolve_tasks(tasks, provider=self.provider.desktop_capabilities())
        )
        self.action_set = (
            action_set
            if isinstance(action_set, ActionSet)
            else make_action_set(
                action_set, screen_size=self.screen_size, **(action_set_kwargs or {})
            )
        )
        self.max_steps = max_steps
        self.a11y_tree = a11y_tree
        self.settle = settle
        self.wait_s = wait_s
        self.setup_retries = setup_retries
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.render_mode = render_mode
        self.host_access = host_access or HostAccess()

        w, h = self.screen_size
        obs_spaces: dict[str, spaces.Space[Any]] = {
            "screenshot": spaces.Box(0, 255, (h, w, 3), np.uint8),
            "instruction": UnicodeText(MAX_INSTRUCTION_CHARS),
        }
        if a11y_tree:
            obs_spaces["accessibility_tree"] = UnicodeText(MAX_A11Y_CHARS)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = self.action_set.space()

        self._task: Task | None = None
        self._frame: np.ndarray | None = None
        self._steps = 0
        self._done = False
        self._needs_restart = False
        self._crash_baseline: int | None = None
        self._app_exits: list[str] = []
        self._reset_error: str | None = None
        self._last_action: str | None = None
        self._client: Any = None
        self._work_root: Path | None = None

    # -- gymnasium API ---------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start an episode on a clean desktop.

        The task is ``options["task"]`` (an id, a task dict or a :class:`Task`) when given, else
        ``tasks.for_seed(seed)`` when a seed is given (so ``make_vec`` sub-envs seeded
        ``seed + i`` get distinct tasks), else drawn with the env's RNG.

        Tasks with seeded variables (:mod:`osworld_gym.tasks.variation`) are instantiated with
        ``options["variation"]`` when given, else with ``seed``; a task named in ``options``
        without either gets its default instance, and a task drawn by the RNG a random one.
        """
        super().reset(seed=seed)
        self._task = None
        self._reset_error = "the last reset() failed"
        try:
            return self._reset(seed, options or {})
        except BaseException as e:
            self._reset_error = f"{type(e).__name__}: {e}"
            raise

    def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[ObsType, dict[str, Any]]:
        task = self._pick_task(seed, options.get("task"))
        variation = options.get("variation", seed)
        if variation is None and options.get("task") is None:
            variation = int(self.np_random.integers(2**31))
        task = task.instantiate(variation)
        validate_task(task)  # also tasks built with validate=False: nothing unsafe runs
        check_host_access(task, self.host_access)
        timings: dict[str, float] = {}
        t0 = time.monotonic()
        for attempt in range(self.setup_retries + 1):
            try:
                client = self._client_for_reset()
                t1 = time.monotonic()
                self.provider.reset_state()
                timings["desktop_reset_ms"] = 1000 * (time.monotonic() - t1)
                t1 = time.monotonic()
                self._runner(client, task).run(task.config)
                timings["setup_ms"] = 1000 * (time.monotonic() - t1)
                frame = self._observe_frame(client, timings, previous=None)
                # crashes from here on are the episode's (setup may kill apps its own way)
                self._crash_baseline = client.crash_count
                break
            except InfraError as e:
                self._needs_restart = True
                if attempt == self.setup_retries:
                    raise
                log.warning("reset of task %s failed (%s); restarting the desktop", task.id, e)
        timings["reset_ms"] = 1000 * (time.monotonic() - t0)
        self._task, self._frame, self._steps, self._done = task, frame, 0, False
        self._client = client
        self._last_action = None
        self._app_exits = []
        self._reset_error = None
        return self._obs(client), self._info(timings=timings)

    def step(self, action: Any) -> tuple[ObsType, float, bool, bool, dict[str, Any]]:
        if self._task is None and self._reset_error is not None:
            return self._failed_reset_step()
        if self._task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._done:
            raise gym.error.ResetNeeded("the episode has ended; call reset() before step()")
        self._steps += 1
        timings: dict[str, float] = {}
        action_error = infra_error = None
        special = None
        terminated = truncated = False
        reward = 0.0
        client = self._client

        eval_note = None
        t0 = time.monotonic()
        parsed: ParsedAction | None = None
        action_error = action_type_error(action)  # before anything of the object runs
        if action_error is None:
            try:
                parsed = self.action_set.parse(action)
            except ActionError as e:
                action_error = str(e)
            except Exception as e:  # noqa: BLE001 - a parser bug must not end the episode
                # agent text found a path the parser does not handle: still the agent's action,
                # rejected and executed nothing; logged so the parser can be fixed
                log.warning(
                    "action parser raised %s on a %d-character action",
                    type(e).__name__,
                    len(action) if type(action) is str else -1,
                    exc_info=True,
                )
                action_error = f"the action could not be parsed ({type(e).__name__})"
        timings["parse_ms"] = 1000 * (time.monotonic() - t0)
        self._last_action = (
            action
            if type(action) is str
            else repr(action)
            if action_error is None
            else "<rejected action>"
        )

        try:
            if parsed is not None:
                special = parsed.special
                if special == "FAIL":
                    self._last_action = "FAIL"
                self._execute(client, parsed, timings)
                terminated = special in ("DONE", "FAIL")
            # after input the screen may still be changing; after a pure wait it has had its time
            acted = parsed is not None and any(not isinstance(p, Wait) for p in parsed.primitives)
            self._frame = self._observe_frame(
                client, timings, previous=self._frame, settle=bool(acted)
            )
            self._note_app_exits(client)
            truncated = not terminated and self._steps >= self.max_steps
            if terminated or truncated:
                self._note_app_exits(client, refresh=True)
                t1 = time.monotonic()
                reward, eval_note = self._score(client)
                timings["eval_ms"] = 1000 * (time.monotonic() - t1)
        except InfraError as e:
            infra_error = f"{type(e).__name__}: {e}"
            log.warning(
                "infrastructure error in task %s step %d: %s", self._task.id, self._steps, e
            )
            self._needs_restart = True  # the desktop itself may be broken
            reward, terminated, truncated = 0.0, False, True

        self._done = terminated or truncated
        info = self._info(
            timings=timings,
            action_error=action_error,
            infra_error=infra_error,
            special=special,
            eval_note=eval_note,
        )
        obs = self._obs(client) if infra_error is None else self._obs(None)
        return obs, float(reward), terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array":
            return None if self._frame is None else self._frame.copy()
        return None

    def close(self) -> None:
        self.provider.stop()
        if self._work_root is not None:
            shutil.rmtree(self._work_root, ignore_errors=True)
            self._work_root = None
        super().close()

    # -- internals -------------------------------------------------------------------------------

    @property
    def task(self) -> Task | None:
        """The task of the current episode."""
        return self._task

    def _pick_task(self, seed: int | None, choice: Any) -> Task:
        if isinstance(choice, Task):
            return choice
        if isinstance(choice, dict):
            return Task.from_dict(choice)
        if choice is not None:
            if self.tasks is None:
                raise TaskError(
                    f"task {choice!r} named, but this env has no task set; pass a task dict"
                )
            return self.tasks[choice]
        if self.tasks is None or len(self.tasks) == 0:
            raise TaskError("this env has no tasks; pass options={'task': ...} to reset()")
        if seed is not None:
            return self.tasks.for_seed(seed)
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _client_for_reset(self):
        if self._needs_restart or not self.provider.running:
            self._needs_restart = False
            return self.provider.restart()
        return self.provider.start()

    def _runner(self, client: DesktopClient, task: Task) -> SetupRunner:
        return SetupRunner(
            client,
            cache_dir=self.cache_dir,
            task_id=task.id,
            client_password=self.provider.client_password,
            screen_size=self.screen_size,
            work_dir=self._work_dir(task),
            host_access=self.host_access,
        )

    def _work_dir(self, task: Task) -> Path:
        """This env's own directory for the task's fetched and generated files (see EvalContext)."""
        if self._work_root is None:
            self._work_root = Path(tempfile.mkdtemp(prefix="osworld-gym-episode-"))
        return self._work_root / task.id

    def _execute(
        self, client: DesktopClient, parsed: ParsedAction, timings: dict[str, float]
    ) -> None:
        t0 = time.monotonic()
        guest: dict = {}
        if parsed.primitives:  # every client sleeps Wait primitives itself, between its requests
            guest = client.run_actions(parsed.primitives).get("timings", {})
        if parsed.special == "WAIT":
            time.sleep(self.wait_s)
        timings["exec_ms"] = 1000 * (time.monotonic() - t0)
        timings["guest_exec_ms"] = float(guest.get("exec_ms", 0.0))
        # of which the pauses between the action's calls (until the desktop had reacted)
        timings["pace_ms"] = float(guest.get("pace_ms", 0.0))

    def _note_app_exits(self, client: DesktopClient, *, refresh: bool = False) -> None:
        """Record task apps the guest saw die of a signal since the reset, in ``app_exits``.

        A task app runs on the player's side: the agent can ``kill -9`` it from a terminal and
        nothing on Linux tells the guest who sent a signal, so such a death is the episode's
        outcome, scored like any other state (never an infrastructure error, or a policy could
        turn any failing episode into an excluded one). The count rides on every screenshot
        and action answer; ``refresh`` asks the guest directly (it reaps first), for the last
        look before scoring. Guests that do not count crashes (OSWorld's own server) report none.
        """
        baseline = self._crash_baseline
        if baseline is None or client.crash_count is None:
            return
        if refresh:
            client.health()
        if client.crash_count > baseline:
            crashes = client.crashes_after(baseline)
            self._app_exits.extend(str(c.get("describe", "a task app died")) for c in crashes)
            if not crashes:
                self._app_exits.append("a task app died")
            self._crash_baseline = client.crash_count

    def _observe_frame(
        self,
        client: DesktopClient,
        timings: dict[str, float],
        previous: np.ndarray | None,
        settle: bool = True,
    ) -> np.ndarray:
        t0 = time.monotonic()
        settled = None
        if self.settle is None or not settle:
            frame = client.screenshot_array()
        elif (
            self.settle.signal
            and previous is not None
            and (settled := client.settled_screenshot_array(self.settle.max_s)) is not None
        ):
            frame, facts = settled  # the guest watched the X server and the apps go idle
            timings.update(facts, settle_signal=1.0)
        else:  # after a reset's setup (no input to time from) or where the guest cannot tell
            frame, facts = wait_until_settled(client.screenshot_array, self.settle, previous)
            timings.update(facts, settle_signal=0.0)
        timings["observe_ms"] = 1000 * (time.monotonic() - t0)
        for k, v in client.last_timings.items():
            timings[f"screenshot_{k}"] = float(v)
        w, h = self.screen_size
        if frame.shape != (h, w, 3):
            raise InfraError(
                f"the desktop's screen is {frame.shape[1]}x{frame.shape[0]}, but the env "
                f"was made for {w}x{h}; pass screen_size=({frame.shape[1]}, {frame.shape[0]})"
            )
        return frame

    def _score(self, client: DesktopClient) -> tuple[float, str | None]:
        """``(score, note)``: the evaluator's score and, for a 0, why (when it says)."""
        assert self._task is not None
        ctx = EvalContext(
            client=client,
            cache_dir=self.cache_dir / self._task.id,
            task_id=self._task.id,
            last_action=self._last_action,
            screen_size=self.screen_size,
            client_password=self.provider.client_password,
            work_dir=self._work_dir(self._task),
        )
        try:
            result = evaluate(self._task, ctx, self._runner(client, self._task))
        except EvaluatorError as e:
            if not self._app_exits:
                raise
            # the getter needed an app the agent's desktop lost (e.g. CDP of a killed browser)
            return 0.0, (
                f"evaluation failed after task apps died during the episode "
                f"({'; '.join(self._app_exits)}): {e}"
            )
        return float(result.score), _zero_note(result)

    def _failed_reset_step(self) -> tuple[ObsType, float, bool, bool, dict[str, Any]]:
        """The transition of a step after a failed reset: blank screen, truncated, infra_error
        (so gymnasium's checker and vector wrappers get a well-formed tuple, not an exception)."""
        w, h = self.screen_size
        obs: ObsType = {"screenshot": np.zeros((h, w, 3), np.uint8), "instruction": ""}
        if self.a11y_tree:
            obs["accessibility_tree"] = ""
        info = self._info(
            timings={}, infra_error=f"ResetFailed: {self._reset_error}; call reset() again"
        )
        return obs, 0.0, False, True, info

    def _obs(self, client) -> ObsType:
        assert self._task is not None and self._frame is not None
        # after an infrastructure error the last good frame is repeated: hand out a copy of it
        frame = self._frame if client is not None else self._frame.copy()
        obs: ObsType = {"screenshot": frame, "instruction": self._task.instruction}
        if self.a11y_tree:
            tree = None
            if client is not None:
                try:
                    tree = client.accessibility()
                except InfraError as e:
                    log.warning("accessibility tree unavailable: %s", e)
            obs["accessibility_tree"] = tree or ""
        return obs

    def _info(
        self,
        *,
        timings: dict[str, float],
        action_error: str | None = None,
        infra_error: str | None = None,
        special: str | None = None,
        eval_note: str | None = None,
    ) -> dict[str, Any]:
        task = self._task
        return {
            "task_id": task.id if task else None,
            "domain": task.domain if task else None,
            "step": self._steps,
            "action_error": action_error,
            "infra_error": infra_error,
            "special": special,
            "app_exits": list(self._app_exits),
            "eval_note": eval_note,
            # judge and agent separated (README "Threat model"); None: the provider cannot tell
            "separated": getattr(self.provider, "separated", None),
            "variation": _variation_seed(task),
            "timings": timings,
        }


def osworld_env(env: gym.Env) -> OSWorldEnv:
    """The :class:`OSWorldEnv` under ``env``'s wrappers (``gym.make`` adds some), typed: read its
    ``task``, ``tasks`` or ``provider`` through this rather than through a wrapper.

    Raises:
        TypeError: ``env`` is not an OSWorldEnv, nor a wrapper around one.
    """
    inner = env.unwrapped
    if not isinstance(inner, OSWorldEnv):
        raise TypeError(f"expected an OSWorldEnv (or a wrapper around one), got {inner!r}")
    return inner


def _zero_note(result: EvalResult) -> str | None:
    """Why the evaluator scored 0 without comparing (a missing or unusable result), if so."""
    if result.score != 0.0:
        return None
    notes = [m["note"] for m in result.details.get("metrics", []) if m.get("note")]
    if result.details.get("note"):
        notes.insert(0, result.details["note"])
    return "; ".join(notes) or None


def _variation_seed(task: Task | None) -> int:
    """The task instance's variation seed; -1 for a default instance or a task without variables.

    Always an int, so vector envs can batch it.
    """
    seed = task.raw.get("variation", {}).get("seed") if task else None
    return -1 if seed is None else int(seed)
