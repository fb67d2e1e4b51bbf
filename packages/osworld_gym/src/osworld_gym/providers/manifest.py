"""What a desktop image holds, written into the image when it is built and read back from it.

Task support must come from the desktops a run really uses, never from an assumed default (the
docker provider once counted OSWorld's full image, VS Code and websites included, for a container
of our ``minimal`` image with no network). So ``osworld-gym image build`` ends by running
:func:`probe` *inside* the image it just built: the same :func:`~.capabilities.local_capabilities`
that classifies tasks for the local sandbox, run where the desktop's programs really are, written
to :data:`MANIFEST_PATH`. The docker provider reads it back without starting the image
(:func:`read_manifest`: a created, never started container and ``docker cp``) and adds what only
the run decides, the container's network (:func:`image_capabilities`).

>>> m = {"schema": 1, "app_set": "minimal", "apps": [], "vscode": False,
...      "gsettings_profiles": ["ubuntu"], "programs": ["bash", "xterm"]}
>>> caps = manifest_capabilities(m, profile="ubuntu", network="none", image="osworld-gym:x")
>>> caps.network, caps.apps, caps.gsettings, "xterm" in caps.programs
(False, frozenset(), True, True)
>>> manifest_capabilities(m, profile="openbox", network="bridge").network
True
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

from osworld_gym.errors import MissingDependencyError
from osworld_gym.image.recipe import APP_SET_ENV, MANIFEST_PATH
from osworld_gym.providers.capabilities import PROFILES, Capabilities, local_capabilities

log = logging.getLogger(__name__)

#: Bumped when the manifest's meaning changes; an image with another schema must be rebuilt.
SCHEMA = 1


def probe(app_set: str | None = None) -> dict[str, Any]:
    """The manifest of the system this runs on (run inside the image, at build time).

    ``apps``, ``vscode`` and ``programs`` are what the desktop's ``PATH`` reaches (the task python,
    our shims, the system directories), ``gsettings_profiles`` the desktop profiles whose
    GSettings-over-dconf programs are all installed.
    """
    from osworld_gym import __version__

    per_profile = {p: local_capabilities(p) for p in PROFILES}
    caps = per_profile["ubuntu"]
    programs: set[str] = set()
    for directory in (caps.path or "").split(os.pathsep):
        try:
            entries = list(Path(directory).iterdir())
        except OSError:
            continue
        programs.update(e.name for e in entries if e.is_file() and os.access(e, os.X_OK))
    return {
        "schema": SCHEMA,
        "osworld_gym": __version__,
        "app_set": app_set or os.environ.get(APP_SET_ENV) or "unknown",
        "apps": sorted(caps.apps or ()),
        "vscode": caps.vscode,
        "gsettings_profiles": sorted(p for p, c in per_profile.items() if c.gsettings),
        "path": caps.path,
        "programs": sorted(programs),
    }


def manifest_capabilities(
    manifest: dict[str, Any], *, profile: str, network: str = "none", image: str = "?"
) -> Capabilities:
    """What a container of an image with ``manifest`` offers tasks, on desktop ``profile`` and
    Docker network ``network`` (``"none"``: no website is reachable). Google accounts and a GNOME
    Shell session are never in our images."""
    return Capabilities(
        network=network != "none",
        google=False,
        vscode=bool(manifest.get("vscode")),
        gnome=False,
        apps=frozenset(manifest.get("apps") or ()),
        path=None,
        gsettings=profile in (manifest.get("gsettings_profiles") or ()),
        programs=frozenset(manifest.get("programs") or ()),
        source=f"image {image} ({manifest.get('app_set', '?')} apps, its manifest), "
        f"profile {profile}, network {network}",
    )


_cache: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()


class ManifestError(MissingDependencyError):
    """The image is absent, or it has no (current) manifest: the message says how to build it."""


def read_manifest(image: str, client: Any = None) -> dict[str, Any]:
    """The manifest of the local Docker image ``image``, read without starting it (cached per
    image id).

    Raises:
        ManifestError: the image is not here, or was built without a manifest (before this
            version) or with another schema.
        MissingDependencyError: no docker SDK or no reachable daemon.
    """
    import docker
    import docker.errors

    if client is None:
        from osworld_gym.image.build import docker_client

        client = docker_client()
    try:
        image_id = client.images.get(image).id
    except docker.errors.ImageNotFound:
        raise ManifestError(
            f"docker image {image} is not here: build it with `{build_command(image)}`"
        ) from None
    with _lock:
        if image_id in _cache:
            return _cache[image_id]
    container = client.containers.create(image, entrypoint=["/bin/true"], network_mode="none")
    try:
        try:
            stream, _ = container.get_archive(MANIFEST_PATH)
        except docker.errors.NotFound:
            raise ManifestError(
                f"docker image {image} has no {MANIFEST_PATH} (built before osworld-gym wrote "
                f"one, or not by `osworld-gym image build`): rebuild it with "
                f"`{build_command(image)}`"
            ) from None
        data = b"".join(stream)
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile(tar.getmembers()[0])
        assert member is not None
        manifest = json.loads(member.read())
    if manifest.get("schema") != SCHEMA:
        raise ManifestError(
            f"docker image {image} has a manifest of schema {manifest.get('schema')}, this "
            f"osworld-gym reads schema {SCHEMA}: rebuild it with `{build_command(image)}`"
        )
    with _lock:
        _cache[image_id] = manifest
    return manifest


def image_capabilities(
    image: str, *, profile: str, network: str = "none", client: Any = None
) -> Capabilities:
    """What containers of our image ``image`` offer tasks (see :func:`manifest_capabilities`)."""
    return manifest_capabilities(
        read_manifest(image, client), profile=profile, network=network, image=image
    )


def build_command(image: str) -> str:
    """The command that builds our image ``image`` (its app set from a default-style tag)."""
    from osworld_gym.image.recipe import APPS, default_tag

    for apps in APPS:
        if image == default_tag(apps):
            return f"osworld-gym image build --apps {apps}"
    apps = next((a for a in APPS if image.endswith(f"-{a}")), "full")
    return f"osworld-gym image build --apps {apps} --tag {image}"


def main(argv: list[str] | None = None) -> int:
    """``python -m osworld_gym.providers.manifest [OUT]``: write this system's manifest."""
    argv = sys.argv[1:] if argv is None else argv
    text = json.dumps(probe(), indent=1) + "\n"
    if argv:
        Path(argv[0]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[0]).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
