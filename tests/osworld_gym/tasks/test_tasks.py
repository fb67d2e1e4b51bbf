"""Tasks: the record, loading from every supported source, placeholders, the file cache."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import httpx
import pytest
from osworld_gym.errors import SetupError, TaskError
from osworld_gym.support import load_tasks
from osworld_gym.tasks import (
    Task,
    TaskSet,
    cloud_file_cache_path,
    download_cache_path,
    fetch,
    guest_path,
    placeholder_values,
    substitute,
)


def make_task(task_id: str = "t-1", **overrides) -> dict:
    d = {
        "id": task_id,
        "snapshot": "os",
        "instruction": "Create the folder ~/x",
        "source": "tests",
        "config": [{"type": "execute", "parameters": {"command": "mkdir -p ~/y", "shell": True}}],
        "related_apps": ["os"],
        "evaluator": {
            "func": "exact_match",
            "result": {"type": "vm_command_line", "command": "ls ~", "shell": True},
            "expected": {"type": "rule", "rules": {"expected": "x\n"}},
        },
        "proxy": False,
    }
    d.update(overrides)
    return d


# -- Task ---------------------------------------------------------------------------------------


def test_task_from_dict_reads_every_field():
    t = Task.from_dict(make_task(oracle=["pyautogui.hotkey('ctrl', 's')"]))
    assert (t.id, t.domain, t.snapshot, t.source, t.proxy) == ("t-1", "os", "os", "tests", False)
    assert t.config[0]["type"] == "execute"
    assert t.oracle == ["pyautogui.hotkey('ctrl', 's')"]
    assert t.raw["instruction"] == t.instruction
    assert not t.is_infeasible


def test_task_keeps_its_own_copy_of_the_json():
    d = make_task()
    t = Task.from_dict(d)
    d["config"].clear()
    d["evaluator"]["func"] = "nope"
    assert len(t.config) == 1 and t.evaluator["func"] == "exact_match"


@pytest.mark.parametrize(
    ("apps", "snapshot", "passed", "domain"),
    [
        (["os"], "os", None, "os"),
        (["vscode"], "vscode", None, "vs_code"),
        (["chrome", "gimp"], "chrome", None, "multi_apps"),
        ([], "libreoffice_calc", None, "libreoffice_calc"),
        (["chrome"], "chrome", "web", "web"),
    ],
)
def test_domain_comes_from_the_caller_else_related_apps_else_snapshot(
    apps, snapshot, passed, domain
):
    t = Task.from_dict(make_task(related_apps=apps, snapshot=snapshot), domain=passed)
    assert t.domain == domain


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": ""}, "valid 'id'"),
        ({"instruction": ""}, "'instruction' is missing"),
        ({"config": {"type": "sleep"}}, "field 'config' must be a list"),
        ({"evaluator": None}, "'evaluator' must be an object"),
        ({"related_apps": "os"}, "field 'related_apps' must be a list"),
        ({"proxy": "yes"}, "field 'proxy' must be true or false"),
        ({"oracle": "pyautogui.press('a')"}, "'oracle' must be a list"),
    ],
)
def test_malformed_fields_raise_task_error_naming_task_and_field(change, message):
    with pytest.raises(TaskError, match=message) as info:
        Task.from_dict(make_task("bad-task", **change))
    if change.get("id") != "":
        assert "'bad-task'" in str(info.value)


def test_unknown_metric_is_rejected_at_load_time():
    d = make_task("m-1")
    d["evaluator"]["func"] = "compare_table_of_doom"
    with pytest.raises(TaskError, match="task 'm-1'.*unknown metric 'compare_table_of_doom'"):
        Task.from_dict(d)


def test_unknown_getter_and_setup_step_are_rejected_at_load_time():
    d = make_task("g-1")
    d["evaluator"]["result"]["type"] = "vm_mind_reader"
    with pytest.raises(TaskError, match="unknown getter type 'vm_mind_reader'"):
        Task.from_dict(d)
    d = make_task("s-1", config=[{"type": "googledrive", "parameters": {"operation": []}}])
    with pytest.raises(TaskError, match="config step 0 has type 'googledrive'.*not support"):
        Task.from_dict(d)
    d = make_task("s-2", config=[{"type": "chrome_open_tabs", "parameters": {"urls_to_open": []}}])
    with pytest.raises(TaskError, match="'urls_to_open' must be a non-empty list of URLs"):
        Task.from_dict(d)


def test_validation_can_be_deferred():
    d = make_task(config=[{"type": "teleport", "parameters": {}}])
    t = Task.from_dict(d, validate=False)
    with pytest.raises(TaskError, match="unknown type 'teleport'"):
        t.validate()


def test_to_dict_round_trips():
    t = Task.from_dict(make_task(oracle=["FAIL"]), domain="os")
    again = Task.from_dict(t.to_dict())
    assert again == t and again.domain == "os"


# -- loader -------------------------------------------------------------------------------------


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_load_from_dict_list_and_task_objects():
    t = Task.from_dict(make_task("c"))
    ts = load_tasks([make_task("a"), make_task("b"), t])
    assert ts.ids() == ["a", "b", "c"]
    assert load_tasks(make_task("z")).ids() == ["z"]


def test_load_from_file_holding_one_task_or_a_list(tmp_path):
    one = write_json(tmp_path / "one.json", make_task("one"))
    many = write_json(tmp_path / "many.json", [make_task("m1"), make_task("m2")])
    assert load_tasks(one).ids() == ["one"]
    assert load_tasks(str(many)).ids() == ["m1", "m2"]


def test_load_from_plain_directory_recurses_and_sorts(tmp_path):
    write_json(tmp_path / "b" / "2.json", make_task("two"))
    write_json(tmp_path / "a.json", make_task("one"))
    assert load_tasks(tmp_path).ids() == ["one", "two"]


def make_evaluation_examples(root: Path) -> Path:
    write_json(root / "examples" / "os" / "os-a.json", make_task("os-a", related_apps=["x"]))
    write_json(root / "examples" / "os" / "os-b.json", make_task("os-b"))
    write_json(root / "examples" / "chrome" / "ch-a.json", make_task("ch-a"))
    write_json(root / "test_all.json", {"os": ["os-b", "os-a"], "chrome": ["ch-a"]})
    write_json(root / "test_small.json", {"os": ["os-a"]})
    return root


def test_load_osworld_evaluation_examples_with_meta_file(tmp_path):
    root = make_evaluation_examples(tmp_path / "evaluation_examples")
    ts = load_tasks(root)
    assert ts.ids() == ["os-b", "os-a", "ch-a"]
    # the domain comes from the meta file, not from related_apps
    assert ts["os-a"].domain == "os" and ts["ch-a"].domain == "chrome"
    assert load_tasks(root, meta="test_small.json").ids() == ["os-a"]
    assert load_tasks(root / "test_all.json", domains="chrome").ids() == ["ch-a"]
    assert load_tasks(root, domains=["os"]).domains() == ["os"]


def test_meta_errors_name_the_problem(tmp_path):
    root = make_evaluation_examples(tmp_path / "ee")
    with pytest.raises(TaskError, match=r"domain\(s\) \['gimp'\] not in .*available: chrome, os"):
        load_tasks(root, domains="gimp")
    write_json(root / "broken.json", {"os": ["os-missing"]})
    with pytest.raises(TaskError, match="lists task 'os-missing' but .*os-missing.json does not"):
        load_tasks(root, meta="broken.json")
    with pytest.raises(TaskError, match="meta file nope.json not found"):
        load_tasks(root, meta="nope.json")


def test_loader_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TaskError, match="bad.json is not valid JSON"):
        load_tasks(bad)
    with pytest.raises(TaskError, match="does not exist"):
        load_tasks(tmp_path / "missing.json")
    d = make_task("x-1")
    d["evaluator"]["func"] = "nope"
    f = write_json(tmp_path / "dir" / "x-1.json", d)
    with pytest.raises(TaskError, match=f"task 'x-1'.*unknown metric 'nope'.*{f.name}"):
        load_tasks(tmp_path / "dir")


def test_skip_unsupported_drops_bad_tasks(tmp_path, caplog):
    d = make_task("bad")
    d["evaluator"]["func"] = "compare_table"
    with caplog.at_level(logging.INFO):
        ts = load_tasks([make_task("good"), d], skip_unsupported=True)
    assert ts.ids() == ["good"]
    assert "compare_table" in caplog.text and "compare_table" in ts.unsupported["bad"]


def test_duplicate_ids_and_empty_sets_are_errors():
    with pytest.raises(TaskError, match="duplicate task id 'a'"):
        load_tasks([make_task("a"), make_task("a")])
    with pytest.raises(TaskError, match="no tasks loaded"):
        load_tasks([make_task("a")], domains="chrome")


# -- TaskSet ------------------------------------------------------------------------------------


def test_taskset_indexing_by_id_and_position():
    ts = load_tasks([make_task("b"), make_task("a")])
    assert len(ts) == 2 and ts[0].id == "b" and ts["a"].id == "a" and ts[-1].id == "a"
    assert "a" in ts and "zz" not in ts
    assert isinstance(ts[:1], TaskSet) and ts[:1].ids() == ["b"]
    with pytest.raises(KeyError, match="no task with id 'zz'"):
        ts["zz"]
    with pytest.raises(IndexError):
        ts[5]


def test_for_seed_is_seed_mod_len_over_tasks_sorted_by_domain_then_id():
    tasks = [
        make_task("z", related_apps=["chrome"]),
        make_task("b"),
        make_task("a"),
    ]
    ts = load_tasks(tasks)
    expected = ["z", "a", "b"]  # ("chrome", "z") < ("os", "a") < ("os", "b")
    assert [ts.for_seed(s).id for s in range(6)] == expected * 2
    assert ts.for_seed(-1).id == expected[-1]
    # the mapping depends only on the set, not on the listing order
    shuffled = load_tasks(list(reversed(tasks)))
    assert [shuffled.for_seed(s).id for s in range(10)] == [ts.for_seed(s).id for s in range(10)]
    with pytest.raises(TypeError):
        ts.for_seed("3")  # type: ignore[arg-type]


def test_domains_and_filter():
    ts = load_tasks([make_task("a"), make_task("c", related_apps=["chrome"])])
    assert ts.domains() == ["chrome", "os"]
    assert ts.filter("chrome").ids() == ["c"]
    with pytest.raises(TaskError, match="no task in domain"):
        ts.filter("gimp")


# -- placeholders ---------------------------------------------------------------------------------


def test_placeholders_substitute_only_known_names_in_nested_values():
    values = placeholder_values(client_password="s3cret", screen_size=(1280, 721))
    step = {
        "command": ["python", "-c", "click({SCREEN_WIDTH_HALF}, {SCREEN_HEIGHT_HALF})"],
        "shell": False,
        "nested": [
            {"pw": "echo {CLIENT_PASSWORD} | sudo -S ls"},
            ("{SCREEN_WIDTH}x{SCREEN_HEIGHT}",),
        ],
        "other": "${HOME} {} {UNKNOWN} {client_password} {{CLIENT_PASSWORD}}",
        "n": 3,
    }
    out = substitute(step, values)
    assert out["command"][2] == "click(640, 360)"
    assert out["nested"][0]["pw"] == "echo s3cret | sudo -S ls"
    assert out["nested"][1] == ("1280x721",)
    assert out["other"] == "${HOME} {} {UNKNOWN} {client_password} {s3cret}"
    assert out["n"] == 3 and out["shell"] is False
    assert step["command"][2].startswith("click({SCREEN")  # input untouched


def test_guest_paths_are_relative_to_the_user_home():
    assert guest_path("setup.sh") == "/home/user/setup.sh"
    assert guest_path("~/Desktop/x") == "/home/user/Desktop/x"
    assert guest_path("/etc/hosts") == "/etc/hosts"


# -- cache ----------------------------------------------------------------------------------------


def test_download_cache_naming_matches_osworld(tmp_path):
    url = "https://huggingface.co/datasets/x/resolve/main/calc/NetIncome.xlsx"
    got = download_cache_path(tmp_path, "task-9", url, "/home/user/NetIncome.xlsx")
    assert got == tmp_path / "task-9" / f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_NetIncome.xlsx"
    assert (
        cloud_file_cache_path(tmp_path, "task-9", "gold.xlsx") == tmp_path / "task-9" / "gold.xlsx"
    )


def transport(handler) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler))


def test_fetch_uses_the_cache_without_network(tmp_path):
    dest = tmp_path / "t" / "f.txt"
    dest.parent.mkdir()
    dest.write_text("cached")

    def boom(request):
        raise AssertionError("network used")

    assert fetch("https://example.org/f.txt", dest, client=transport(boom)).read_text() == "cached"


def test_fetch_downloads_atomically(tmp_path):
    dest = tmp_path / "t" / "f.txt"
    client = transport(lambda request: httpx.Response(200, content=b"payload"))
    assert fetch("https://example.org/f.txt", dest, client=client).read_bytes() == b"payload"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["f.txt"]  # no temp files left


def test_fetch_unreachable_says_where_to_place_the_file(tmp_path):
    dest = tmp_path / "t" / "f.txt"

    def offline(request):
        raise httpx.ConnectError("no route to host", request=request)

    with pytest.raises(SetupError, match=f"place that file at {dest}"):
        fetch("https://example.org/f.txt", dest, client=transport(offline), attempts=1)
    assert not dest.exists() and not any(dest.parent.glob("*.part"))


def test_fetch_http_error_is_not_retried(tmp_path):
    calls = []

    def not_found(request):
        calls.append(request)
        return httpx.Response(404)

    with pytest.raises(SetupError, match="HTTP 404"):
        fetch("https://example.org/x", tmp_path / "x", client=transport(not_found), attempts=3)
    assert len(calls) == 1


def test_fetch_rejects_other_schemes(tmp_path):
    with pytest.raises(SetupError, match="only http, https, file and builtin-asset"):
        fetch("ftp://example.org/x", tmp_path / "x")
