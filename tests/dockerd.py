"""What the docker tests share: a reachable Docker daemon (started here when it is not)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import docker
import pytest
from osworld_gym import image as image_pkg

START_DOCKERD = Path(image_pkg.__file__).with_name("start-dockerd.sh")


def daemon() -> docker.DockerClient:
    """A client of the running daemon; starts dockerd (root only) or skips with the reason."""
    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except docker.errors.DockerException:
        pass
    if shutil.which("dockerd") is None:
        pytest.skip("Docker is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        pytest.skip("the Docker daemon is not running and starting it needs root")
    subprocess.run(["bash", str(START_DOCKERD)], check=True, timeout=120)
    return docker.from_env(timeout=120)
