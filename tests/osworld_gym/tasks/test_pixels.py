"""The pixel family (osworld_gym.tasks.pixels): seeded layouts, held-out split, real scoring.

The family's tasks are generated, not stored, so these tests check the generator's promises on
every kind and split (distinct cells, targets on screen, held-out never equal to a training
instance), then play instances on real desktops: the oracle scores 1, doing nothing 0, a wrong or
extra click 0, and what the agent can do from its own desktop (kill the app and answer on its
port, Tk's ``send``, ptrace) does not score.
"""

from __future__ import annotations

import ast
import json

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from osworld_gym.errors import TaskError
from osworld_gym.support import load_tasks
from osworld_gym.tasks import pixels
from osworld_gym.tasks.assets import generate
from osworld_gym.tasks.pixels.layout import CANVAS, CELL, KINDS, SPLITS, make_layout

N = 64


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_instance_shows_its_targets_in_distinct_cells_inside_the_canvas(kind, split):
    for lay in pixels.family_layouts(split, kind, N):
        widgets = [*lay.buttons, *lay.items]
        cells = [b.cell for b in widgets]
        assert len(set(cells)) == len(cells), (lay.index, cells)
        for b in widgets:
            col, row = b.cell
            assert col * CELL[0] <= b.x and b.x + b.w <= (col + 1) * CELL[0], (lay.index, b)
            assert row * CELL[1] <= b.y and b.y + b.h <= (row + 1) * CELL[1], (lay.index, b)
            assert b.x + b.w <= CANVAS[0] and b.y + b.h <= CANVAS[1]
        names = [b.name for b in widgets]
        assert set(lay.targets) <= set(names) and len(set(lay.targets)) == len(lay.targets)
        assert all(t in lay.instruction for t in lay.targets)
        assert len(lay.expected_events) == KINDS[kind]["steps"]
        # the oracle's points hit exactly the widgets to click, in order
        menu_open = False
        for (x, y), name in zip(lay.target_points(), lay.expected_events, strict=True):
            hit = lay.hit(x, y, menu_open=menu_open)
            assert hit is not None and hit.name == name
            menu_open = name == "menu"


@pytest.mark.parametrize("kind", list(KINDS))
def test_held_out_instances_never_repeat_a_training_instance(kind):
    train = {lay.signature() for lay in pixels.family_layouts("train", kind, pixels.TRAIN_POOL)}
    held = pixels.family_layouts("heldout", kind, N)
    assert not {lay.signature() for lay in held} & train
    # and they vary: targets, button counts and places all differ across instances
    assert len({lay.signature() for lay in held}) == N
    assert len({lay.targets for lay in held}) > 5


def test_targets_do_not_favour_a_cell_or_a_colour():
    """A screen-blind policy must not find a shortcut: over the training instances, targets
    spread over every cell and every colour."""
    lays = pixels.family_layouts("train", "click", 512)
    cells = [next(b.cell for b in lay.buttons if b.name == lay.targets[0]) for lay in lays]
    colours = [lay.targets[0] for lay in lays]
    assert max(cells.count(c) for c in set(cells)) / len(lays) < 0.12  # 1/15 expected
    assert max(colours.count(c) for c in set(colours)) / len(lays) < 0.25  # 1/6 expected


def test_layouts_are_a_pure_function_of_kind_split_and_index():
    assert make_layout("click2", "train", 7) == make_layout("click2", "train", 7)
    assert make_layout("click2", "train", 7) != make_layout("click2", "heldout", 7)
    with pytest.raises(ValueError, match="unknown pixel task kind"):
        make_layout("drag", "train", 0)
    with pytest.raises(ValueError, match="split"):
        make_layout("click", "test", 0)


def test_specs_load_through_load_tasks_with_ids_domain_and_oracles():
    tasks = load_tasks("pixels:heldout:click,menu:3")
    assert [t.id for t in tasks][:1] == ["pixels-click-h000"]
    assert len(tasks) == 6 and tasks.domains() == ["pixels"]
    assert all(t.oracle and t.oracle[0].startswith("pyautogui.click(") for t in tasks)
    assert len(load_tasks("pixels:train")) == len(KINDS) * pixels.DEFAULT_SIZES["train"]
    for bad in ("pixels:test", "pixels:train:drag", "pixels:train:click:0", "pixels:a:b:c:d"):
        with pytest.raises(TaskError, match="pixels"):
            load_tasks(bad)


def test_the_app_asset_is_named_by_its_digest_and_refuses_another_version():
    url = pixels.app_url()
    assert generate(url).startswith(b'"""The pixel family')
    with pytest.raises(Exception, match="v="):
        generate("builtin-asset://pixels_app?v=0000000000000000")
    with pytest.raises(Exception, match="v="):
        generate("builtin-asset://pixels_app")


def test_the_app_imports_only_the_standard_library():
    """It runs inside the desktop with the system python3 -I: no osworld_gym, no third party."""
    tree = ast.parse(generate(pixels.app_url()))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
    assert modules <= {"argparse", "ctypes", "http", "json", "threading", "time", "tkinter"}


# -- real desktops ---------------------------------------------------------------------------

desktop = pytest.mark.desktop


@pytest.fixture(scope="module")
def env():
    e = gym.make(
        "OSWorld-v0",
        provider="local",
        tasks="pixels:all:all:2",
        screen_size=(640, 360),
        provider_kwargs={"profile": "openbox"},
    )
    try:
        yield e
    finally:
        e.close()


def _play(env, task_id, actions):
    env.reset(options={"task": task_id})
    for a in actions:
        env.step(a)
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and info["infra_error"] is None, info
    return reward, info


def _layout(task_id: str):
    _, kind, rest = task_id.split("-")
    return make_layout(kind, "train" if rest[0] == "t" else "heldout", int(rest[1:]))


@desktop
def test_every_kind_is_solved_by_its_oracle_and_not_by_doing_nothing(env):
    from osworld_gym.episodes.check import check_tasks, format_table

    tasks = load_tasks("pixels:all:all:1")
    results = check_tasks(
        tasks,
        num_envs=2,
        make_env=lambda ts: gym.make(
            "OSWorld-v0", tasks=ts, screen_size=(640, 360), provider_kwargs={"profile": "openbox"}
        ),
    )
    assert all(r.ok for r in results), format_table(results)
    assert len(results) == len(KINDS) * len(SPLITS)


@desktop
def test_a_wrong_button_a_wrong_order_or_an_extra_click_scores_zero(env):
    lay = _layout("pixels-click2-t000")
    (x1, y1), (x2, y2) = lay.target_points()
    wrong = next(b for b in lay.buttons if b.name not in lay.targets)
    click = "pyautogui.click({}, {})".format
    assert _play(env, "pixels-click2-t000", [click(x1, y1), click(x2, y2)])[0] == 1.0
    assert _play(env, "pixels-click2-t000", [click(x2, y2), click(x1, y1)])[0] == 0.0
    assert (
        _play(env, "pixels-click2-t000", [click(*wrong.centre), click(x1, y1), click(x2, y2)])[0]
        == 0.0
    )
    # clicks on the background and a second click on a spent (grey) button change nothing
    extra = [click(2, 2), click(x1, y1), click(x1, y1), click(x2, y2), "pyautogui.doubleClick()"]
    assert _play(env, "pixels-click2-t000", extra)[0] == 1.0
    # a right click is no click; neither is a key press
    assert _play(env, "pixels-click2-t000", [
        f"pyautogui.rightClick({x1}, {y1})", "pyautogui.press('space')", "pyautogui.press('enter')"
    ])[0] == 0.0  # fmt: skip


@desktop
def test_the_menu_needs_opening_first_and_one_choice(env):
    lay = _layout("pixels-menu-h000")
    (mx, my), (ix, iy) = lay.target_points()
    other = next(b for b in lay.items if b.name != lay.targets[0])
    click = "pyautogui.click({}, {})".format
    assert _play(env, "pixels-menu-h000", [click(mx, my), click(ix, iy)])[0] == 1.0
    assert _play(env, "pixels-menu-h000", [click(ix, iy)])[0] == 0.0  # the panel is not open
    assert (
        _play(env, "pixels-menu-h000", [click(mx, my), click(*other.centre), click(ix, iy)])[0]
        == 0.0
    )


@desktop
def test_the_screen_shows_the_layout_the_instruction_refers_to(env):
    """What the policy sees: each button's fill at its place, the background elsewhere."""
    obs, _ = env.reset(options={"task": "pixels-click3-t001"})
    shot = obs["screenshot"]
    assert shot.shape == (360, 640, 3)
    for b in _layout("pixels-click3-t001").buttons:
        x, y = b.x + 6, b.y + 6  # a corner: away from the label and the pointer
        expected = [int(b.fill[i : i + 2], 16) for i in (1, 3, 5)]
        assert max(abs(int(c) - e) for c, e in zip(shot[y, x], expected, strict=True)) <= 2


@desktop
def test_an_answer_on_the_apps_port_from_the_agent_scores_zero_with_the_reason(env):
    """The agent kills the app and serves the expected events on its port: 0, not 1."""
    lay = _layout("pixels-click-t000")
    env.reset(options={"task": "pixels-click-t000"})
    client = env.unwrapped.provider.start()
    forger = (
        "import http.server\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        f"        b = b'events: {lay.targets[0]}\\n'\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b)\n"
        "http.server.HTTPServer.allow_reuse_address = True\n"
        f"http.server.HTTPServer(('127.0.0.1', {pixels.PORT}), H).serve_forever()\n"
    )
    client.upload("/home/user/.forger.py", forger.encode())
    out = client.execute(
        "pkill -9 -f '[p]ixels/app.py'; sleep 0.5; setsid python3 ~/.forger.py </dev/null "
        f">/dev/null 2>&1 & for i in $(seq 50); do curl -sf 127.0.0.1:{pixels.PORT}/state && "
        "break; sleep 0.2; done",
        shell=True,
        setup=True,
    )
    assert lay.targets[0] in out["output"], out  # the forgery answers the player
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and info["infra_error"] is None, info
    assert reward == 0.0
    assert f"port {pixels.PORT}" in info["eval_note"], info


@desktop
def test_a_killed_app_scores_zero_not_an_infrastructure_error(env):
    env.reset(options={"task": "pixels-click-t001"})
    client = env.unwrapped.provider.start()
    client.execute("pkill -9 -f '[p]ixels/app.py'", shell=True, setup=True)
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and info["infra_error"] is None and reward == 0.0, info


@desktop
def test_the_agent_cannot_reach_into_the_app_with_tk_send_or_ptrace(env):
    env.reset(options={"task": "pixels-click-t001"})
    client = env.unwrapped.provider.start()
    probe = (
        "import os, tkinter\n"
        "t = tkinter.Tk(); t.withdraw()\n"
        "print('interps', sorted(t.tk.call('winfo', 'interps')))\n"
        "try:\n"
        "    t.tk.call('send', 'pixels', 'set x 1'); print('send ok')\n"
        "except tkinter.TclError as e:\n"
        "    print('send refused:', e)\n"
        "pid = [p for p in os.listdir('/proc') if p.isdigit() and b'pixels/app.py' in\n"
        "       open(f'/proc/{p}/cmdline', 'rb').read() and int(p) != os.getpid()][0]\n"
        "for f in ('mem', 'environ'):\n"
        "    try:\n"
        "        open(f'/proc/{pid}/{f}', 'rb').read(1); print(f, 'readable')\n"
        "    except OSError as e:\n"
        "        print(f, 'refused', e.errno)\n"
    )
    client.upload("/home/user/.probe.py", probe.encode())
    out = client.execute("python3 ~/.probe.py 2>&1", shell=True, setup=True)["output"]
    assert "send refused" in out and "'pixels'" not in out, out
    assert "mem refused" in out and "environ refused" in out, out
    # and the app still works for the honest player
    lay = _layout("pixels-click-t001")
    x, y = lay.target_points()[0]
    env.step(f"pyautogui.click({x}, {y})")
    assert env.step("DONE")[1] == 1.0


def test_the_task_json_round_trips_and_names_the_port_the_guest_checks():
    t = pixels.task_dict(make_layout("menu", "heldout", 3))
    assert json.loads(json.dumps(t)) == t
    command = " ".join(t["evaluator"]["result"]["command"])
    assert f"127.0.0.1:{pixels.PORT}" in command
    launch = t["config"][1]["parameters"]["command"]
    assert launch[:2] == ["python3", "-I"]  # no usercustomize or ~/.pixels.py from the home
