"""Official OSWorld tasks solved on local desktops: a correct answer scores 1, a near miss 0.

For each task in :data:`official_solutions.SOLUTIONS` (or a sample: ``OSWORLD_SOLUTIONS=N``,
default 2 tasks, one per domain in turn; ``all`` for the whole set), the test fills a temporary
OSWorld-layout cache with the solution's own files and stand-ins for the rest
(:mod:`standins`), then plays the solution's actions through ``env.step`` on a real desktop, as
an agent would, and requires no infrastructure error and a score of exactly 1 for the correct
answer and 0 for the wrong one. Run it by domain with ``-k libreoffice_calc/``.

``OSWORLD_SOLUTIONS_REPORT=FILE`` appends one JSON line per episode (id, domain, variant,
reward, seconds); the observations of an episode that did not score as expected are saved as
PNGs (the path is in the failure message), of every episode with ``OSWORLD_SOLUTIONS_SHOTS=DIR``.
A solution that needs another branch's fix first (``Solution.after``) is ``xfail`` until then.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
from official_solutions import NEW_WINDOW, READY_S, SOLUTIONS, WAIT_PREFIX, Solution
from osworld_examples import OFFICIAL, SKIP_REASON
from osworld_gym.episodes.loop import run_episode
from osworld_gym.support.classifier import capabilities, classify
from osworld_gym.support.coverage import official_tasks
from osworld_gym.tasks.task import Task
from standins import ffmpeg_available, fill_cache, needed_files

DEFAULT_SAMPLE = 2
VARIANTS = ("correct", "wrong")


def _examples(config: pytest.Config) -> Path:
    option = config.getoption("--osworld-examples", default=None)
    return Path(option) if option else OFFICIAL


def solved_tasks(root: Path) -> list[tuple[str, dict[str, Any], Solution]]:
    """``(domain, task json, solution)`` for every solution, in SOLUTIONS' order.

    Raises:
        LookupError: a solution names no official task, or one not supported here.
    """
    tasks = {raw["id"]: (d, raw) for d, raw in official_tasks(root)}
    caps = capabilities("local")
    out = []
    for sol in SOLUTIONS:
        found = [tasks[i] for i in tasks if i.startswith(sol.task)]
        if len(found) != 1:
            raise LookupError(f"solution {sol.task!r} matches {len(found)} official tasks")
        domain, raw = found[0]
        if not classify(raw, caps).supported:
            raise LookupError(f"solution {sol.task!r}: the task is not supported here")
        out.append((domain, raw, sol))
    return out


def sample(tasks: list[Any], n: int | None) -> list[Any]:
    """``n`` tasks taking each domain in turn (in the order listed), or all of them."""
    if n is None:
        return tasks
    by_domain: dict[str, list[Any]] = {}
    for t in tasks:
        by_domain.setdefault(t[0], []).append(t)
    rounds = zip_longest(*by_domain.values())
    return [t for rnd in rounds for t in rnd if t is not None][:n]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "solved" not in metafunc.fixturenames:
        return
    root = _examples(metafunc.config)
    if not (root / "test_all.json").is_file():
        reason = SKIP_REASON if root == OFFICIAL else f"no test_all.json in {root}"
        metafunc.parametrize("solved", [pytest.param(None, marks=pytest.mark.skip(reason=reason))])
        return
    wanted = os.environ.get("OSWORLD_SOLUTIONS", str(DEFAULT_SAMPLE))
    tasks = sample(solved_tasks(root), None if wanted == "all" else int(wanted))
    params = []
    for domain, raw, sol in tasks:
        for variant in VARIANTS:
            marks = []
            if variant == "correct" and sol.after:
                marks.append(pytest.mark.xfail(reason=f"needs {sol.after}", strict=False))
            params.append(
                pytest.param(
                    (domain, raw, sol, variant),
                    id=f"{domain}/{raw['id'][:8]}-{variant}",
                    marks=marks,
                )
            )
    metafunc.parametrize("solved", params)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator:
    import gymnasium as gym
    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    if not ffmpeg_available():
        pytest.skip("stand-in media files need ffmpeg (scripts/install.sh)")
    cache = tmp_path_factory.mktemp("osworld-cache")
    e = gym.make("OSWorld-v0", provider="local", tasks=None, cache_dir=cache, max_steps=40)
    e.unwrapped.standin_cache = cache
    try:
        yield e
    finally:
        e.close()


def place_files(raw: dict[str, Any], sol: Solution, cache: Path) -> None:
    """Write the solution's files where the task reads them, then stand-ins for the rest."""
    needed = [path for path, _ in needed_files(raw, cache)]
    for name, make in sol.files.items():
        paths = [p for p in needed if p.name == name or p.name.endswith(f"_{name}")]
        assert paths, f"{sol.task}: the task reads no file named {name!r} ({needed})"
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(make())
    fill_cache(raw, cache)


class RecordingAgent:
    """Plays a solution's script, waiting where it says, and saves each observation if asked.

    Waiting is the agent's own time (no step): before the first action until the task's window
    is open (``ready``), and wherever the script holds ``wait_for(title)``, it reads the
    desktop's window titles (``wmctrl -l``, judge side) every half second, as an agent would
    look at screenshots, up to :data:`official_solutions.READY_S`.
    """

    def __init__(self, script: list[str], shots: Path | None, ready: str, env: Any):
        self.steps = [a for a in script if not a.startswith(WAIT_PREFIX)]
        self.waits: dict[int, list[str]] = {}
        n = 0
        for a in script:
            if a.startswith(WAIT_PREFIX):
                self.waits.setdefault(n, []).append(a[len(WAIT_PREFIX) :])
            else:
                n += 1
        if ready:
            self.waits.setdefault(0, []).insert(0, ready)
        self.shots, self.env = shots, env
        #: the observations seen, as PNG bytes (written by :meth:`save`)
        self.frames: list[bytes] = []
        self.turn = 0
        self.waited_s: list[float | None] = []
        #: window ids open before the action a ``new:`` wait follows
        self.before: set[str] = set()

    def reset(self, task: Any) -> None:
        self.turn = 0

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        for i, png in enumerate(self.frames):
            (folder / f"{i:02d}.png").write_bytes(png)
        return folder

    def _windows(self) -> dict[str, str]:
        """``{window id: title}`` of the desktop's windows (``wmctrl -l``)."""
        out = self.env.unwrapped._client.execute(["wmctrl", "-l"], timeout=10).get("output")
        rows = [line.split(None, 3) for line in (out or "").splitlines()]
        return {r[0]: r[3] if len(r) > 3 else "" for r in rows if r}

    def wait_for(self, title: str) -> None:
        """Wait for a window titled like ``title``; ``new:title`` wants one that was not open
        before the previous action (a terminal opened next to one setup opened)."""
        new = title.startswith(NEW_WINDOW)
        title = title.removeprefix(NEW_WINDOW)
        t0 = time.monotonic()
        while time.monotonic() - t0 < READY_S:
            found = [i for i, t in self._windows().items() if title in t]
            if any(i not in self.before for i in found) if new else found:
                self.waited_s.append(round(time.monotonic() - t0, 1))
                time.sleep(1)  # let the window draw and take focus
                return
            time.sleep(0.5)
        self.waited_s.append(None)

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        for title in self.waits.get(self.turn, []):
            self.wait_for(title)
        if self.shots is not None:
            import io

            from PIL import Image

            buf = io.BytesIO()
            Image.fromarray(obs["screenshot"]).save(buf, "PNG")
            self.frames.append(buf.getvalue())
        if self.turn >= len(self.steps):
            raise RuntimeError("the episode did not end after the last action")
        if any(t.startswith(NEW_WINDOW) for t in self.waits.get(self.turn + 1, [])):
            self.before = set(self._windows())
        self.turn += 1
        return self.steps[self.turn - 1]


def test_official_task_solved_scores_1_and_a_near_miss_scores_0(env, solved, tmp_path):
    domain, raw, sol, variant = solved
    cache = env.unwrapped.standin_cache
    place_files(raw, sol, cache)
    task = Task.from_dict(raw, domain)
    script = [*sol.correct, sol.final] if variant == "correct" else [*sol.wrong, sol.wrong_final]
    shots = os.environ.get("OSWORLD_SOLUTIONS_SHOTS")
    folder = Path(shots) if shots else tmp_path
    agent = RecordingAgent(script, folder, sol.ready, env)
    t0 = time.monotonic()
    res = run_episode(env, agent, task, stop_on_action_error=True)
    outcome = {
        "id": task.id,
        "domain": domain,
        "variant": variant,
        "reward": res.score,
        "error": res.error,
        "steps": res.steps,
        "waited_s": agent.waited_s,
        "seconds": round(time.monotonic() - t0, 1),
    }
    want = 1.0 if variant == "correct" else 0.0
    if shots or res.error is not None or res.score != want:
        outcome["screenshots"] = str(agent.save(folder / f"{raw['id'][:8]}-{variant}"))
    if report := os.environ.get("OSWORLD_SOLUTIONS_REPORT"):
        with open(report, "a") as f:
            f.write(json.dumps(outcome) + "\n")
    assert res.error is None, f"{res.error} (screenshots: {outcome.get('screenshots')})"
    because = "" if variant == "correct" else f"; it {sol.wrong_because}"
    assert res.score == want, (
        f"the {variant} answer scored {res.score}{because} "
        f"(screenshots: {outcome.get('screenshots')})"
    )


def test_every_solution_names_one_supported_official_task_and_its_files(request, tmp_path):
    root = _examples(request.config)
    if not (root / "test_all.json").is_file():
        pytest.skip(SKIP_REASON)
    solved = solved_tasks(root)
    domains = {d for d, _, _ in solved}
    assert len(solved) >= 25
    assert domains == {d for d, _ in official_tasks(root)} - {"vs_code"}, domains
    for _, raw, sol in solved:
        assert sol.correct != sol.wrong or sol.final != sol.wrong_final, sol.task
        needed = [p.name for p, _ in needed_files(raw, tmp_path)]
        for name in sol.files:
            assert any(n == name or n.endswith(f"_{name}") for n in needed), (sol.task, name)
