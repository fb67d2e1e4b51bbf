"""``arpo-train --dry_run`` on CPU: the paper recipe's plan, its memory arithmetic, and early
failures."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from arpo_trainer.config import ARPOConfig
from arpo_trainer.memory import KNOWN_SHAPES, MemorySettings, estimate_memory, tokens_per_image
from repo_paths import ROOT

CONFIGS = ROOT / "packages" / "arpo_trainer" / "configs"
RECIPE = CONFIGS / "arpo_uitars_osworld.yaml"
ZERO3 = CONFIGS / "accelerate_zero3_8gpu.yaml"


def arpo_train(*flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "arpo_trainer.cli", *flags],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip


def gb(out: str, label: str) -> float:
    return float(re.search(rf"{re.escape(label)}\s+([\d.]+) GB", out).group(1))


def test_the_recipe_plans_8_processes_two_optimizer_steps_and_fits_80_gb():
    proc = arpo_train("--config", str(RECIPE), "--accelerate_config", str(ZERO3), "--dry_run")
    out = proc.stdout
    assert "8 process(es)" in out and "ZeRO stage 3" in out
    assert "16 tasks, 128 trajectories; 2 optimizer step(s) per rollout batch" in out
    assert "2691 per screenshot x 15 kept" in out
    assert gb(out, "= training peak") < 80 and gb(out, "= rollout peak") < 80
    assert "128 in all" in out
    assert "source 'ray': 16 actor(s) per process on auto, each running provider 'docker'" in out


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


def test_the_recipe_dry_run_names_each_missing_package_and_the_command_that_installs_it():
    """In the default environment (no `recipe` extra) the recipe cannot start: the dry run says
    so before a model or desktop starts, once per package, each with the one install command."""
    env = {"WANDB_API_KEY": "", "WANDB_MODE": "", "HOME": "/nonexistent"}
    proc = arpo_train(
        "--config", str(RECIPE), "--accelerate_config", str(ZERO3), "--dry_run", env=env
    )
    assert proc.returncode == 2
    problems = proc.stderr[proc.stderr.index("problem(s)") :]
    install = "run `uv sync --extra recipe` (or `pip install 'arpo-trainer[recipe]'`)"
    expected = {
        "vllm": "vLLM is not installed (use_vllm: true)",
        "deepspeed": "DeepSpeed is not installed (the accelerate config uses it)",
        "flash_attn": "flash-attn is not installed (attn_implementation: flash_attention_2)",
        "wandb": "report_to 'wandb' needs wandb, which is not installed",
    }
    for module, what in expected.items():
        if _missing(module):
            assert f"  - {what}: {install}" in problems, problems
    if not _missing("wandb"):
        assert "wandb has no API key here (report_to wandb): run `wandb login`" in problems
    # the model: not a local path, and nothing of it in the Hugging Face cache (read offline)
    assert "model ByteDance-Seed/UI-TARS-1.5-7B is not in the Hugging Face cache" in problems
    assert "`hf download ByteDance-Seed/UI-TARS-1.5-7B`" in problems
    # the desktops: the recipe's Ray cluster of desktop nodes is not up here
    assert "no Ray cluster at auto" in problems and "ray start --head --resources=" in problems
    assert "not counted: what the desktops offer could not be read" in proc.stdout


def test_the_vllm_range_is_trls():
    from arpo_trainer.preflight import VLLM_RANGE

    source = Path(importlib.util.find_spec("trl.import_utils").origin).read_text()
    low, high = VLLM_RANGE
    assert f'Version("{low}") <= _vllm_base_version <= Version("{high}")' in source


def test_the_model_is_found_in_a_local_directory_or_the_hub_cache_with_its_weights(
    tmp_path, monkeypatch
):
    from arpo_trainer.preflight import model_problems

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    assert "has no config.json" in model_problems(str(ckpt))[0]
    (ckpt / "config.json").write_text("{}")
    assert "no weights" in model_problems(str(ckpt))[0]
    (ckpt / "model.safetensors").write_bytes(b"")
    assert model_problems(str(ckpt)) == []
    assert "does not exist" in model_problems(str(tmp_path / "nowhere"))[0]
    # the hub cache, laid out as huggingface_hub writes it (read offline)
    hub = tmp_path / "hub"
    snap = hub / "models--org--vlm" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (hub / "models--org--vlm" / "refs").mkdir()
    (hub / "models--org--vlm" / "refs" / "main").write_text("abc123")
    (snap / "config.json").write_text("{}")
    (snap / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                   "b": "model-00002-of-00002.safetensors"}})
    )  # fmt: skip
    (snap / "model-00001-of-00002.safetensors").write_bytes(b"")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))
    assert "1 of 2 weight shards missing" in model_problems("org/vlm")[0]
    (snap / "model-00002-of-00002.safetensors").write_bytes(b"")
    assert model_problems("org/vlm") == []
    assert "not in the Hugging Face cache" in model_problems("org/other")[0]


def test_the_demo_config_plans_cleanly_on_local_desktops():
    # the demo trains the checked-in base, models/curriculum-base (the plan resolves it from the
    # repository root)
    proc = arpo_train("--config", str(CONFIGS / "demo.yaml"), "--dry_run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "provider 'local': 8 per process" in proc.stdout
    assert "pixels:train:click:32: 32 supported on these desktops, 0 unsupported" in proc.stdout
    assert "== no problem found" in proc.stdout


def test_the_plan_counts_the_async_loops_own_desktops(tmp_path):
    proc = arpo_train(
        "--dry_run", "--provider", "fake", "--model_name_or_path", "tiny",
        "--output_dir", str(tmp_path), "--per_device_train_batch_size", "4",
        "--num_generations", "4", "--rollout_mode", "async", "--async_desktops", "6",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "provider 'fake': 6 per process, 6 in all" in proc.stdout


def test_missing_things_fail_early_with_what_to_do(tmp_path):
    proc = arpo_train(
        "--config", str(RECIPE), "--dry_run", "--tasks", str(tmp_path / "nowhere.json"),
        "--model_name_or_path", "someone/unknown-model", "--provider", "remote", "--desktops", "",
        "--per_device_train_batch_size", "8", "--steps_per_generation", "1",
        "--gradient_accumulation_steps", "1",
    )  # fmt: skip
    assert proc.returncode == 2
    err = proc.stderr
    assert "nowhere.json" in err and "could not be loaded" in err
    assert "unknown model shape for 'someone/unknown-model'" in err
    assert "provider 'remote' needs env_kwargs url" in err
    assert "one optimizer step per rollout batch" in proc.stdout
    missing = arpo_train("--config", str(RECIPE), "--dry_run", "--accelerate_config", "nope.yaml")
    assert (
        missing.returncode == 2 and "accelerate config nope.yaml does not exist" in missing.stderr
    )


def test_sleep_mode_is_what_makes_the_recipe_fit():
    shape = KNOWN_SHAPES["qwen2.5-vl-7b"]
    asleep = estimate_memory(shape, MemorySettings())
    awake = estimate_memory(shape, MemorySettings(vllm_sleep_mode=False))
    assert asleep.fits and not awake.fits
    assert awake.training - asleep.training == pytest.approx(0.6 * 80 - 1.0)
    no_ckpt = estimate_memory(shape, MemorySettings(gradient_checkpointing=False))
    assert no_ckpt.activations > 10 * asleep.activations and not no_ckpt.fits
    # ZeRO-3 divides the 16 B/param of a full fine-tune over the GPUs
    assert estimate_memory(shape, MemorySettings(num_gpus=4)).states == pytest.approx(
        2 * asleep.states
    )


def test_a_1080p_screenshot_is_2691_visual_tokens_at_arpos_pixel_budget():
    assert tokens_per_image(1920, 1080, 2116800) == 39 * 69


def test_prompt_template_file_sets_the_prompt_and_a_missing_file_is_a_clear_error(tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Own prompt.\n## Task\n{instruction}\n")
    common = dict(output_dir=str(tmp_path / "o"), use_cpu=True, bf16=False, report_to="none",
                  per_device_train_batch_size=2, num_generations=2)  # fmt: skip
    cfg = ARPOConfig(prompt_template_file=str(prompt), **common)
    assert cfg.prompt_template == prompt.read_text()
    with pytest.raises(FileNotFoundError, match="prompt_template_file .*absent.txt does not exist"):
        ARPOConfig(prompt_template_file=str(tmp_path / "absent.txt"), **common)
    with pytest.raises(ValueError, match="not both"):
        ARPOConfig(prompt_template_file=str(prompt), prompt_template="x {instruction}", **common)
