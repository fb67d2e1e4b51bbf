"""Task classification: hand-written tasks in the shapes of OSWorld's evaluation_examples."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.env import OSWorldEnv
from osworld_gym.evaluators import register_metric
from osworld_gym.evaluators.metrics.options import honours
from osworld_gym.providers.capabilities import OSWORLD_IMAGE, desktop_path
from osworld_gym.providers.fake import FakeProvider
from osworld_gym.providers.local import LocalProvider
from osworld_gym.support import Capabilities, classifier, classify, load_tasks, local_capabilities
from osworld_gym.tasks.evaluator_registry import unregister_metric

HF = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"
ALL_APPS = frozenset(classifier.APP_KEYS)
SANDBOX = Capabilities(network=False, google=False, vscode=False, gnome=False, apps=ALL_APPS)


def step(kind: str, **parameters: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


def task(
    task_id: str, apps: list[str], config: list[dict], evaluator: dict, **extra: Any
) -> dict[str, Any]:
    return {
        "id": task_id,
        "snapshot": apps[0] if len(apps) == 1 else "multiapps",
        "instruction": "do it",
        "source": "authors",
        "trajectory": "trajectories/",
        "related_apps": apps,
        "config": config,
        "evaluator": evaluator,
        "proxy": False,
        "fixed_ip": False,
        "possibility_of_env_change": "low",
        **extra,
    }


RULE_DIR_EXISTS = {"type": "rule", "rules": {"expected": "Directory exists.\n"}}

OS_RENAME = task(
    "e0df059f",
    ["os"],
    [
        step(
            "execute",
            command="echo {CLIENT_PASSWORD} | sudo -S mkdir ~/Desktop/todo_list_Jan_1",
            shell=True,
        ),
        step(
            "execute",
            command=[
                "python",
                "-c",
                "import pyautogui; import time; "
                "pyautogui.click({SCREEN_WIDTH_HALF}, {SCREEN_HEIGHT_HALF}); time.sleep(0.5);",
            ],
        ),
    ],
    {
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "shell": True,
            "command": "[ -d ~/Desktop/todo_list_Jan_2 ] && echo 'Directory exists.' "
            "|| echo 'Directory does not exist.'",
        },
        "expected": RULE_DIR_EXISTS,
    },
)

OS_BLUETOOTH = task("b3d4a89c", ["os"], [], {"func": "infeasible"})

OS_TERMINAL = task(
    "4d117223",
    ["os"],
    [
        step("download", files=[{"url": f"{HF}/os/4d117223/setup.sh", "path": "setup.sh"}]),
        step("execute", command="chmod +x setup.sh && ./setup.sh", shell=True),
        step(
            "execute",
            command=["python", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 'alt', 't')"],
        ),
        step("activate_window", window_name="Terminal"),
    ],
    {
        "func": "check_include_exclude",
        "postconfig": [
            step("download", files=[{"url": f"{HF}/os/4d117223/eval.sh", "path": "eval.sh"}])
        ],
        "result": {"type": "vm_command_line", "command": "bash eval.sh", "shell": True},
        "expected": {
            "type": "rule",
            "rules": {"include": ["All files have the correct permissions."], "exclude": []},
        },
    },
)

CALC_COPY = task(
    "1273e544",
    ["libreoffice_calc"],
    [
        step(
            "download",
            files=[
                {
                    "url": f"{HF}/libreoffice_calc/1273e544/NetIncome.xlsx",
                    "path": "/home/user/NetIncome.xlsx",
                }
            ],
        ),
        step("open", path="/home/user/NetIncome.xlsx"),
    ],
    {
        "func": "compare_table",
        "postconfig": [
            step("activate_window", window_name="NetIncome.xlsx - LibreOffice Calc", strict=True),
            step("sleep", seconds=0.5),
            step(
                "execute",
                command=["python", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's');"],
            ),
            step("sleep", seconds=0.5),
        ],
        "result": {
            "type": "vm_file",
            "path": "/home/user/NetIncome.xlsx",
            "dest": "NetIncome.xlsx",
        },
        "expected": {
            "type": "cloud_file",
            "path": f"{HF}/libreoffice_calc/1273e544/3_NetIncome_gt1.xlsx",
            "dest": "3_NetIncome_gt1.xlsx",
        },
        "options": {
            "rules": [{"type": "sheet_data", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2"}]
        },
    },
)

CHROME_LAUNCH = [
    step("launch", command=["google-chrome", "--remote-debugging-port=1337"]),
    step("launch", command=["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]),
]

CHROME_TICKETS = task(
    "f3b19d1e",
    ["chrome"],
    [
        *CHROME_LAUNCH,
        step("chrome_open_tabs", urls_to_open=["https://premier.ticketek.com.au/"]),
        step("activate_window", window_name="Google Chrome"),
    ],
    {
        "func": "is_expected_url_pattern_match",
        "result": {"type": "active_tab_info"},
        "expected": {"type": "rule", "rules": {"expected": ["Ticket-Delivery-FAQs"]}},
    },
)

CHROME_LOCAL_PAGE = task(
    "chrome-local",
    ["chrome"],
    [
        *CHROME_LAUNCH,
        step("launch", command=["google-chrome", "http://localhost:8000/index.html"]),
    ],
    {
        "func": "is_expected_url_pattern_match",
        "result": {"type": "active_url_from_accessTree"},
        "expected": {"type": "rule", "rules": {"expected": ["index"]}},
    },
)

VSCODE_SETTINGS = task(
    "0ed39f63",
    ["vscode"],
    [step("launch", command=["code"])],
    {
        "func": "check_json_settings",
        "result": {
            "type": "vm_file",
            "path": "/home/user/.config/Code/User/settings.json",
            "dest": "settings.json",
        },
        "expected": {"type": "rule", "rules": {"expected": {"editor.fontSize": 14}}},
    },
)

OS_TEXT_SCALE = task(
    "gsettings-scale",
    ["os"],
    [],
    {
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "shell": True,
            "command": "gsettings get org.gnome.desktop.interface text-scaling-factor",
        },
        "expected": {"type": "rule", "rules": {"expected": "1.5\n"}},
    },
)

MULTI_GDRIVE = task(
    "gdrive",
    ["chrome", "libreoffice_calc"],
    [
        step(
            "googledrive",
            settings_file="evaluation_examples/settings/googledrive/settings.yml",
            operation=["delete"],
            args=[{"query": "title = 'x'", "trash": False}],
        ),
        *CHROME_LAUNCH,
    ],
    {
        "func": "compare_table",
        "result": {
            "type": "googledrive_file",
            "settings_file": "s.yml",
            "path": "x.xlsx",
            "dest": "x.xlsx",
        },
        "expected": {"type": "cloud_file", "path": f"{HF}/gold.xlsx", "dest": "gold.xlsx"},
        "options": {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]},
    },
)

GIMP_EXPORT = task(
    "gimp-export",
    ["gimp"],
    [step("launch", command=["gimp", "/home/user/Desktop/cat.png"])],
    {
        "func": "compare_images",
        "result": {"type": "vm_file", "path": "/home/user/Desktop/cat.jpg", "dest": "cat.jpg"},
        "expected": {
            "type": "cloud_file",
            "path": f"{HF}/gimp/cat_gold.jpg",
            "dest": "cat_gold.jpg",
        },
    },
)

PROXY_TASK = task("proxied", ["chrome"], CHROME_LAUNCH, {"func": "infeasible"}, proxy=True)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (OS_RENAME, None),
        (OS_BLUETOOTH, None),
        (OS_TERMINAL, None),
        (CALC_COPY, None),
        (CHROME_LOCAL_PAGE, None),
        (CHROME_TICKETS, "needs a live website (https://premier.ticketek.com.au/)"),
        (PROXY_TASK, "needs a live website (proxy: true)"),
        (VSCODE_SETTINGS, "needs VS Code (domain vs_code)"),
        (
            task(
                "ext",
                ["os"],
                [step("execute", command="code --install-extension ms-python.python", shell=True)],
                {"func": "infeasible"},
            ),
            "needs VS Code (code command)",
        ),
        (OS_TEXT_SCALE, "needs GNOME (gsettings)"),
        (MULTI_GDRIVE, "needs a Google account (googledrive, googledrive_file getter)"),
    ],
)
def test_osworld_task_shapes_on_the_sandbox(raw, reason):
    result = classify(raw, SANDBOX)
    assert (result.supported, result.reason) == (reason is None, reason)
    assert bool(result) is result.supported


def test_all_reasons_are_listed_and_the_first_one_is_the_reason():
    result = classify(CHROME_TICKETS, SANDBOX)
    assert result.reasons == ("needs a live website (https://premier.ticketek.com.au/)",)
    gdrive = classify(MULTI_GDRIVE, SANDBOX).reasons
    assert (
        "unknown getter: googledrive_file" in gdrive
        and "unsupported setup step: googledrive" in gdrive
    )


@pytest.mark.parametrize(
    ("raw", "apps", "reason"),
    [
        (GIMP_EXPORT, ALL_APPS - {"gimp"}, "needs apps not installed: gimp"),
        (CALC_COPY, ALL_APPS - {"libreoffice_calc"}, "needs apps not installed: libreoffice_calc"),
        (CHROME_LOCAL_PAGE, ALL_APPS - {"chromium"}, "needs apps not installed: chromium"),
        (
            task(
                "vlc-task",
                ["os"],
                [step("launch", command="VLC_VERBOSE=-1 vlc", shell=True)],
                {
                    "func": "exact_match",
                    "result": {"type": "vlc_config", "dest": "vlcrc"},
                    "expected": {"type": "rule", "rules": {"expected": "x"}},
                },
            ),
            ALL_APPS - {"vlc"},
            "needs apps not installed: vlc",
        ),
        (
            task(
                "impress-open",
                ["os"],
                [step("open", path="/home/user/talk.pptx")],
                {"func": "infeasible"},
            ),
            ALL_APPS - {"libreoffice_impress"},
            "needs apps not installed: libreoffice_impress",
        ),
        (
            task(
                "thunder",
                ["thunderbird"],
                [step("launch", command=["/usr/bin/thunderbird"])],
                {"func": "infeasible"},
            ),
            frozenset(),
            "needs apps not installed: thunderbird",
        ),
    ],
)
def test_missing_apps_are_named(raw, apps, reason):
    caps = Capabilities(network=False, google=False, vscode=False, gnome=False, apps=apps)
    got = classify(raw, caps).reason
    assert got.startswith(reason + " (apt-get install ")  # what to do about it comes along
    assert got.endswith("or run scripts/install.sh)")


def test_every_program_a_task_runs_must_be_on_the_desktop_path(tmp_path):
    """Not only launched apps: setup, postconfig and evaluator commands, shell text included;
    one reason naming them all, with the package to install where one is known."""
    raw = task(
        "nautilus",
        ["os"],
        [
            step("launch", command=["nautilus", "/home/user"]),
            step("execute", command="xsel -b < ~/a.txt && socat -V", shell="true"),
        ],
        {
            "func": "exact_match",
            "result": {"type": "vm_command_line", "command": ["jq", ".", "a.json"]},
            "expected": {"type": "rule", "rules": {"expected": "1"}},
        },
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "socat").write_text("#!/bin/sh\n")
    (bin_dir / "socat").chmod(0o755)
    caps = Capabilities(
        network=False, google=False, vscode=False, gnome=False, apps=ALL_APPS, path=str(bin_dir)
    )
    support_ = classify(raw, caps)
    assert support_.reasons == (
        "needs programs not on the desktop: jq, nautilus, xsel (apt-get install jq nautilus; "
        "no package known to osworld-gym: xsel)",
    )


def test_python_steps_need_the_task_python(tmp_path):
    raw = task(
        "py",
        ["os"],
        [step("execute", command=["python", "-c", "import pyautogui"])],
        {"func": "infeasible"},
    )
    caps = Capabilities(
        network=False, google=False, vscode=False, gnome=False, apps=ALL_APPS, path=str(tmp_path)
    )
    assert classify(raw, caps).reason.startswith(
        "needs programs not on the desktop: python (python with pyautogui: run scripts/install.sh"
    )


def test_local_path_is_the_desktops_not_the_hosts(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    path = desktop_path().split(":")
    assert path[-6:] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".split(":")
    assert any(p.endswith("guest/shims") for p in path)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (
            "echo pw | sudo -S apt-get install -y expect",
            "needs the network (apt-get install in a setup step)",
        ),
        ("pip3 install --user numpy", "needs the network (pip3 install in a setup step)"),
        ("sudo snap install code", "needs the network (snap install in a setup step)"),
    ],
)
def test_steps_that_install_from_the_internet_need_the_network(command, reason):
    raw = task(
        "net", ["os"], [step("execute", command=command, shell=True)], {"func": "infeasible"}
    )
    assert classify(raw, SANDBOX).reason == reason
    assert classify(raw, OSWORLD_IMAGE).supported


def test_a_browser_task_whose_instruction_names_a_site_needs_it():
    raw = task(
        "site",
        ["chrome"],
        [step("launch", command=["google-chrome"])],
        {"func": "infeasible"},
        instruction="Find the cheapest flight on www.delta.com.",
    )
    assert classify(raw, SANDBOX).reason == (
        "needs a live website (www.delta.com, named in the instruction)"
    )
    offline = task(
        "file",
        ["chrome"],
        [step("launch", command=["google-chrome"])],
        {"func": "infeasible"},
        instruction="Save the page as notes.txt.",
    )
    assert classify(offline, SANDBOX).supported


def test_string_booleans_are_accepted():
    raw = task(
        "sb", ["os"], [step("execute", command="ls ~", shell="true")], {"func": "infeasible"}
    )
    assert classify(raw, SANDBOX).supported


@pytest.mark.parametrize(
    ("evaluator", "reason"),
    [
        (
            {"func": "compare_epub", "result": {"type": "vm_file", "path": "/a", "dest": "a"}},
            "unknown metric: compare_epub",
        ),
        (
            {
                "func": "exact_match",
                "result": {"type": "enable_do_not_track_v2"},
                "expected": {"type": "rule", "rules": {"expected": "true"}},
            },
            "unknown getter: enable_do_not_track_v2",
        ),
        (
            {
                "func": "compare_table",
                "result": {"type": "vm_file", "path": "/a.xlsx", "dest": "a.xlsx"},
                "options": {"rules": [{"type": "watermark", "sheet_idx0": 0, "sheet_idx1": "EI0"}]},
            },
            "unsupported compare_table rule: watermark",
        ),
        (
            {
                "func": "compare_pptx_files",
                "result": {"type": "vm_file", "path": "/a.pptx", "dest": "a.pptx"},
                "expected": {"type": "cloud_file", "path": f"{HF}/b.pptx", "dest": "b.pptx"},
                "options": {"examine_shape": False, "examine_sparkles": True},
            },
            "unsupported metric option: compare_pptx_files(examine_sparkles)",
        ),
        (
            {
                "func": "compare_text_file",
                "result": {"type": "vm_file", "path": "/a", "dest": "a"},
                "expected": {"type": "cloud_file", "path": f"{HF}/b", "dest": "b"},
                "options": {"strip": False},
            },
            "unsupported metric option: compare_text_file(strip)",
        ),
        (
            {
                "func": "compare_table",
                "result": {"type": "vm_file", "path": "/a.xlsx", "dest": "a.xlsx"},
            },
            "invalid task: compare_table without options.rules",
        ),
    ],
)
def test_what_osworld_gym_does_not_implement_is_named(evaluator, reason):
    assert classify(task("impl", ["os"], [], evaluator), SANDBOX).reason == reason


def test_malformed_tasks_are_invalid():
    assert classify({"id": "x"}, SANDBOX).reason.startswith("invalid task:")
    bad_step = task("bad-step", ["os"], [step("open")], {"func": "infeasible"})
    assert (
        classify(bad_step, SANDBOX).reason.startswith("invalid task:")
        and "missing parameter 'path'" in classify(bad_step, SANDBOX).reason
    )


def test_osworld_image_providers_only_lack_what_is_not_implemented():
    assert classify(VSCODE_SETTINGS, OSWORLD_IMAGE).supported
    assert classify(OS_TEXT_SCALE, OSWORLD_IMAGE).supported
    assert classify(CHROME_TICKETS, OSWORLD_IMAGE).supported  # chrome_open_tabs runs there
    assert classify(MULTI_GDRIVE, OSWORLD_IMAGE).reason == "unsupported setup step: googledrive"


def test_local_capabilities_look_for_the_app_programs(monkeypatch):
    found = {"chromium", "vlc", "socat"}
    monkeypatch.setattr(
        shutil,
        "which",
        lambda name, path=None: f"/usr/bin/{name}" if name in found else None,
    )
    caps = local_capabilities()
    assert caps.apps == frozenset({"chromium", "vlc"})
    assert (caps.network, caps.google, caps.vscode, caps.gnome) == (False, False, False, False)
    assert classify(GIMP_EXPORT).reason.startswith("needs apps not installed: gimp (")
    assert classify(CHROME_LOCAL_PAGE).supported


def write_evaluation_examples(root: Path, tasks: list[dict[str, Any]]) -> Path:
    meta: dict[str, list[str]] = {}
    for t in tasks:
        domain = t["related_apps"][0] if len(t["related_apps"]) == 1 else "multi_apps"
        domain = {"vscode": "vs_code"}.get(domain, domain)
        (root / "examples" / domain).mkdir(parents=True, exist_ok=True)
        (root / "examples" / domain / f"{t['id']}.json").write_text(json.dumps(t))
        meta.setdefault(domain, []).append(t["id"])
    (root / "test_all.json").write_text(json.dumps(meta))
    return root


def test_load_tasks_skip_unsupported_uses_the_classification(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(
        LocalProvider, "capabilities", classmethod(lambda cls, profile=None: SANDBOX)
    )
    every = [
        OS_RENAME,
        OS_BLUETOOTH,
        OS_TERMINAL,
        CALC_COPY,
        CHROME_TICKETS,
        VSCODE_SETTINGS,
        OS_TEXT_SCALE,
        MULTI_GDRIVE,
        PROXY_TASK,
    ]
    root = write_evaluation_examples(tmp_path / "evaluation_examples", every)
    with caplog.at_level(logging.INFO):
        tasks = load_tasks(root, skip_unsupported=True)
    assert sorted(tasks.ids()) == ["1273e544", "4d117223", "b3d4a89c", "e0df059f"]
    assert "left out task 0ed39f63: needs VS Code" in caplog.text
    assert tasks.unsupported["0ed39f63"].startswith("needs VS Code")
    assert len(tasks.unsupported) == 5
    assert sorted(load_tasks(root).ids()) == sorted(tasks.ids())  # the default
    assert "needs a live website" in caplog.text
    on_osworld_image = load_tasks(root, skip_unsupported=True, provider=OSWORLD_IMAGE)
    assert "0ed39f63" in on_osworld_image and "gsettings-scale" in on_osworld_image
    with pytest.raises(Exception, match="cannot run on local: needs"):
        load_tasks(root, strict=True)  # strict: a task osworld-gym cannot run is an error


@pytest.mark.parametrize(
    ("config", "live"),
    [
        (
            [step("execute", command="echo 'see https://github.com/x' > ~/notes.txt", shell=True)],
            False,
        ),
        ([step("execute", command="wget -q https://github.com/x/archive.zip", shell=True)], True),
        ([step("launch", command=["google-chrome", "https://www.google.com/"])], True),
        ([step("launch", command=["google-chrome", "http://docs.maple.example/start"])], False),
        ([step("open", path="https://arxiv.org/abs/1234")], True),
        ([step("chrome_open_tabs", urls_to_open=["http://127.0.0.1:8000/"])], False),
    ],
)
def test_only_urls_that_are_fetched_need_a_live_website(config, live):
    reasons = classify(task("web", ["os"], config, {"func": "infeasible"}), SANDBOX).reasons
    assert any(r.startswith("needs a live website") for r in reasons) is live


# -- the seams classify reads: provider classes, metric declarations ------------------------------


class _FakeOnOSWorldsImage(FakeProvider):
    """A provider class declaring OSWorld's image (VS Code, GNOME, network, every app)."""

    @classmethod
    def capabilities(cls, profile: str | None = None) -> Capabilities:
        return OSWORLD_IMAGE


def test_the_provider_class_declares_what_its_desktops_offer_the_env_s_tasks():
    tasks = [VSCODE_SETTINGS, OS_BLUETOOTH]
    local = OSWorldEnv(provider=FakeProvider(), tasks=tasks)
    full = OSWorldEnv(provider=_FakeOnOSWorldsImage(), tasks=tasks)
    try:
        assert local.tasks.unsupported == {"0ed39f63": "needs VS Code (domain vs_code)"}
        assert full.tasks.unsupported == {} and "0ed39f63" in full.tasks
    finally:
        local.close()
        full.close()


def test_a_metric_s_own_option_check_and_undeclared_options_are_reported_by_classify():
    def no_negative_tolerance(options):
        return ["unsupported tolerance: negative"] if options.get("tolerance", 0) < 0 else []

    @honours("tolerance", check=no_negative_tolerance)
    def close_enough(result, expected=None, **options):
        return 1.0

    register_metric("close_enough", close_enough)
    try:
        evaluator = {
            "func": "close_enough",
            "result": {"type": "vm_command_line", "command": "ls"},
            "options": {"tolerance": -1, "fancy": True, "off": False},
        }
        support = classify(task("opt", ["os"], [], evaluator), OSWORLD_IMAGE)
        assert support.reasons == (
            "unsupported tolerance: negative",
            "unsupported metric option: close_enough(fancy)",
        )
        evaluator["options"] = {"tolerance": 2}
        assert classify(task("opt", ["os"], [], evaluator), OSWORLD_IMAGE).supported
    finally:
        unregister_metric("close_enough")
