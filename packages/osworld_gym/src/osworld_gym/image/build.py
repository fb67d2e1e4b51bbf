"""``osworld-gym image build``: our desktop image, built without Docker Hub or a PyPI in Docker.

1. **Base** (once, cached): ``debootstrap --variant=minbase bookworm`` from a Debian mirror into
   a tarball under the cache dir, then ``docker import`` as :data:`~.recipe.BASE_TAG`. With
   ``base="debian:bookworm-slim"`` (or any Debian bookworm image) this step is skipped.
2. **Wheels** (on the host, which has the package index): osworld-gym's wheel built from this
   source tree (``uv build``), and its dependencies downloaded with pip for the image's Python
   and CPU (cached per requirement set). Nothing inside ``docker build`` needs PyPI, so hosts
   whose HTTPS goes through an intercepting proxy build the same image.
3. **docker build** of :func:`~.recipe.render_dockerfile` with the docker SDK. The image is
   labelled with a digest of every input; when an image with the tag and digest exists the
   build is skipped (``reused``), and otherwise Docker's layer cache keeps a rebuild after a
   code change to the last layers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osworld_gym.errors import InfraError, MissingDependencyError
from osworld_gym.image.recipe import (
    APPS,
    BASE_TAG,
    LABEL_IMAGE,
    LABEL_INPUTS,
    default_tag,
    entrypoint_script,
    render_dockerfile,
)

log = logging.getLogger(__name__)

Progress = Callable[[str], None]

#: Debian mirror for debootstrap (plain HTTP: apt checks signatures itself).
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Proxy settings passed to ``docker build`` when set (Docker predefines these build args).
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


class ImageBuildError(InfraError):
    """A step of the image build failed; the message carries the step's output."""


def default_cache_dir() -> Path:
    """``$OSWORLD_GYM_CACHE/image`` or ``~/.cache/osworld-gym/image``: base tarballs, wheels."""
    root = os.environ.get("OSWORLD_GYM_CACHE") or Path.home() / ".cache" / "osworld-gym"
    return Path(root) / "image"


@dataclass
class BuildOptions:
    """How to build the desktop image (the flags of ``osworld-gym image build``)."""

    #: App set from :data:`~.APPS`: ``minimal`` (xterm, mousepad) or ``full``.
    apps: str = "minimal"
    #: Image tag; default :func:`~.default_tag` of ``apps``.
    tag: str | None = None
    #: Base image; ``None`` builds and imports our debootstrap rootfs (no registry needed).
    base: str | None = None
    #: Debian mirror for debootstrap.
    mirror: str = DEFAULT_MIRROR
    #: Debian suite of the debootstrap base.
    suite: str = "bookworm"
    #: osworld-gym wheel to install; ``None`` builds one from this source tree with ``uv``.
    wheel: Path | None = None
    #: ``python3`` version of the base image (Debian bookworm: 3.11), for the dependency wheels.
    python_version: str = "3.11"
    #: Where base tarballs and downloaded wheels are cached.
    cache_dir: Path = field(default_factory=default_cache_dir)
    #: Rebuild every layer, ignoring Docker's cache and an existing image with the same inputs.
    no_cache: bool = False
    #: Network of the build containers (``apt-get`` needs the Debian mirror).
    network_mode: str = "host"

    @property
    def image_tag(self) -> str:
        return self.tag or default_tag(self.apps)


@dataclass
class BuildResult:
    tag: str
    image_id: str
    #: True when an image with the same inputs already existed and nothing was built.
    reused: bool
    #: Seconds per step: ``debootstrap``, ``import``, ``wheel``, ``dependencies``, ``docker_build``,
    #: ``total`` (steps that did not run are absent).
    timings: dict[str, float]


# ---- docker -----------------------------------------------------------------------------------
def docker_client(timeout: float = 120.0) -> Any:
    """A docker SDK client for the local daemon, or an error that says what to install/start."""
    try:
        import docker
    except ImportError:
        raise MissingDependencyError(
            "the docker provider needs the docker SDK: pip install 'osworld-gym[docker]'"
        ) from None
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except Exception as e:  # noqa: BLE001 - DockerException, connection errors, permission
        raise MissingDependencyError(
            f"cannot reach the Docker daemon ({e}). Install it (Debian: apt-get install "
            "docker.io), "
            "start it (systemctl start docker, or run dockerd as root) and make sure this user "
            "may use /var/run/docker.sock (the docker group), or set DOCKER_HOST"
        ) from None
    return client


def _run(cmd: list[str], what: str, timeout: float, **kw: Any) -> subprocess.CompletedProcess:
    log.info("%s: %s", what, " ".join(cmd))
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw
        )
    except FileNotFoundError:
        raise MissingDependencyError(f"{what} needs {cmd[0]!r}, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise ImageBuildError(f"{what} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr)[-3000:]
        raise ImageBuildError(f"{what} failed (exit {proc.returncode}):\n{out}")
    return proc


# ---- 1. base -----------------------------------------------------------------------------------
def debootstrap_tarball(opts: BuildOptions, progress: Progress = log.info) -> tuple[Path, float]:
    """The cached minbase rootfs tarball of ``opts.suite``; ``(path, seconds spent)``."""
    tarball = opts.cache_dir / f"{opts.suite}-minbase.tar"
    if tarball.exists():
        return tarball, 0.0
    if os.geteuid() != 0:
        raise ImageBuildError(
            "debootstrap needs root: run `sudo osworld-gym image build` once "
            "(the base is cached), or pass --base debian:bookworm-slim"
        )
    if shutil.which("debootstrap") is None:
        raise MissingDependencyError(
            "building the base image needs debootstrap "
            "(apt-get install debootstrap), or pass --base IMAGE"
        )
    t0 = time.monotonic()
    opts.cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=opts.cache_dir))
    try:
        root = work / "root"
        progress(f"debootstrap --variant=minbase {opts.suite} from {opts.mirror}")
        _run(
            ["debootstrap", "--variant=minbase", opts.suite, str(root), opts.mirror],
            "debootstrap",
            timeout=1800,
        )
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (root / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        partial = work / "rootfs.tar"
        _run(
            ["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."],
            "tar",
            timeout=600,
        )
        partial.replace(tarball)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - t0
    progress(f"base rootfs cached at {tarball} ({seconds:.0f} s)")
    return tarball, seconds


def ensure_base_image(
    client: Any, opts: BuildOptions, progress: Progress = log.info
) -> tuple[str, dict[str, float]]:
    """The base image to build FROM, importing our debootstrap rootfs if needed."""
    import docker.errors

    if opts.base:
        return opts.base, {}
    try:
        client.images.get(BASE_TAG)
        return BASE_TAG, {}
    except docker.errors.ImageNotFound:
        pass
    tarball, seconds = debootstrap_tarball(opts, progress)
    timings = {"debootstrap": seconds} if seconds else {}
    t0 = time.monotonic()
    repo, tag = BASE_TAG.rsplit(":", 1)
    progress(f"docker import {tarball} {BASE_TAG}")
    client.api.import_image_from_file(str(tarball), repository=repo, tag=tag)
    timings["import"] = time.monotonic() - t0
    return BASE_TAG, timings


# ---- 2. wheels ---------------------------------------------------------------------------------
def source_tree() -> Path | None:
    """The uv workspace this package was imported from, or None for an installed wheel."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "packages" / "osworld_gym" / "pyproject.toml").is_file() and (
            parent / "pyproject.toml"
        ).is_file():
            return parent
    return None


def build_wheel(out_dir: Path) -> Path:
    """Build osworld-gym's wheel from the source tree into ``out_dir``."""
    root = source_tree()
    if root is None:
        raise ImageBuildError(
            "osworld-gym is not running from its source tree: pass --wheel "
            "PATH with an osworld-gym wheel"
        )
    if shutil.which("uv") is None:
        raise MissingDependencyError(
            "building osworld-gym's wheel needs uv (pip install uv), or pass --wheel PATH"
        )
    _run(
        ["uv", "build", "--package", "osworld-gym", "--wheel", "--out-dir", str(out_dir)],
        "uv build",
        timeout=600,
        cwd=root,
    )
    wheels = sorted(out_dir.glob("osworld_gym-*.whl"))
    if not wheels:
        raise ImageBuildError(f"uv build produced no osworld_gym wheel in {out_dir}")
    return wheels[-1]


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines that no extra guards (what the guest needs)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    reqs = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = line.split(":", 1)[1].strip()
            if "extra ==" not in req.replace("extra==", "extra =="):
                reqs.append(req)
    return reqs


def _pip() -> list[str]:
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    if shutil.which("uv"):
        return ["uv", "tool", "run", "--from", "pip", "pip"]
    if shutil.which("pip3"):
        return ["pip3"]
    raise MissingDependencyError("downloading the image's Python wheels needs pip or uv")


def download_dependencies(
    requirements: list[str], opts: BuildOptions, machine: str
) -> tuple[Path, float]:
    """Dependency wheels for the image's Python and CPU, with a ``requirements.txt``; cached
    per (requirements, Python, CPU)."""
    text = "\n".join(requirements) + "\n"
    key = hashlib.sha256(f"{text}{opts.python_version}{machine}".encode()).hexdigest()[:16]
    dest = opts.cache_dir / "wheels" / key
    if (dest / ".complete").exists():
        return dest, 0.0
    t0 = time.monotonic()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    (dest / "requirements.txt").write_text(text)
    pv = opts.python_version
    cmd = [
        *_pip(),
        "download",
        "--dest",
        str(dest),
        "--only-binary=:all:",
        "--find-links",
        str(dest),
        "--python-version",
        pv,
        "--implementation",
        "cp",
        "--abi",
        f"cp{pv.replace('.', '')}",
        "-r",
        str(dest / "requirements.txt"),
    ]
    for tag in (
        "manylinux_2_36",
        "manylinux_2_34",
        "manylinux_2_28",
        "manylinux_2_17",
        "manylinux2014",
        "manylinux_2_5",
        "linux",
    ):
        cmd += ["--platform", f"{tag}_{machine}"]
    built: set[str] = set()
    while True:
        try:
            _run(cmd, "pip download", timeout=1800)
            break
        except ImageBuildError as e:
            # a dependency published only as a source archive (odfpy): build its wheel here
            # (pure Python ones give py3-none-any wheels, valid in the image) and try again
            missing = re.search(r"No matching distribution found for ([A-Za-z0-9._-]+)", str(e))
            if missing is None or missing.group(1) in built:
                raise
            name = missing.group(1)
            built.add(name)
            spec = next(
                (r for r in requirements if re.match(rf"{re.escape(name)}\b", r, re.I)), name
            )
            _run(
                [*_pip(), "wheel", "--no-deps", "--wheel-dir", str(dest), spec],
                f"pip wheel {name}",
                timeout=600,
            )
            if not any(
                w.name.endswith("-none-any.whl")
                for w in dest.glob("*.whl")
                if w.name.lower().startswith(name.lower().replace("-", "_"))
            ):
                raise ImageBuildError(
                    f"{name} has no wheel for the image's platform and its "
                    "source builds a platform-specific one"
                ) from e
    (dest / ".complete").touch()
    return dest, time.monotonic() - t0


# ---- 3. docker build ---------------------------------------------------------------------------
def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()


def build_image(
    opts: BuildOptions | None = None, progress: Progress = log.info, client: Any = None
) -> BuildResult:
    """Build (or reuse) the desktop image described by ``opts``.

    Raises:
        MissingDependencyError: Docker, debootstrap, uv or pip is missing.
        ImageBuildError: a step failed; the message has its output.
    """
    import docker.errors

    opts = opts or BuildOptions()
    if opts.apps not in APPS:
        raise ValueError(f"unknown app set {opts.apps!r}; choose one of {sorted(APPS)}")
    t_start = time.monotonic()
    client = client or docker_client(timeout=1800)
    tag = opts.image_tag
    base, timings = ensure_base_image(client, opts, progress)
    arch = client.info().get("Architecture") or platform.machine()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)

    with tempfile.TemporaryDirectory(prefix="osworld-gym-image-") as tmp:
        ctx = Path(tmp)
        (ctx / "wheels").mkdir()
        t0 = time.monotonic()
        if opts.wheel is not None:
            wheel = ctx / "wheels" / Path(opts.wheel).name
            shutil.copy2(opts.wheel, wheel)
        else:
            progress("building osworld-gym's wheel (uv build)")
            wheel = build_wheel(ctx / "wheels")
        timings["wheel"] = time.monotonic() - t0
        deps, seconds = download_dependencies(wheel_requirements(wheel), opts, machine)
        if seconds:
            timings["dependencies"] = seconds
        shutil.copytree(deps, ctx / "wheels" / "deps", ignore=shutil.ignore_patterns(".complete"))
        from osworld_gym.guest import task_python

        task_deps, seconds = download_dependencies(task_python.requirements(), opts, machine)
        if seconds:
            timings["task_python"] = seconds
        shutil.copytree(
            task_deps, ctx / "wheels" / "task", ignore=shutil.ignore_patterns(".complete")
        )
        dockerfile = render_dockerfile(opts.apps)
        (ctx / "Dockerfile").write_text(dockerfile)
        (ctx / "entrypoint.sh").write_text(entrypoint_script())

        try:
            base_id = client.images.get(base).id
        except docker.errors.ImageNotFound:
            base_id = base  # pulled by the build
        digest = _digest(
            [
                dockerfile.encode(),
                entrypoint_script().encode(),
                wheel.read_bytes(),
                base_id.encode(),
                "\n".join(sorted(p.name for p in deps.glob("*.whl"))).encode(),
                "\n".join(sorted(p.name for p in task_deps.glob("*.whl"))).encode(),
            ]
        )
        try:
            existing = client.images.get(tag)
        except docker.errors.ImageNotFound:
            existing = None
        if (
            existing is not None
            and not opts.no_cache
            and existing.labels.get(LABEL_INPUTS) == digest
        ):
            timings["total"] = time.monotonic() - t_start
            progress(f"{tag} is up to date ({existing.short_id})")
            return BuildResult(tag, existing.id, True, timings)

        progress(f"docker build {tag} FROM {base} (apps: {opts.apps})")
        t0 = time.monotonic()
        image_id = _docker_build(client, ctx, tag, base, digest, opts, progress)
        timings["docker_build"] = time.monotonic() - t0
    if existing is not None and existing.id != image_id:
        _remove_replaced(client, existing)
    timings["total"] = time.monotonic() - t_start
    progress(f"built {tag} in {timings['total']:.0f} s")
    return BuildResult(tag, image_id, False, timings)


def _remove_replaced(client: Any, image: Any) -> None:
    """Remove the image a rebuild took the tag from (it would linger as <none>), unless a
    container still uses it or it is not ours."""
    import docker.errors

    if image.labels.get(LABEL_IMAGE) != "desktop":
        return
    try:
        client.images.remove(image.id)
    except docker.errors.APIError as e:  # 409: a container still runs it
        log.info("kept the replaced image %s: %s", image.short_id, e)


def _docker_build(
    client: Any, ctx: Path, tag: str, base: str, digest: str, opts: BuildOptions, progress: Progress
) -> str:
    buildargs = {"BASE": base, **{k: os.environ[k] for k in PROXY_VARS if os.environ.get(k)}}
    tail: list[str] = []
    image_id = None
    stream = client.api.build(
        path=str(ctx),
        tag=tag,
        buildargs=buildargs,
        rm=True,
        forcerm=True,
        nocache=opts.no_cache,
        decode=True,
        network_mode=opts.network_mode,
        labels={LABEL_INPUTS: digest},
    )
    for chunk in stream:
        if "error" in chunk:
            raise ImageBuildError(
                f"docker build of {tag} failed: {chunk['error'].strip()}\n" + "".join(tail[-40:])
            )
        line = chunk.get("stream") or ""
        if line:
            tail.append(line)
            del tail[:-200]
            if line.startswith("Step "):
                progress(line.strip())
            else:
                log.debug("%s", line.rstrip())
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = aux["ID"]
    if image_id is None:
        image_id = client.images.get(tag).id
    return image_id
