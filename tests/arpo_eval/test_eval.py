"""arpo-eval on the fake provider: protocols, resume, infra errors, tables, specs, compare, export.

The fake provider (canned screens, a fake guest) runs the built-in ``os`` and ``terminal``
tasks in milliseconds: enough to test the plumbing end to end. Real desktops
are in ``test_eval_desktop.py``; the report in a real browser in ``test_eval_report.py``.
"""

from __future__ import annotations

import doctest
import importlib
import json
import shutil

import pytest
from arpo_eval.agents import AgentSpec, FailAgent, NoopAgent
from arpo_eval.cli import main
from arpo_eval.compare import compare_runs, format_comparison
from arpo_eval.export import export_dataset
from arpo_eval.layout import RunLayoutError, RunManifest, read_run
from arpo_eval.protocol import Protocol
from arpo_eval.run import RunConfig, run
from arpo_eval.runner import evaluate_agent
from arpo_eval.tables import format_summary, summarize
from arpo_eval.tasks import TaskSpecError, resolve_task_spec
from osworld_gym.errors import GuestError
from osworld_gym.providers.fake import FakeProvider
from osworld_gym.recording import summarize_results
from osworld_gym.support import builtin_tasks
from repo_paths import ROOT

FAKE = {"provider": "fake", "settle": None}
FAKE_DOMAINS = "builtin:os,terminal"


def fake_run(out, agent="fail", **kw) -> dict:
    cfg = RunConfig(
        agent=AgentSpec(agent),
        out=str(out),
        provider="fake",
        settle_max_s=0,
        progress=False,
        **{"tasks": "builtin:os", **kw},
    )
    return run(cfg)


class Wanderer:
    """Never ends an episode: moves the pointer every turn."""

    def reset(self, task):
        self.turns = 0

    def act(self, obs, info):
        self.turns += 1
        return "pyautogui.moveTo(5, 5)"


@pytest.mark.parametrize(
    "module",
    [
        "protocol",
        "layout",
        "tasks",
        "tables",
        "compare",
        "plots",
        "report",
        "runner",
        "agents",
        "baseline",
        "__init__",
    ],
)
def test_docstring_examples_run(module):
    mod = importlib.import_module(f"arpo_eval.{module}" if module != "__init__" else "arpo_eval")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_always_fail_scores_exactly_the_infeasible_tasks():
    tasks = resolve_task_spec(FAKE_DOMAINS)
    records = evaluate_agent(FailAgent, tasks, env_kwargs=FAKE, num_envs=2, progress=False)
    assert len(records) == len(tasks) > 30
    scored = {r.task_id: r.score for r in records}
    assert {t for t, s in scored.items() if s == 1.0} == {t.id for t in tasks if t.is_infeasible}
    assert set(scored.values()) == {0.0, 1.0} and all(r.infra_error is None for r in records)


def test_standard_replaces_the_last_answer_by_fail_and_hard_does_not():
    tasks = [t for t in builtin_tasks("os") if t.id in ("os-infeasible-001", "os-copy-001")]
    env = {**FAKE, "max_steps": 3}
    std = {
        r.task_id: r
        for r in evaluate_agent(
            Wanderer, tasks, env_kwargs=env, progress=False, protocol="standard"
        )
    }
    hard = {
        r.task_id: r
        for r in evaluate_agent(Wanderer, tasks, env_kwargs=env, progress=False, protocol="hard")
    }
    # an agent that runs out of turns gets the infeasible task under OSWorld's rule only
    assert std["os-infeasible-001"].score == 1.0 and std["os-infeasible-001"].replaced_last_action
    assert (
        hard["os-infeasible-001"].score == 0.0
        and not hard["os-infeasible-001"].replaced_last_action
    )
    # a feasible task ends on the replaced FAIL: OSWorld scores a final FAIL 0
    assert std["os-copy-001"].score == 0.0 and std["os-copy-001"].steps == 3
    assert all(r.steps == 3 and r.infra_error is None for r in [*std.values(), *hard.values()])


def test_an_agent_that_ends_the_episode_itself_is_scored_the_same_under_both_protocols():
    tasks = resolve_task_spec("builtin:os")
    for agent in (FailAgent, NoopAgent):
        std = evaluate_agent(agent, tasks, env_kwargs=FAKE, progress=False, protocol="standard")
        hard = evaluate_agent(agent, tasks, env_kwargs=FAKE, progress=False, protocol=Protocol.HARD)
        assert [r.score for r in std] == [r.score for r in hard]
        assert not any(r.replaced_last_action for r in std)


def test_run_writes_osworld_layout_per_trial_that_osworld_tools_read(tmp_path):
    summary = fake_run(tmp_path, trials=2, num_envs=2)
    root = tmp_path / "pyautogui" / "screenshot"
    assert sorted(p.name for p in root.iterdir()) == ["fail", "fail.trial1"]
    ep = root / "fail" / "os" / "os-infeasible-001"
    assert (ep / "result.txt").read_text() == "1.0\n"
    assert {"traj.jsonl", "episode.json", "result.txt"} <= {p.name for p in ep.iterdir()}
    # OSWorld's show_result averaging over trial 0 (and trial 1 by its model name) = our per-trial
    # rows
    for k, model in enumerate(["fail", "fail.trial1"]):
        theirs = summarize_results(tmp_path, model=model)
        assert theirs["overall"] == summary["per_trial"][k]["overall"]["score"] == 2 / 18
        assert theirs["tasks"] == 18
    assert summary["overall"]["mean_at_k"] == summary["overall"]["pass_at_k"] == 2 / 18
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["overall"] == summary["overall"] and on_disk["trials"] == 2


def test_resume_reruns_only_unfinished_episodes(tmp_path):
    fake_run(tmp_path)
    root = tmp_path / "pyautogui" / "screenshot" / "fail" / "os"
    (root / "os-copy-001" / "result.txt").unlink()  # an episode that stopped before its score
    shutil.rmtree(root / "os-chmod-001")  # one that never ran
    marker = root / "os-mkdir-001" / "keep.me"
    marker.write_text("untouched")
    ran = []
    manifest = RunManifest.read(tmp_path)
    tasks = resolve_task_spec("builtin:os")
    evaluate_agent(
        FailAgent,
        tasks,
        env_kwargs=FAKE,
        out_dir=tmp_path,
        manifest=manifest,
        progress=False,
        on_record=lambda r: ran.append(r.task_id),
    )
    assert sorted(ran) == ["os-chmod-001", "os-copy-001"]
    assert marker.read_text() == "untouched"
    assert (root / "os-copy-001" / "result.txt").read_text() == "0.0\n"


def test_a_resumed_run_must_keep_its_protocol(tmp_path):
    fake_run(tmp_path, protocol="standard")
    with pytest.raises(RunLayoutError, match="protocol"):
        fake_run(tmp_path, protocol="hard")
    summary = fake_run(tmp_path, protocol="hard", resume=False)  # --fresh starts over
    assert summary["run"]["protocol"] == "hard" and summary["overall"]["scored_tasks"] == 18


class FlakyBackend:
    """An agent whose model server fails on its second turn, every time."""

    calls = 0

    def reset(self, task):
        self.turn = 0

    def act(self, obs, info):
        FlakyBackend.calls += 1
        self.turn += 1
        if self.turn == 2:
            from arpo_eval.agents import AgentError

            raise AgentError("model server unreachable")
        return "pyautogui.moveTo(5, 5)"


def test_agent_backend_failures_are_infra_errors_not_zeros(tmp_path):
    manifest = RunManifest(model="flaky", tasks=[])
    tasks = [builtin_tasks("os")["os-copy-001"], builtin_tasks("os")["os-infeasible-001"]]
    FlakyBackend.calls = 0
    records = evaluate_agent(
        FlakyBackend,
        tasks,
        env_kwargs=FAKE,
        out_dir=tmp_path,
        manifest=manifest,
        infra_retries=2,
        progress=False,
    )
    assert all(r.score is None and "unreachable" in r.infra_error for r in records)
    assert FlakyBackend.calls == 2 * 3 * 2  # 2 turns, 1 try + 2 retries, 2 tasks
    ep = tmp_path / "pyautogui" / "screenshot" / "flaky" / "os" / "os-copy-001"
    assert (
        not (ep / "result.txt").exists() and "unreachable" in (ep / "infra_error.txt").read_text()
    )
    table = summarize(records)
    assert table["overall"]["infra_errors"] == 2 and table["overall"]["mean_at_k"] is None
    assert table["overall"]["unscored_tasks"] == 2
    # a policy whose episodes all end in infra errors shows it: a 100 % infra rate
    assert table["overall"]["infra_rate"] == 1.0 and table["domains"]["os"]["infra_rate"] == 1.0
    assert "100.0%" in format_summary(table)


class DeadDesktop(FakeProvider):
    def start(self):
        raise GuestError("the desktop does not answer", endpoint="fake")

    def restart(self):
        return self.start()


def test_a_desktop_that_fails_to_reset_is_counted_apart(tmp_path):
    records = evaluate_agent(
        FailAgent,
        builtin_tasks("os")[:2],
        progress=False,
        infra_retries=0,
        env_kwargs={"provider": DeadDesktop((1920, 1080)), "settle": None},
    )
    assert [r.score for r in records] == [None, None]
    assert all(r.infra_error.startswith("reset failed") for r in records)


def test_tables_split_in_domain_and_held_out_with_a_training_list(tmp_path):
    train = tmp_path / "train.json"
    train.write_text(
        json.dumps(
            {
                "kind": "arpo-task-list",
                "source": "builtin",
                "task_ids": ["os-infeasible-001", "os-copy-001"],
            }
        )
    )
    summary = fake_run(tmp_path / "run", train_tasks=str(train))
    split = summary["split"]
    assert split["in_domain"]["tasks"] == 2 and split["in_domain"]["mean_at_k"] == 0.5
    assert split["held_out"]["tasks"] == 16 and split["held_out"]["mean_at_k"] == 1 / 16


def test_task_specs(tmp_path):
    assert resolve_task_spec("builtin:os,terminal").domains() == ["os", "terminal"]
    with pytest.raises(TaskSpecError):
        resolve_task_spec("builtin:no_such_domain")
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps(["os-copy-001", "terminal-grep-count-001"]))
    assert resolve_task_spec(str(ids)).ids() == ["os-copy-001", "terminal-grep-count-001"]
    ids.write_text(json.dumps(["os-copy-001", "nope"]))
    with pytest.raises(TaskSpecError, match="nope"):
        resolve_task_spec(str(ids))
    # an OSWorld evaluation_examples directory with a meta file
    ex = tmp_path / "evaluation_examples"
    for t in builtin_tasks("os")[:3]:
        (ex / "examples" / "os").mkdir(parents=True, exist_ok=True)
        (ex / "examples" / "os" / f"{t.id}.json").write_text(json.dumps(t.raw))
    (ex / "test_small.json").write_text(json.dumps({"os": [t.id for t in builtin_tasks("os")[:2]]}))
    assert len(resolve_task_spec(str(ex), meta="test_small.json")) == 2
    assert len(resolve_task_spec(str(ex / "test_small.json"))) == 2
    assert len(resolve_task_spec(str(ex))) == 3  # no test_all.json: every example


def test_compare_gives_seeded_per_domain_deltas(tmp_path):
    fake_run(tmp_path / "noop", agent="noop", tasks=FAKE_DOMAINS, num_envs=2)
    fake_run(tmp_path / "fail", agent="fail", tasks=FAKE_DOMAINS, num_envs=2)
    a = compare_runs(tmp_path / "noop", tmp_path / "fail", seed=3, samples=2000)
    b = compare_runs(tmp_path / "noop", tmp_path / "fail", seed=3, samples=2000)
    assert a == b
    n_infeasible = sum(t.is_infeasible for t in resolve_task_spec(FAKE_DOMAINS))
    assert a["overall"]["wins"] == n_infeasible and a["overall"]["losses"] == 0
    assert a["overall"]["delta"] == pytest.approx(n_infeasible / a["overall"]["tasks"])
    lo, hi = a["overall"]["ci"]
    assert 0 <= lo < a["overall"]["delta"] < hi
    assert set(a["domains"]) == {"os", "terminal"}
    assert a["a"]["infra_rate"] == 0.0 and a["b"]["infra_rate"] == 0.0
    assert "infra rate 0.0%" in format_comparison(a)
    assert {t["task_id"] for t in a["tasks"] if t["delta"] == 1.0} == {
        t.id for t in resolve_task_spec(FAKE_DOMAINS) if t.is_infeasible
    }


def test_export_writes_a_loadable_dataset_with_images_messages_and_reward(tmp_path):
    from datasets import load_from_disk

    tasks = [builtin_tasks("os")["os-copy-001"]]
    manifest = RunManifest(
        model="wander",
        tasks=[{"id": "os-copy-001", "domain": "os", "instruction": tasks[0].instruction}],
    )
    manifest.write(tmp_path / "run")
    evaluate_agent(
        Wanderer,
        tasks,
        env_kwargs={**FAKE, "max_steps": 3},
        progress=False,
        out_dir=tmp_path / "run",
        manifest=manifest,
    )
    export_dataset(tmp_path / "run", tmp_path / "ds", max_image_side=320)
    ds = load_from_disk(str(tmp_path / "ds"))
    row = ds[0]
    assert len(ds) == 1 and row["reward"] == 0.0 and row["steps"] == 3
    assert len(row["images"]) == 3 and row["images"][0].size == (320, 180)
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user"] + ["user", "assistant"] * 3
    assert tasks[0].instruction in row["messages"][1]["content"][0]["text"]
    assert row["actions"] == ["pyautogui.moveTo(5, 5)"] * 2 + ["FAIL"]  # the last one replaced


def test_cli_run_then_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    rc = main(
        [
            "run",
            "--agent",
            "fail",
            "--tasks",
            "builtin:os",
            "--provider",
            "fake",
            "--num-envs",
            "2",
            "--trials",
            "2",
            "--settle-max-s",
            "0",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "mean@2" in text and "pass@2" in text and "show_result.py" in text
    manifest, records = read_run(out)
    assert manifest.trials == 2 and len(records) == 36
    assert main(["summary", str(out)]) == 0
    assert (
        main(
            [
                "run",
                "--agent",
                "hf",
                "--tasks",
                "builtin:os",
                "--provider",
                "fake",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )  # hf needs --model: a clear error


def test_the_readme_quick_start_without_a_desktop_runs(tmp_path, monkeypatch):
    import shlex

    readme = (ROOT / "packages" / "arpo_eval" / "README.md").read_text()
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    commands = [c for c in commands if c.startswith("arpo-eval")][:2]  # the no-desktop ones
    assert commands[0].startswith("arpo-eval run --agent fail") and "--provider fake" in commands[0]
    monkeypatch.chdir(tmp_path)
    for command in commands:
        assert (
            main(shlex.split(command)[1:] + (["--no-progress"] if " run " in command else [])) == 0
        )
    assert (tmp_path / "runs" / "eval-fail" / "report.html").is_file()


def test_baseline_stats_feed_the_trainers_task_selection():
    from arpo_eval.baseline import baseline_stats
    from arpo_trainer.selection import choose_tasks

    tasks = resolve_task_spec("builtin:os")
    records = evaluate_agent(FailAgent, tasks, env_kwargs=FAKE, trials=2, progress=False)
    assert choose_tasks(baseline_stats(records)) == ["os-infeasible-001", "os-infeasible-002"]
    assert choose_tasks(baseline_stats(records), exclude_infeasible=True) == []


def test_the_pixel_family_is_a_task_spec_and_a_bad_one_says_what_is_wrong(tmp_path):
    held = resolve_task_spec("pixels:heldout:click,menu:4")
    assert [t.id.rsplit("-", 1)[0] for t in held] == ["pixels-click"] * 4 + ["pixels-menu"] * 4
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({"source": "pixels:heldout:menu:8", "task_ids": [held[5].id]}))
    assert [t.id for t in resolve_task_spec(str(ids))] == [held[5].id]
    with pytest.raises(TaskSpecError, match="unknown kind 'drag'"):
        resolve_task_spec("pixels:heldout:drag")
