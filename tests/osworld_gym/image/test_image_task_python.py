"""The docker image gets the same task python as the local sandbox: the venv the guest looks
for (guest/task_python.py's default), installed offline from wheels of the pinned
requirements. Building a real image is tests/osworld_gym/providers/test_docker.py's job; this checks
the recipe."""

from __future__ import annotations

import pytest
from osworld_gym.guest import task_python
from osworld_gym.image import recipe, render_dockerfile


def test_the_image_installs_the_task_python_where_the_guest_looks_for_it():
    assert recipe.TASK_PYTHON == str(task_python.DEFAULT_VENV)
    for apps in recipe.APPS:
        dockerfile = render_dockerfile(apps)
        layer = dockerfile[dockerfile.index("COPY wheels/task") :]
        layer = layer[: layer.index("\n\n")]
        assert f"python3 -m venv {recipe.TASK_PYTHON}" in layer
        assert "--no-index" in layer and "-r /tmp/wheels/task/requirements.txt" in layer
        # before osworld-gym's own wheel, so a code change does not reinstall it
        assert dockerfile.index("COPY wheels/task") < dockerfile.index("COPY wheels/*.whl")
    # tkinter, which pyautogui's mouseinfo imports, comes from the system layer
    assert "python3-tk" in recipe.SYSTEM_PACKAGES
    assert any(r.startswith("pyautogui==") for r in task_python.requirements())


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_task_step_imports_pyautogui_in_a_container():
    """A config step ``python -c "import pyautogui ..."`` runs in the docker desktop with the
    task python and sees the container's screen (before, the image had none: the step failed)."""
    docker = pytest.importorskip("docker", reason="the docker extra is not installed")
    from osworld_gym.env import OSWorldEnv
    from osworld_gym.image import BuildOptions, build_image
    from osworld_gym.providers.docker import DockerProvider

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException:
        pytest.skip("no Docker daemon (scripts/test.sh starts one)")
    tag = build_image(BuildOptions(apps="minimal"), client=client).tag  # reused if unchanged
    write = (
        "import pyautogui, pathlib; "
        "pathlib.Path('/home/user/size.txt').write_text(str(tuple(pyautogui.size())))"
    )
    task = {
        "id": "docker-task-python",
        "instruction": "x",
        "config": [{"type": "execute", "parameters": {"command": ["python", "-c", write]}}],
        "evaluator": {
            "func": "exact_match",
            "result": {"type": "vm_command_line", "command": "cat ~/size.txt", "shell": True},
            "expected": {"type": "rule", "rules": {"expected": "(640, 480)"}},
        },
    }
    env = OSWorldEnv(provider=DockerProvider(screen_size=(640, 480), image=tag), tasks=None)
    try:
        env.reset(options={"task": task})
        _, reward, _, _, info = env.step("DONE")
    finally:
        env.close()
    assert info["infra_error"] is None and reward == 1.0
