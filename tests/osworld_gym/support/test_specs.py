"""One task-spec resolver for every CLI: the same ``--tasks`` value names the same tasks in
``osworld-gym tasks list``, ``arpo-train`` (its ``--dry_run`` task report and its trainer) and
``arpo-eval run``, and a bad one is refused by all three with the spec in the message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from arpo_eval.tasks import resolve_task_spec
from arpo_trainer.plan import task_report
from arpo_trainer.tasks import resolve_tasks as trainer_tasks
from osworld_gym.cli import main as osworld_gym_main
from osworld_gym.support import TaskSpecError, builtin_tasks, write_task_list
from repo_paths import ROOT

OS = [t.id for t in builtin_tasks("os")]
OS_VLC = [t.id for t in builtin_tasks(["os", "vlc"])]
PICK = ["os-copy-001", "os-infeasible-001"]


def _files(tmp: Path) -> None:
    (tmp / "ids.txt").write_text("# two tasks\nos/os-copy-001\n\nos-infeasible-001  # second\n")
    (tmp / "ids.json").write_text(json.dumps(PICK))
    write_task_list(tmp / "list.json", "builtin", PICK)
    (tmp / "nokind.json").write_text(json.dumps({"source": "builtin:os", "task_ids": PICK}))
    (tmp / "unknown.txt").write_text("os-copy-001\nno-such-task\n")


# (spec, the task ids it names, or the text the error must hold besides the spec)
CASES = [
    ("builtin", [t.id for t in builtin_tasks()], None),
    ("builtin:os", OS, None),
    ("builtin:os,vlc", OS_VLC, None),
    ("pixels:train:click:3", [f"pixels-click-t00{i}" for i in range(3)], None),
    ("{ids}", PICK, None),
    ("{idsjson}", PICK, None),
    ("{list}", PICK, None),
    ("{nokind}", PICK, None),
    ("builtin:nope", None, "no task in domain(s) ['nope']"),
    ("{unknown}", None, "no-such-task"),
    ("{tmp}/nowhere.json", None, "no such file or directory"),
    ("pixels:train:bogus", None, "bogus"),
]


def _spec(template: str, tmp: Path) -> str:
    _files(tmp)
    return template.format(
        tmp=tmp,
        ids=tmp / "ids.txt",
        idsjson=tmp / "ids.json",
        list=tmp / "list.json",
        nokind=tmp / "nokind.json",
        unknown=tmp / "unknown.txt",
    )


def _osworld_gym(spec: str, capsys) -> list[str] | str:
    code = osworld_gym_main(["tasks", "list", "--tasks", spec, "--json"])
    out, err = capsys.readouterr()
    return [t["id"] for t in json.loads(out)] if code == 0 else err


def _catch(fn, spec: str) -> list[str] | str:
    try:
        return [getattr(t, "id", t) for t in fn(spec)]
    except TaskSpecError as e:
        return str(e)


@pytest.mark.parametrize(("template", "ids", "error"), CASES, ids=[c[0] for c in CASES])
def test_every_cli_resolves_a_spec_alike(template, ids, error, tmp_path, capsys):
    spec = _spec(template, tmp_path)
    results = {
        "osworld-gym tasks list": _osworld_gym(spec, capsys),
        "arpo-train (trainer)": _catch(trainer_tasks, spec),
        "arpo-train --dry_run": _catch(lambda s: task_report(s, None, "local").supported, spec),
        "arpo-eval run": _catch(resolve_task_spec, spec),
    }
    for cli, got in results.items():
        if ids is not None:
            assert got == ids, f"{cli} resolved {spec!r} to {got!r}"
        else:
            assert isinstance(got, str), f"{cli} accepted the bad spec {spec!r}: {got!r}"
            assert spec in got and error in got, f"{cli}'s error for {spec!r}: {got!r}"


def test_gym_make_takes_the_same_specs():
    import gymnasium as gym

    env = gym.make("OSWorld-v0", provider="fake", tasks="builtin:os")
    try:
        assert [t.id for t in env.unwrapped.tasks] == OS
    finally:
        env.close()


def test_arpo_train_dry_run_takes_a_builtin_domain():
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    demo = ROOT / "packages" / "arpo_trainer" / "configs" / "demo.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "arpo_trainer.cli", "--config", str(demo), "--dry_run",
         "--model_name_or_path", "tiny", "--tasks", "builtin:os"],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"builtin:os: {len(OS)} supported on these desktops" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "arpo_trainer.cli", "--config", str(demo), "--dry_run",
         "--model_name_or_path", "tiny", "--tasks", "builtin:nope"],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--tasks builtin:nope: " in bad.stderr and "['nope']" in bad.stderr
