"""rule_relativeTime, the VLC getters and accessibility_tree: plumbing, then the real desktop."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators import EvalContext, evaluate, getter
from osworld_gym.evaluators.getters import relative_time
from osworld_gym.evaluators.getters.relative_time import expected_for, relative_date, render
from osworld_gym.tasks import Task

MONDAY = dt.date(2024, 5, 6)
SUNDAY = dt.date(2024, 5, 12)


# -- rule_relativeTime ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "today", "day"),
    [
        ("tomorrow", MONDAY, "2024-05-07"),
        ("today", MONDAY, "2024-05-06"),
        ("next Monday", MONDAY, "2024-05-13"),  # a week ahead, never today
        ("next Monday", SUNDAY, "2024-05-13"),
        ("next Friday", MONDAY, "2024-05-10"),
        ("next Monday split", MONDAY, "2024-05-13"),
        ("this Saturday", MONDAY, "2024-05-11"),
        ("this Sunday", MONDAY, "2024-05-12"),
        ("this month", MONDAY, "2024-05-06"),
        ("5th next month", MONDAY, "2024-06-05"),
        ("11th next month", dt.date(2024, 12, 31), "2025-01-11"),
        ("first monday four months later", MONDAY, "2024-09-02"),
        ("first monday eight months later", dt.date(2024, 8, 20), "2025-04-07"),
        ("in 3 days", MONDAY, "2024-05-09"),
        ("2 days ago", MONDAY, "2024-05-04"),
    ],
)
def test_relative_dates(phrase, today, day):
    assert str(relative_date(phrase, today)) == day


def test_unknown_phrase_raises():
    with pytest.raises(ValueError, match="unknown relative time"):
        relative_date("whenever", MONDAY)


def test_expected_fields_are_rendered_without_touching_the_task():
    rules = {
        "relativeTime": {"from": "next Monday"},
        "expected": {"q": "flights", "time": "{DoW}, {Month} {Day0D}, {Year}"},
    }
    out = expected_for(rules, MONDAY)
    assert out["expected"] == {"q": "flights", "time": "Mon, May 13, 2024"}
    assert rules["expected"]["time"] == "{DoW}, {Month} {Day0D}, {Year}"  # a copy was changed

    span = expected_for(
        {
            "relativeTime": {"from": "this Saturday", "to": "this Sunday"},
            "expected": {"from": "{Year}-{Month0D}-{Day0D}", "to": "{MonthD}/{DayD}"},
        },
        MONDAY,
    )
    assert span["expected"] == {"from": "2024-05-11", "to": "5/12"}

    split = expected_for(
        {
            "relativeTime": {"from": "next Monday split", "to": "next Monday split"},
            "expected": {
                "puDay": "{DayD}",
                "puMonth": "{MonthFull}",
                "puYear": "{Year}",
                "doDay": "{Day0D}",
                "doMonth": "{Month0D}",
                "doYear": "{Year}",
            },
        },
        MONDAY,
    )
    assert split["expected"] == {
        "puDay": "13",
        "puMonth": "May",
        "puYear": "2024",
        "doDay": "13",
        "doMonth": "05",
        "doYear": "2024",
    }
    assert render("{DoWFull} {month}", MONDAY) == "Monday May"


def test_getter_uses_the_timezone_and_feeds_a_metric(tmp_path, monkeypatch):
    seen = []

    def fake_today(timezone):
        seen.append(timezone)
        return MONDAY

    monkeypatch.setattr(relative_time, "today_in", fake_today)
    expected = {
        "type": "rule_relativeTime",
        "timezone": "Europe/Zurich",
        "rules": {"relativeTime": {"from": "tomorrow"}, "expected": {"time": "{Day0D}.{Month0D}."}},
    }
    assert getter("rule_relativeTime")(None, expected)["expected"] == {"time": "07.05."}
    assert seen == ["Europe/Zurich"]
    task = Task.from_dict(
        {
            "id": "rt",
            "instruction": "x",
            "evaluator": {
                "func": "check_direct_json_object",
                "result": {"type": "rule", "rules": {"time": "07.05."}},
                "expected": expected,
            },
        }
    )
    assert evaluate(task, EvalContext(client=None, cache_dir=tmp_path, task_id="rt")).score == 1.0


def test_today_in_a_named_timezone():
    today = relative_time.today_in("Pacific/Kiritimati")  # UTC+14
    assert abs((today - dt.datetime.now(dt.UTC).date()).days) <= 1
    assert relative_time.today_in("Not/AZone") == dt.datetime.now(dt.UTC).date()


# -- VLC and accessibility: plumbing ---------------------------------------------------------


class Guest:
    def __init__(
        self, output: str = "", files: dict[str, bytes] | None = None, tree: str | None = None
    ):
        self.output, self.files, self.tree = output, files or {}, tree
        self.commands: list[Any] = []

    def execute(self, command, shell=False, timeout=120.0, setup=False):
        self.commands.append(command)
        return {"status": "success", "output": self.output, "error": "", "returncode": 0}

    def get_file(self, path, max_bytes=None):
        return self.files.get(path)

    def accessibility(self):
        return self.tree


def ctx(guest: Any, tmp_path: Path, **extra: Any) -> EvalContext:
    return EvalContext(client=guest, cache_dir=tmp_path / "cache", task_id="v", extra=extra)


def test_vlc_playing_info_saves_the_status_page(tmp_path):
    xml = "<root><state>playing</state></root>"
    guest = Guest(json.dumps({"status": 200, "body": xml}))
    path = getter("vlc_playing_info")(ctx(guest, tmp_path, vlc_port=9090), {"dest": "status.xml"})
    assert Path(path).read_text() == xml and path.endswith("cache/status.xml")
    args = json.loads(guest.commands[0][3])
    assert (
        args["url"] == "http://127.0.0.1:9090/requests/status.xml"
        and args["password"] == "password"
    )


@pytest.mark.parametrize(
    "answer", [{"status": 401, "body": ""}, {"error": "ConnectionRefusedError"}]
)
def test_vlc_not_answering_is_none(tmp_path, answer):
    assert (
        getter("vlc_playing_info")(ctx(Guest(json.dumps(answer)), tmp_path), {"dest": "s.xml"})
        is None
    )


def test_vlc_probe_that_cannot_run_is_an_error(tmp_path):
    with pytest.raises(EvaluatorError, match="could not query VLC"):
        getter("vlc_playing_info")(
            ctx(Guest("bash: python3: not found"), tmp_path), {"dest": "s.xml"}
        )


def test_vlc_config_and_accessibility_tree(tmp_path):
    guest = Guest(
        files={"/home/user/.config/vlc/vlcrc": b"[qt]\nqt-minimal-view=1\n"},
        tree="<desktop-frame/>",
    )
    path = getter("vlc_config")(ctx(guest, tmp_path), {"dest": "vlcrc"})
    assert Path(path).read_text().endswith("qt-minimal-view=1\n")
    assert getter("vlc_config")(ctx(Guest(), tmp_path), {"dest": "vlcrc"}) is None
    assert getter("accessibility_tree")(ctx(guest, tmp_path), {}) == "<desktop-frame/>"


# -- the real desktop ---------------------------------------------------------------------------


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("vlc") is None, reason="VLC is not installed")
def test_vlc_getters_on_the_local_desktop(local_env, tmp_path):
    task = {
        "id": "vlc-http",
        "instruction": "x",
        "related_apps": ["vlc"],
        "config": [
            {
                "type": "execute",
                "parameters": {
                    "command": "mkdir -p ~/.config/vlc && printf '[core]\\n"
                    "volume-step=12\\n' > ~/.config/vlc/vlcrc",
                    "shell": True,
                },
            },
            {
                "type": "launch",
                "parameters": {
                    "command": "VLC_VERBOSE=-1 vlc -I dummy --extraintf http "
                    "--http-host 127.0.0.1 --http-port 8080 "
                    "--http-password password --no-media-library",
                    "shell": True,
                },
            },
        ],
        "evaluator": {"func": "infeasible"},
    }
    local_env.reset(options={"task": task})
    c = EvalContext(
        client=local_env.unwrapped.provider.start(), cache_dir=tmp_path, task_id="vlc-http"
    )
    deadline = time.monotonic() + 30
    while (path := getter("vlc_playing_info")(c, {"dest": "status.xml"})) is None:
        assert time.monotonic() < deadline, "VLC's HTTP interface never answered"
        time.sleep(0.5)
    status = Path(path).read_text()
    assert "<root>" in status and "<state>" in status
    assert "volume-step=12" in Path(getter("vlc_config")(c, {"dest": "vlcrc"})).read_text()
    wrong = getter("vlc_playing_info")(c, {"dest": "status2.xml", "password": "wrong"})
    assert wrong is None


@pytest.mark.desktop
def test_accessibility_tree_on_the_local_desktop(local_env, tmp_path):
    local_env.reset(options={"task": "os-mkdir-001"})
    client = local_env.unwrapped.provider.start()
    tree = getter("accessibility_tree")(
        EvalContext(client=client, cache_dir=tmp_path, task_id="a"), {}
    )
    assert tree is None or tree.lstrip().startswith("<")
