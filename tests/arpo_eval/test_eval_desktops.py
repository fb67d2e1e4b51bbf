"""``arpo-eval run --desktops``: the trainer's desktops section, each desktop its own slot.

Through the real CLI (``arpo_eval.cli.main``). The mistakes are refused before any desktop or
agent starts; the remote runs use two real guest servers reached by URL (our guest server on its
own Xvfb, as the trainer's remote-desktop tests start them) with real shell reset hooks.
"""

from __future__ import annotations

import json

import pytest
import yaml
from arpo_eval.cli import main
from arpo_eval.layout import read_run
from tcp_guest import TOKEN, H, W, launch_guests

INFEASIBLE = ["os/os-infeasible-001", "os/os-infeasible-002"]


def arpo_eval_run(tmp_path, *flags: str, tasks=INFEASIBLE) -> int:
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{t}\n" for t in tasks))
    return main(["run", "--agent", "fail", "--tasks", str(ids), "--settle-max-s", "0",
                 "--no-progress", "--out", str(tmp_path / "out"), *flags])  # fmt: skip


REMOTE = {"source": "remote", "token": "t", "urls": ["http://127.0.0.1:9", "http://127.0.0.1:10"]}


@pytest.mark.parametrize(("flags", "message"), [
    (["--desktops", json.dumps({**REMOTE, "urls": [*REMOTE["urls"], "http://127.0.0.1:9/"]})],
     "desktops.urls lists http://127.0.0.1:9 more than once: two episodes would share one desktop"),
    (["--desktops", json.dumps(REMOTE), "--num-envs", "3"],
     "this run needs guests 0..2 of desktops.urls, which lists 2: add URLs or lower --num-envs"),
    (["--desktops", json.dumps({**REMOTE, "num_desktops": 2}), "--num-envs", "1"],
     "desktops.num_desktops is 2, but --num-envs is 1"),
    (["--desktops", json.dumps(REMOTE), "--provider", "docker"],
     "--provider docker contradicts --desktops source 'remote'"),
    (["--desktops", "{source: ray, provider: fake}"],
     "--desktops source 'ray' is the trainer's"),
    (["--desktops", "{source: remote, urls: ['http://127.0.0.1:9'], tokn: t}"],
     "desktops: source 'remote' does not take 'tokn'"),
    (["--provider", "remote", "--provider-arg", "url=http://127.0.0.1:9", "--num-envs", "2"],
     "2 desktops on one remote guest (http://127.0.0.1:9): two episodes would share one desktop"),
])  # fmt: skip
def test_a_bad_desktops_option_is_refused_in_one_line(tmp_path, capsys, flags, message):
    assert arpo_eval_run(tmp_path, *flags) == 2
    err = capsys.readouterr().err
    assert f"arpo-eval run: {message}" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_not_a_mapping_is_an_argument_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        arpo_eval_run(tmp_path, "--desktops", "[1, 2]")
    assert e.value.code == 2 and "expected a mapping such as" in capsys.readouterr().err


def test_a_trainer_config_file_gives_its_desktops_section_and_the_count(tmp_path):
    config = tmp_path / "train.yaml"
    section = {"source": "fake", "num_desktops": 2}
    config.write_text(yaml.safe_dump({"learning_rate": 1e-6, "desktops": section}))
    assert arpo_eval_run(tmp_path, "--desktops", str(config)) == 0
    manifest, records = read_run(tmp_path / "out")
    assert manifest.provider == "fake" and manifest.extra["num_envs"] == 2
    assert sorted((r.task_id, r.score) for r in records) == [
        ("os-infeasible-001", 1.0),
        ("os-infeasible-002", 1.0),
    ]


# -- two real remote guests -----------------------------------------------------------------------

#: each desktop's hook logs itself, then waits (at most 60 s) until both desktops reached their
#: first reset: with two tasks, a run that did not give each desktop its own episode fails here
BARRIER = (
    'touch "{d}/$OSWORLD_DESKTOP_INDEX"; echo "$OSWORLD_DESKTOP_INDEX $OSWORLD_DESKTOP_URL" '
    '>> "{d}/hooks.log"; i=0; while [ ! -e "{d}/0" ] || [ ! -e "{d}/1" ]; do '
    "i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done"
)


@pytest.fixture(scope="module")
def guests(tmp_path_factory):
    yield from launch_guests(tmp_path_factory, 2)


def guest_flags(section: dict) -> list[str]:
    return ["--desktops", json.dumps(section), "--screen", f"{W}x{H}", "--infra-retries", "0"]


@pytest.mark.desktop
@pytest.mark.slow
def test_each_desktop_plays_on_its_own_guest_after_its_hook(tmp_path, guests):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    section = {"source": "remote", "token": TOKEN, "urls": [g.url for g in guests],
               "reset_hook": BARRIER.format(d=hooks)}  # fmt: skip
    assert arpo_eval_run(tmp_path, *guest_flags(section)) == 0  # two desktops: one per URL
    assert sorted((hooks / "hooks.log").read_text().splitlines()) == [
        f"{i} {g.url}" for i, g in enumerate(guests)
    ]
    manifest, records = read_run(tmp_path / "out")
    assert sorted((r.task_id, r.score) for r in records) == [
        ("os-infeasible-001", 1.0),
        ("os-infeasible-002", 1.0),
    ]
    assert manifest.provider == "remote" and manifest.extra["desktops"] == [g.url for g in guests]
    written = "".join(p.read_text() for p in (tmp_path / "out").rglob("*.json"))
    assert TOKEN not in written  # the run records which guests played, never their token


@pytest.mark.desktop
@pytest.mark.slow
def test_a_failing_hook_leaves_its_desktops_episode_unscored(tmp_path, guests):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    section = {"source": "remote", "token": TOKEN, "urls": [
        {"url": guests[0].url, "reset_hook": BARRIER.format(d=hooks)},
        {"url": guests[1].url,
         "reset_hook": f'touch "{hooks}/1"; echo snapshot revert refused >&2; exit 3'},
    ]}  # fmt: skip
    assert arpo_eval_run(tmp_path, *guest_flags(section)) == 0
    assert (hooks / "hooks.log").read_text().splitlines() == [f"0 {guests[0].url}"]
    _, records = read_run(tmp_path / "out")
    scored = [r for r in records if r.scored]
    failed = [r for r in records if not r.scored]
    assert len(scored) == len(failed) == 1 and scored[0].score == 1.0
    assert failed[0].infra_error is not None
    assert f"reset hook for {guests[1].url}" in failed[0].infra_error
    assert "exited with status 3: snapshot revert refused" in failed[0].infra_error
