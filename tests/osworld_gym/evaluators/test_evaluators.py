"""Evaluators: every metric, the getters, OSWorld's scoring rules, errors vs. zeros."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.errors import EvaluatorError, GuestError, SetupError, TaskError
from osworld_gym.evaluators import (
    EvalContext,
    evaluate,
    getter,
    metric,
    register_getter,
    register_metric,
    validate_evaluator,
)
from osworld_gym.evaluators.metrics.general import (
    check_direct_json_object,
    check_include_exclude,
    exact_match,
    infeasible,
    match_in_list,
)
from osworld_gym.evaluators.metrics.text import compare_text_file
from osworld_gym.tasks import SetupRunner, Task
from osworld_gym.tasks import evaluator_registry as registry


class FakeGuest:
    """Test double of ``GuestClient`` for plumbing only.

    ``files``: guest path -> bytes served by ``get_file``; ``outputs``: command -> (stdout,
    stderr) served by ``execute``; every call is recorded in ``calls``.
    """

    def __init__(self, files=None, outputs=None, tree=None):
        self.files: dict[str, bytes] = dict(files or {})
        self.outputs: dict[Any, tuple[str, str]] = dict(outputs or {})
        self.tree = tree
        self.calls: list[tuple[str, Any]] = []

    def get_file(self, path: str, max_bytes: int | None = None) -> bytes | None:
        self.calls.append(("get_file", path))
        return self.files.get(path)

    def download_file(self, path: str, dest, max_bytes=None) -> int | None:
        data = self.get_file(path)
        if data is not None:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        return None if data is None else len(data)

    def execute(self, command, shell=False, timeout=120.0, setup=False):
        self.calls.append(("execute", command))
        key = tuple(command) if isinstance(command, list) else command
        if key not in self.outputs:
            raise GuestError(f"unexpected command {command!r}", status=500, endpoint="/execute")
        out, err = self.outputs[key]
        return {"status": "success", "output": out, "error": err, "returncode": 0}

    def list_directory(self, path: str) -> dict:
        self.calls.append(("list_directory", path))
        if self.tree is None:
            raise GuestError("not found", status=404, endpoint="/list_directory")
        return {"directory_tree": self.tree}

    def activate_window(self, window_name, strict=False, by_class=False):
        self.calls.append(("activate_window", window_name))


def ctx_for(guest, tmp_path: Path, last_action: Any = "DONE", task_id: str = "t1") -> EvalContext:
    return EvalContext(
        client=guest,
        cache_dir=tmp_path / "cache" / task_id,
        task_id=task_id,
        last_action=last_action,
    )


def task_with(evaluator: dict[str, Any], task_id: str = "t1") -> Task:
    return Task.from_dict({"id": task_id, "instruction": "do it", "evaluator": evaluator})


def rule(**rules) -> dict[str, Any]:
    return {"type": "rule", "rules": rules}


def cmd(command: str) -> dict[str, Any]:
    return {"type": "vm_command_line", "command": command, "shell": True}


# -- metrics: one matching and one non-matching case each ---------------------------------------


@pytest.mark.parametrize(
    ("fn", "result", "rules", "score"),
    [
        (exact_match, "Directory exists.\n", {"expected": "Directory exists.\n"}, 1.0),
        (exact_match, "Directory exists.", {"expected": "Directory exists.\n"}, 0.0),
        (exact_match, None, {"expected": None}, 0.0),
        (match_in_list, "755", {"expected": ["700", "755"]}, 1.0),
        (match_in_list, "644", {"expected": ["700", "755"]}, 0.0),
        (check_include_exclude, "a.txt\nb.txt\n", {"include": ["a.txt", "b.txt"]}, 1.0),
        (check_include_exclude, "a.txt\nb.log\n", {"include": ["a.txt"], "exclude": [".log"]}, 0.0),
        (check_include_exclude, "a.txt\n", {"include": ["a.txt", "c.txt"]}, 0.0),
        (check_include_exclude, None, {"include": []}, 0.0),
    ],
)
def test_value_metrics(fn, result, rules, score):
    assert fn(result, rules) == score


@pytest.mark.parametrize(
    ("result", "rules", "score"),
    [
        ({"a": 1, "b": "x", "extra": 0}, {"expected": {"a": 1, "b": "x"}}, 1.0),
        ({"a": 2}, {"expected": {"a": 1}}, 0.0),
        ({}, {"expected": {"a": 1}}, 0.0),
        ("  {'theme': 'dark', 'size': 12} \n", {"expected": {"theme": "dark", "size": 12}}, 1.0),
        ("not json at all", {"expected": {"a": 1}}, 0.0),
        (None, {"expected": {"a": 1}}, 0.0),
        ({"l": [3, 1, 2]}, {"expected": {"l": [1, 2, 3]}}, 0.0),
        # OSWorld ignores a rules-level ignore_list_order, and inside `expected` the flag is
        # itself compared as a key (sorting `true` fails: 0): parity, see the docstring
        ({"l": [3, 1, 2]}, {"expected": {"l": [1, 2, 3]}, "ignore_list_order": True}, 0.0),
        ({"l": [3, 1, 2]}, {"expected": {"l": [1, 2, 3], "ignore_list_order": True}}, 0.0),
        ({"a": 1}, {"expected": {"a": 1, "b": None}}, 1.0),  # a missing key reads as null
        ("[1, 2]", {"expected": {"a": 1}}, 0.0),  # JSON, but not an object
        # expect_in_result with an expected list: items must equal a string value
        ({"c": "x, y"}, {"expected": {"c": ["x", "y"]}, "expect_in_result": True}, 0.0),
        ({"c": "y"}, {"expected": {"c": ["x", "y"]}, "expect_in_result": True}, 1.0),
        ({"n": 3}, {"expected": {"n": 3}, "expect_in_result": True}, 0.0),  # neither str nor list
        ({"t": ["a", "b"]}, {"expected": {"t": "b"}, "expect_in_result": True}, 1.0),  # str in list
        (
            {"name": "Dr. Alice Smith"},
            {"expected": {"name": "Alice"}, "expect_in_result": True},
            1.0,
        ),
        ({"name": "Bob"}, {"expected": {"name": "Alice"}, "expect_in_result": True}, 0.0),
        ({"tags": ["a", "b"]}, {"expected": {"tags": ["z", "b"]}, "expect_in_result": True}, 1.0),
        ({"tags": ["a"]}, {"expected": {"tags": ["z", "y"]}, "expect_in_result": True}, 0.0),
    ],
)
def test_check_direct_json_object(result, rules, score):
    assert check_direct_json_object(result, rules) == score


def test_compare_text_file(tmp_path):
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    c = tmp_path / "c.txt"
    a.write_text("Hello,\n  World\n")
    b.write_text("Hello,\n  World\n")
    c.write_text("hello, world")
    assert compare_text_file(str(a), str(b)) == 1.0
    assert compare_text_file(str(a), str(c)) == 0.0
    assert compare_text_file(str(a), str(c), ignore_blanks=True) == 0.0
    assert compare_text_file(str(a), str(c), ignore_blanks=True, ignore_case=True) == 1.0
    assert compare_text_file(None, str(b)) == 0.0


def test_infeasible_metric():
    assert infeasible("FAIL") == 1.0
    assert infeasible({"action_type": "FAIL"}) == 1.0
    assert infeasible("pyautogui.click(1, 2)") == 0.0
    assert infeasible(None) == 0.0


def test_every_registered_name_resolves_to_a_callable():
    for name in registry.getter_names():
        assert callable(getter(name)), name
    for name in registry.metric_names():
        assert callable(metric(name)), name
    with pytest.raises(KeyError, match="unknown metric 'nope'"):
        metric("nope")


# -- getters --------------------------------------------------------------------------------------


def test_vm_file_downloads_into_the_cache_dir(tmp_path):
    guest = FakeGuest(files={"/home/user/Desktop/a.txt": b"A"})
    ctx = ctx_for(guest, tmp_path)
    path = getter("vm_file")(ctx, {"path": "~/Desktop/a.txt", "dest": "a.txt"})
    assert path == str(ctx.cache_dir / "a.txt") and Path(path).read_bytes() == b"A"
    assert getter("vm_file")(ctx, {"path": "/home/user/missing", "dest": "m"}) is None


def test_vm_file_multi_with_gives(tmp_path):
    guest = FakeGuest(files={"/a": b"1", "/b": b"2"})
    ctx = ctx_for(guest, tmp_path)
    cfg = {"path": ["/a", "/b", "/c"], "dest": ["a", "b", "c"], "multi": True, "gives": [0, 2]}
    a, c = getter("vm_file")(ctx, cfg)
    assert Path(a).read_bytes() == b"1" and c is None
    assert (ctx.cache_dir / "b").read_bytes() == b"2"  # fetched even when not given
    # list form without "multi" behaves the same
    assert getter("vm_file")(ctx, {"path": ["/b"], "dest": ["b2"]}) == str(ctx.cache_dir / "b2")


def test_command_getters_return_stdout_and_stderr(tmp_path):
    guest = FakeGuest(outputs={"ls": ("a\nb\n", "warning\n")})
    ctx = ctx_for(guest, tmp_path)
    assert getter("vm_command_line")(ctx, {"command": "ls", "shell": True}) == "a\nb\n"
    assert getter("vm_command_error")(ctx, {"command": "ls"}) == "warning\n"


def test_rule_and_list_directory(tmp_path):
    tree = {"type": "directory", "name": "d", "children": []}
    ctx = ctx_for(FakeGuest(tree=tree), tmp_path)
    assert getter("rule")(ctx, {"rules": {"expected": 1}}) == {"expected": 1}
    assert getter("list_directory")(ctx, {"path": "Desktop"}) == tree
    assert ctx.client.calls[-1] == ("list_directory", "/home/user/Desktop")
    assert getter("list_directory")(ctx_for(FakeGuest(), tmp_path), {"path": "/x"}) is None


def test_cache_file_reads_plain_and_url_style_paths(tmp_path):
    ctx = ctx_for(FakeGuest(), tmp_path)
    ctx.cache_dir.mkdir(parents=True)
    (ctx.cache_dir / "gold.txt").write_text("g")
    assert getter("cache_file")(ctx, {"path": "gold.txt"}) == str(ctx.cache_dir / "gold.txt")
    url = "https://example.org/files/setup.sh"
    named = ctx.cache_dir / f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_setup.sh"
    named.write_text("s")
    assert getter("cache_file")(ctx, {"path": url}) == str(named)
    with pytest.raises(FileNotFoundError, match="'nope.txt' is not in the cache of task 't1'"):
        getter("cache_file")(ctx, {"path": "nope.txt"})


def test_cloud_file_is_cache_first(tmp_path):
    ctx = ctx_for(FakeGuest(), tmp_path)
    ctx.cache_dir.mkdir(parents=True)
    (ctx.cache_dir / "gold.xlsx").write_bytes(b"G")
    cfg = {"path": "https://unreachable.invalid/gold.xlsx", "dest": "gold.xlsx"}
    assert Path(getter("cloud_file")(ctx, cfg)).read_bytes() == b"G"


def test_cloud_file_downloads_file_urls_and_multi(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_text("A")
    (src / "b").write_text("B")
    ctx = ctx_for(FakeGuest(), tmp_path)
    cfg = {
        "path": [(src / "a").as_uri(), (src / "b").as_uri()],
        "dest": ["a", "b"],
        "multi": True,
        "gives": [0, 1],
    }
    a, b = getter("cloud_file")(ctx, cfg)
    assert Path(a).read_text() == "A" and Path(b).read_text() == "B"


# -- evaluate(): OSWorld's rules ------------------------------------------------------------------


def test_single_metric_with_expected_and_options(tmp_path):
    guest = FakeGuest(
        files={"/home/user/out.txt": b"Hello  World\n"},
        outputs={"check": ("Directory exists.\n", "")},
    )
    ctx = ctx_for(guest, tmp_path)
    (ctx.cache_dir).mkdir(parents=True)
    (ctx.cache_dir / "gold.txt").write_text("hello world")
    t = task_with(
        {
            "func": "compare_text_file",
            "result": {"type": "vm_file", "path": "/home/user/out.txt", "dest": "out.txt"},
            "expected": {"type": "cache_file", "path": "gold.txt"},
            "options": {"ignore_blanks": True, "ignore_case": True},
        }
    )
    r = evaluate(t, ctx)
    assert r.score == 1.0
    assert r.details["metrics"][0]["func"] == "compare_text_file"
    t2 = task_with(
        {
            "func": "exact_match",
            "result": cmd("check"),
            "expected": rule(expected="Directory exists.\n"),
        }
    )
    assert evaluate(t2, ctx).score == 1.0


def test_missing_result_file_scores_zero_not_error(tmp_path):
    t = task_with(
        {
            "func": "compare_text_file",
            "result": {"type": "vm_file", "path": "/home/user/nope", "dest": "nope"},
            "expected": {"type": "cache_file", "path": "gold.txt"},
        }
    )
    r = evaluate(t, ctx_for(FakeGuest(), tmp_path))
    assert r.score == 0.0 and "missing" in r.details["metrics"][0]["note"]


def test_a_postconfig_output_the_agents_desktop_refused_scores_zero(tmp_path):
    """A ``cache_file`` a postconfig command writes is what the agent's desktop printed: the
    command refused there (400), no file, the agent's doing (0), not a missing gold file."""

    class Refusing(FakeGuest):
        def execute(self, command, shell=False, timeout=120.0, setup=False):
            raise GuestError("cannot run", status=400, endpoint="/setup/execute")

    t = task_with(
        {
            "postconfig": [
                {"type": "execute", "parameters": {"command": "ls ~", "stdout": "ls.out"}}
            ],
            "func": "exact_match",
            "result": {"type": "cache_file", "path": "ls.out"},
            "expected": rule(expected="x"),
        }
    )
    r = evaluate(t, ctx_for(Refusing(), tmp_path))
    assert r.score == 0.0 and "result not found" in r.details["metrics"][0]["note"]


def test_a_setup_output_missing_from_the_cache_is_an_evaluator_error(tmp_path):
    """The same file written by *setup* (before the agent acted) is the judge's."""
    t = task_with(
        {
            "func": "exact_match",
            "result": {"type": "cache_file", "path": "absent"},
            "expected": rule(expected="x"),
        }
    )
    with pytest.raises(EvaluatorError, match="cache_file' raised FileNotFoundError"):
        evaluate(t, ctx_for(FakeGuest(), tmp_path))


def test_missing_gold_file_is_an_evaluator_error(tmp_path):
    guest = FakeGuest(files={"/home/user/out.txt": b"x"})
    t = task_with(
        {
            "func": "compare_text_file",
            "result": {"type": "vm_file", "path": "out.txt", "dest": "out.txt"},
            "expected": {"type": "cache_file", "path": "gold.txt"},
        }
    )
    with pytest.raises(
        EvaluatorError, match="expected getter 'cache_file' raised FileNotFoundError"
    ):
        evaluate(t, ctx_for(guest, tmp_path))


def test_unreachable_gold_download_is_an_evaluator_error(tmp_path):
    guest = FakeGuest(files={"/home/user/x": b"x"})
    t = task_with(
        {
            "func": "compare_text_file",
            "result": {"type": "vm_file", "path": "/home/user/x", "dest": "x"},
            "expected": {"type": "cloud_file", "path": "ftp://nowhere/gold", "dest": "g"},
        }
    )
    with pytest.raises(EvaluatorError, match="Place the file at .*cache/t1/g") as info:
        evaluate(t, ctx_for(guest, tmp_path))
    assert isinstance(info.value.__cause__, SetupError)


def test_getter_exception_is_an_evaluator_error_never_zero(tmp_path):
    t = task_with(
        {"func": "exact_match", "result": cmd("unknown-cmd"), "expected": rule(expected="")}
    )
    with pytest.raises(EvaluatorError, match="result getter 'vm_command_line' raised GuestError"):
        evaluate(t, ctx_for(FakeGuest(), tmp_path))


def _gold_task(func: str) -> Task:
    return task_with(
        {
            "func": func,
            "result": {"type": "vm_file", "path": "out.txt", "dest": "out.txt"},
            "expected": {"type": "cache_file", "path": "gold.txt"},
        }
    )


def _with_gold(tmp_path: Path, text: str = "gold\n") -> EvalContext:
    ctx = ctx_for(FakeGuest(files={"/home/user/out.txt": b"\xff agent's bytes"}), tmp_path)
    ctx.cache_dir.mkdir(parents=True, exist_ok=True)
    (ctx.cache_dir / "gold.txt").write_text(text)
    return ctx


def test_a_metric_raising_on_the_agents_file_but_not_on_the_gold_scores_zero(tmp_path):
    """Blame by provenance: the gold scored against itself runs, so the agent's file made the
    metric raise. 0 with the reason, counted per metric, never an excluded episode."""
    from osworld_gym.evaluators.provenance import raised_counts

    def strict_utf8(result: str, expected: str) -> float:
        return float(Path(result).read_text("utf-8") == Path(expected).read_text("utf-8"))

    register_metric("strict_utf8", strict_utf8)
    try:
        before = raised_counts().get("metric strict_utf8", 0)
        r = evaluate(_gold_task("strict_utf8"), _with_gold(tmp_path))
        m = r.details["metrics"][0]
        assert r.score == 0.0 and m["raised"] == "strict_utf8: UnicodeDecodeError", m
        assert "the gold scored against itself does not" in m["note"], m
        assert raised_counts()["metric strict_utf8"] == before + 1
    finally:
        registry.unregister_metric("strict_utf8")


def test_a_metric_raising_on_the_gold_against_itself_is_an_evaluator_error(tmp_path):
    """The same metric on gold that is not UTF-8 either: it cannot score its own gold, so the
    judge is broken (gold data or metric) and the episode has no score."""

    def strict_utf8(result: str, expected: str) -> float:
        return float(Path(result).read_text("utf-8") == Path(expected).read_text("utf-8"))

    register_metric("strict_utf8", strict_utf8)
    try:
        ctx = _with_gold(tmp_path)
        (ctx.cache_dir / "gold.txt").write_bytes(b"\xff gold")
        with pytest.raises(EvaluatorError, match="gold scored against itself too"):
            evaluate(_gold_task("strict_utf8"), ctx)
    finally:
        registry.unregister_metric("strict_utf8")


def test_a_metric_raising_on_an_agent_value_checked_by_rules_scores_zero(tmp_path):
    """No gold file to check against (rules): only the agent's value varies between episodes,
    so the failure is scored 0, with the reason."""
    register_metric("explodes", lambda result, rules: 1 / 0)
    try:
        t = task_with({"func": "explodes", "result": cmd("ls"), "expected": rule()})
        r = evaluate(t, ctx_for(FakeGuest(outputs={"ls": ("", "")}), tmp_path))
        note = r.details["metrics"][0]["note"]
        assert r.score == 0.0 and "ZeroDivisionError" in note and "no gold file" in note
    finally:
        registry.unregister_metric("explodes")


def test_a_metric_raising_on_judge_inputs_only_is_an_evaluator_error(tmp_path):
    register_metric("explodes", lambda result, rules: 1 / 0)
    try:
        t = task_with({"func": "explodes", "result": rule(a=1), "expected": rule()})
        with pytest.raises(EvaluatorError, match=r"metric 0 \(explodes\) raised ZeroDivisionError"):
            evaluate(t, ctx_for(FakeGuest(), tmp_path))
    finally:
        registry.unregister_metric("explodes")


def test_options_that_do_not_fit_the_metric_are_an_evaluator_error(tmp_path):
    t = task_with(
        {
            "func": "exact_match",
            "result": cmd("ls"),
            "expected": rule(expected=""),
            "options": {"no_such_option": True},
        }
    )
    with pytest.raises(EvaluatorError, match="options do not fit the metric"):
        evaluate(t, ctx_for(FakeGuest(outputs={"ls": ("", "")}), tmp_path))


def test_a_score_outside_0_1_on_the_gold_is_an_evaluator_error(tmp_path):
    register_metric("too_big", lambda result, expected: 3.0)
    try:
        with pytest.raises(EvaluatorError, match="outside"):
            evaluate(_gold_task("too_big"), _with_gold(tmp_path))
    finally:
        registry.unregister_metric("too_big")


def test_infeasible_scores_one_only_for_a_final_fail(tmp_path):
    t = task_with({"func": "infeasible"})
    assert evaluate(t, ctx_for(FakeGuest(), tmp_path, last_action="FAIL")).score == 1.0
    assert evaluate(t, ctx_for(FakeGuest(), tmp_path, last_action="DONE")).score == 0.0
    assert evaluate(t, ctx_for(FakeGuest(), tmp_path, last_action=None)).score == 0.0


def test_final_fail_on_a_feasible_task_scores_zero_without_getters(tmp_path):
    guest = FakeGuest(outputs={"ok": ("yes\n", "")})
    t = task_with({"func": "exact_match", "result": cmd("ok"), "expected": rule(expected="yes\n")})
    r = evaluate(t, ctx_for(guest, tmp_path, last_action="FAIL"))
    assert r.score == 0.0 and guest.calls == []


# conj semantics: the four commands produce outputs matching 1, 0 or a half score
OUTPUTS = {"one": ("1", ""), "zero": ("0", ""), "half": ("0.5", ""), "one_b": ("1", "")}


def graded(result: str) -> float:
    return float(result)


@pytest.fixture
def graded_metric():
    register_metric("graded", graded)
    yield
    registry.unregister_metric("graded")


def conj_task(conj: str | None, commands: list[str]) -> Task:
    ev: dict[str, Any] = {"func": ["graded"] * len(commands), "result": [cmd(c) for c in commands]}
    if conj:
        ev["conj"] = conj
    return task_with(ev)


@pytest.mark.parametrize(
    ("conj", "commands", "score", "ran"),
    [
        (None, ["one", "half"], 0.75, 2),  # default "and": mean
        ("and", ["one", "one_b"], 1.0, 2),
        ("and", ["zero", "one"], 0.0, 1),  # early exit on 0
        ("and", ["one", "zero", "half"], 0.0, 2),
        ("or", ["half", "zero"], 0.5, 2),  # no 1: max
        ("or", ["one", "zero"], 1.0, 1),  # early exit on 1
        ("or", ["zero", "half", "one"], 1.0, 3),
    ],
)
def test_conj_and_or(tmp_path, graded_metric, conj, commands, score, ran):
    guest = FakeGuest(outputs=OUTPUTS)
    r = evaluate(conj_task(conj, commands), ctx_for(guest, tmp_path))
    assert r.score == pytest.approx(score)
    assert len(guest.calls) == ran == len(r.details["metrics"])


def test_lists_with_null_expected_and_options(tmp_path):
    guest = FakeGuest(outputs={"ls": ("a.txt\n", ""), "pwd": ("/home/user\n", "")})
    t = task_with(
        {
            "func": ["check_include_exclude", "exact_match"],
            "result": [cmd("ls"), cmd("pwd")],
            "expected": [rule(include=["a.txt"]), rule(expected="/home/user\n")],
            "options": [None, {}],
        }
    )
    assert evaluate(t, ctx_for(guest, tmp_path)).score == 1.0


def test_postconfig_runs_before_the_getters(tmp_path):
    guest = FakeGuest(outputs={"ls": ("a\n", "")})
    t = task_with(
        {
            "func": "exact_match",
            "result": cmd("ls"),
            "expected": rule(expected="a\n"),
            "postconfig": [
                {"type": "activate_window", "parameters": {"window_name": "Mousepad"}},
                {"type": "sleep", "parameters": {"seconds": 0}},
            ],
        }
    )
    runner = SetupRunner(guest, cache_dir=tmp_path / "cache", task_id="t1", sleep=lambda s: None)
    assert evaluate(t, ctx_for(guest, tmp_path), runner).score == 1.0
    assert [c[0] for c in guest.calls] == ["activate_window", "execute"]


def test_placeholders_are_substituted_in_getter_configs(tmp_path):
    guest = FakeGuest(outputs={"echo password": ("password\n", "")})
    t = task_with(
        {
            "func": "exact_match",
            "result": cmd("echo {CLIENT_PASSWORD}"),
            "expected": rule(expected="password\n"),
        }
    )
    assert evaluate(t, ctx_for(guest, tmp_path)).score == 1.0


def test_custom_getter_can_be_registered(tmp_path):
    register_getter("constant", lambda ctx, config: config["value"])
    try:
        t = task_with(
            {
                "func": "exact_match",
                "result": {"type": "constant", "value": 7},
                "expected": rule(expected=7),
            }
        )
        assert evaluate(t, ctx_for(FakeGuest(), tmp_path)).score == 1.0
    finally:
        registry.unregister_getter("constant")


# -- validate_evaluator ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("evaluator", "message"),
    [
        (
            {"func": "compare_table_of_doom", "result": cmd("x")},
            "unknown metric 'compare_table_of_doom'",
        ),
        ({"func": "exact_match", "result": {"type": "nope"}}, "unknown getter type 'nope'"),
        ({"func": "exact_match"}, "evaluator.result is required"),
        ({"func": "exact_match", "result": [cmd("x")]}, "must be an object when func is a single"),
        ({"func": ["exact_match", "exact_match"], "result": [cmd("x")]}, "one entry per metric"),
        (
            {"func": ["exact_match"], "result": [cmd("x")], "options": {"a": 1}},
            "options must be a list",
        ),
        ({"func": "exact_match", "result": cmd("x"), "conj": "xor"}, "conj must be 'and' or 'or'"),
        ({"func": "exact_match", "result": {"type": "vm_file", "path": "/x"}}, "missing 'dest'"),
        ({"func": ["infeasible", "exact_match"], "result": [None, cmd("x")]}, "only metric"),
        ({"func": 3}, "func must be a metric name"),
        (
            {"func": "infeasible", "postconfig": [{"type": "nap", "parameters": {}}]},
            "postconfig step 0 has unknown type 'nap'",
        ),
        ("exact_match", "'evaluator' must be an object"),
    ],
)
def test_validate_evaluator_rejects(evaluator, message):
    with pytest.raises(TaskError, match=message):
        validate_evaluator(evaluator, task_id="v-1")


def test_validate_evaluator_accepts_osworld_shapes():
    validate_evaluator({"func": "infeasible"})
    validate_evaluator(
        {
            "func": ["exact_match", "check_include_exclude"],
            "conj": "or",
            "result": [cmd("a"), cmd("b")],
            "expected": [rule(expected="a"), {}],
            "options": [{}, None],
        }
    )


def test_two_episodes_of_one_task_keep_their_fetched_files_apart(tmp_path):
    """A GRPO group runs one task on several desktops at once: each episode's vm_file result
    and setup outputs live in its own work dir, so one desktop's file never scores another."""
    from osworld_gym.evaluators.getters.file import get_cache_file, get_vm_file

    class Desktop:
        def __init__(self, text):
            self.text = text

        def get_file(self, path, max_bytes=None):
            return self.text.encode()

    shared = tmp_path / "cache" / "t"
    a = EvalContext(
        client=Desktop("from A"), cache_dir=shared, task_id="t", work_dir=tmp_path / "a"
    )
    b = EvalContext(
        client=Desktop("from B"), cache_dir=shared, task_id="t", work_dir=tmp_path / "b"
    )
    path_a = get_vm_file(a, {"path": "/home/user/out.txt", "dest": "out.txt"})
    path_b = get_vm_file(b, {"path": "/home/user/out.txt", "dest": "out.txt"})
    assert open(path_a).read() == "from A" and open(path_b).read() == "from B"
    (tmp_path / "a" / "gold.txt").write_text("A's setup output")
    shared.mkdir(parents=True)
    (shared / "gold.txt").write_text("placed in the cache")
    assert open(get_cache_file(a, {"path": "gold.txt"})).read() == "A's setup output"
    assert open(get_cache_file(b, {"path": "gold.txt"})).read() == "placed in the cache"
