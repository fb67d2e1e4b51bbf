"""Seeded task variation and offline-generated task files (no desktop needed)."""

from __future__ import annotations

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from osworld_gym.errors import SetupError, TaskError
from osworld_gym.tasks import Task
from osworld_gym.tasks.assets import generate
from osworld_gym.tasks.cache import download_cache_path, fetch

TEMPLATE = {
    "id": "var-copy-001",
    "instruction": "Copy {{name}}.txt {{n}} times",
    "related_apps": ["os"],
    "variables": {
        "name": {"choice": ["alpha", "beta", "gamma", "delta"]},
        "n": {"randint": [2, 50]},
        "w": {"sample": [["a", "b", "c", "d"], 2], "sep": "+"},
    },
    "config": [
        {
            "type": "download",
            "parameters": {
                "files": [
                    {
                        "url": "builtin-asset://lines?n={{n}}&seed={{name}}",
                        "path": "/home/user/{{name}}.txt",
                    }
                ]
            },
        },
        {"type": "sleep", "parameters": {"seconds": "{{n}}"}},
    ],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "ls ~/{{name}}*"},
        "expected": {"type": "rule", "rules": {"expected": "{{w}}"}},
    },
    "oracle": ["pyautogui.write('{{name}}')"],
}


def test_the_default_instance_uses_first_choices_and_keeps_types():
    task = Task.from_dict(TEMPLATE)
    assert task.instruction == "Copy alpha.txt 2 times"
    assert task.config[1]["parameters"]["seconds"] == 2  # a whole "{{n}}" keeps the int type
    assert task.oracle == ["pyautogui.write('alpha')"]
    assert task.evaluator["expected"]["rules"]["expected"] == "a+b"


def test_same_seed_same_instance_and_seeds_vary_the_instance():
    task = Task.from_dict(TEMPLATE)
    a, b = task.instantiate(5), task.instantiate(5)
    assert a == b and a.config == b.config
    instructions = {task.instantiate(s).instruction for s in range(30)}
    assert len(instructions) > 20
    assert task.instantiate(5).instantiate(6) == task.instantiate(6)  # instances keep the template


def test_undeclared_variables_and_bad_specs_are_task_errors():
    with pytest.raises(TaskError, match="declares no variable 'x'"):
        Task.from_dict({**TEMPLATE, "instruction": "{{x}}"})
    with pytest.raises(TaskError, match="randint"):
        Task.from_dict(
            {**TEMPLATE, "variables": {**TEMPLATE["variables"], "n": {"randint": [5, 1]}}}
        )


def test_generated_files_land_in_the_osworld_cache_path(tmp_path):
    url = "builtin-asset://lines?n=4&seed=x"
    dest = download_cache_path(tmp_path, "t1", url, "/home/user/x.txt")
    assert fetch(url, dest).read_bytes() == generate(url)
    assert len(generate(url).splitlines()) == 4
    assert generate(url) != generate("builtin-asset://lines?n=4&seed=y")
    with pytest.raises(SetupError, match="unknown asset generator 'nope'"):
        generate("builtin-asset://nope?a=1")
    with pytest.raises(SetupError, match="rejected"):
        generate("builtin-asset://lines?seed=1")  # n missing


def test_env_instantiates_variation_from_the_seed():
    env = gym.make("OSWorld-v0", provider="fake", tasks=[TEMPLATE], settle=None)
    try:
        _, info_a = env.reset(seed=3)
        inst_a = env.unwrapped.task.instruction
        _, info_b = env.reset(options={"task": "var-copy-001", "variation": 3})
        assert env.unwrapped.task.instruction == inst_a and info_b["variation"] == 3
        env.reset(options={"task": "var-copy-001"})
        assert env.unwrapped.task.instruction == "Copy alpha.txt 2 times"
    finally:
        env.close()
