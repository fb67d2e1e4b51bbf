"""``arpo-train --dry_run``: the resolved plan of a run, checked before any GPU or desktop starts.

A run at the paper's scale costs hours of 8 GPUs and 128 desktops before its first log line; a
typo in a task path or a batch that does not split into groups should cost seconds. The plan is
everything :mod:`arpo_trainer.cli` would build, resolved and printed: processes and the batch
arithmetic (groups per process, optimizer steps per rollout batch), the GPU memory estimate
(:mod:`arpo_trainer.memory`), the desktops (provider, how many, whether this machine can start
them), and the tasks (how many load, how many are unsupported on the provider and why). Every
problem found is listed; none stops the listing, so one dry run shows them all.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from arpo_trainer.memory import (
    MemorySettings,
    ModelShape,
    estimate_memory,
    estimate_throughput,
    host_memory,
    model_shape,
    tokens_per_image,
    trajectory_tokens,
)

log = logging.getLogger(__name__)


@dataclass
class LaunchSettings:
    """What ``accelerate launch`` will run with (from its config file, else one process)."""

    num_processes: int = 1
    zero_stage: int = 0
    source: str = "default: one process"
    #: the launch runs under DeepSpeed (``distributed_type: DEEPSPEED``)
    deepspeed: bool = False


def launch_settings(
    accelerate_config: str | None, num_processes: int | None = None
) -> LaunchSettings:
    """Processes and ZeRO stage from an accelerate config file; ``num_processes`` overrides.

    Raises:
        FileNotFoundError: the accelerate config does not exist.
    """
    out = LaunchSettings()
    if accelerate_config:
        path = Path(accelerate_config)
        if not path.is_file():
            raise FileNotFoundError(f"accelerate config {path} does not exist")
        cfg = yaml.safe_load(path.read_text()) or {}
        out.num_processes = int(cfg.get("num_processes", 1))
        ds = cfg.get("deepspeed_config") or {}
        out.deepspeed = cfg.get("distributed_type") == "DEEPSPEED"
        out.zero_stage = int(ds.get("zero_stage", 0)) if out.deepspeed else 0
        out.source = str(path)
    elif os.environ.get("WORLD_SIZE"):
        out.num_processes, out.source = int(os.environ["WORLD_SIZE"]), "WORLD_SIZE"
    if num_processes:
        out.num_processes, out.source = num_processes, "--num_processes"
    return out


@dataclass
class TaskReport:
    """Tasks of a run: those that load on the provider and the reasons the others do not."""

    supported: list[str] = field(default_factory=list)
    unsupported: Counter[str] = field(default_factory=Counter)


def task_report(spec: str, task_ids: list[str] | None, capabilities: Any) -> TaskReport:
    """Load ``spec`` as training would, classified for the desktops' ``capabilities``
    (unsupported tasks left out), and count why tasks were left out (the loader reports each in
    ``TaskSet.unsupported``)."""
    from arpo_trainer.tasks import resolve_tasks

    tasks = resolve_tasks(spec, task_ids, provider=capabilities)
    reasons = getattr(tasks, "unsupported", {}) or {}
    return TaskReport(
        supported=[t.id for t in tasks],
        unsupported=Counter(re.sub(r"\bstep \d+", "step N", r)[:120] for r in reasons.values()),
    )


def remote_problems(env_kwargs: dict[str, Any]) -> list[str]:
    """Provider ``remote`` without a ``desktops`` section needs its guest's URL."""
    if (
        env_kwargs.get("url")
        or env_kwargs.get("urls")
        or ((env_kwargs.get("provider_kwargs") or {}).get("url"))
    ):
        return []
    return [
        "provider 'remote' needs env_kwargs url (or urls): the guest server address; "
        "for several guests give a desktops section: {source: remote, urls: [...]}"
    ]


def tiny_shape(margs: Any) -> ModelShape:
    h, n = margs.tiny_hidden_size, margs.tiny_layers
    return ModelShape(float(n * 12 * h * h + 2 * 1024 * h), h, n, 4 * h, 1024, 32, 2)


def build_plan(
    args: Any,
    margs: Any,
    launch: LaunchSettings,
    *,
    gpu_memory_gb: float = 80.0,
) -> tuple[list[str], list[str]]:
    """``(lines, problems)`` of the resolved plan (see the module docstring)."""
    lines: list[str] = []
    problems: list[str] = []
    n = launch.num_processes
    G = args.num_generations
    per_process = args.per_device_train_batch_size * args.steps_per_generation
    groups = per_process * n // G
    opt_steps = args.steps_per_generation * args.num_iterations / args.gradient_accumulation_steps
    lines += [
        "== processes",
        f"  {n} process(es) ({launch.source}), ZeRO stage {launch.zero_stage or '-'}",
        f"  per process: {per_process} rollouts = {per_process // G} task(s) x G={G} "
        f"(per_device_train_batch_size {args.per_device_train_batch_size} x "
        f"steps_per_generation {args.steps_per_generation})",
        f"  rollout batch: {groups} tasks, {per_process * n} trajectories; "
        f"{opt_steps:g} optimizer step(s) per rollout batch "
        f"(gradient_accumulation_steps {args.gradient_accumulation_steps})",
    ]
    if opt_steps <= 1 and args.num_iterations == 1:
        lines.append(
            "  note: one optimizer step per rollout batch: the PPO ratio is identically "
            "1 and the clip "
            "never acts (ARPO's code takes 2: steps_per_generation = 2 x "
            "gradient_accumulation_steps)"
        )

    # memory
    if margs.model_name_or_path == "tiny":
        shape: ModelShape | None = tiny_shape(margs)
    else:
        shape = model_shape(margs.model_name_or_path)
    max_pixels = args.image_max_pixels
    if max_pixels is None and margs.model_name_or_path == "tiny":
        max_pixels = margs.tiny_max_pixels
    per_image = tokens_per_image(args.screen_width, args.screen_height, max_pixels)
    tokens, visual = trajectory_tokens(
        max_history_images=args.max_history_images,
        max_turns=args.max_turns,
        tokens_per_image=per_image,
    )
    lines += [
        "== memory per GPU (estimate, arpo_trainer.memory)",
        f"  trajectory: {tokens} tokens ({per_image} per screenshot x "
        f"{min(args.max_history_images, args.max_turns)} kept, {visual} visual)",
    ]
    if shape is None:
        problems.append(
            f"unknown model shape for {margs.model_name_or_path!r}: give a local "
            "checkpoint directory "
            "(with config.json) or a model listed in arpo_trainer.memory.KNOWN_SHAPES"
        )
    else:
        est = estimate_memory(
            shape,
            MemorySettings(
                num_gpus=n,
                gpu_gb=gpu_memory_gb,
                zero_stage=launch.zero_stage,
                lora=bool(margs.use_lora),
                micro_batch=args.per_device_train_batch_size,
                tokens=tokens,
                image_tokens=visual,
                prompt_tokens=1500 + per_image,
                activation_bytes=2 if (args.bf16 or args.fp16) else 4,
                gradient_checkpointing=bool(args.gradient_checkpointing),
                vllm_colocate=bool(args.use_vllm) and args.vllm_mode == "colocate",
                vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
                vllm_sleep_mode=bool(args.vllm_enable_sleep_mode),
            ),
        )
        lines.append(f"  model: {shape.params / 1e9:.2f}e9 parameters, LoRA {bool(margs.use_lora)}")
        lines += [f"  {name:<46} {gb:7.1f} GB" for name, gb in est.rows()]
        kept = min(args.max_history_images, args.max_turns)
        host = host_memory(
            rollouts_per_process=per_process,
            screenshots=kept,
            patches_per_screenshot=4 * per_image,
            tokens=tokens,
            feature_cache_mb=args.feature_cache_mb,
        )
        speed = estimate_throughput(
            shape,
            tokens=tokens,
            image_tokens=visual,
            screenshots=kept,
            gradient_checkpointing=bool(args.gradient_checkpointing),
        )
        lines += [
            f"  host memory per process: {host}",
            f"  speed (H100 at 40% of its bf16 peak, 60% of its bandwidth; scripts/gpu-check.sh "
            f"measures): update {speed.update_tokens_per_s:,.0f} tokens/s "
            f"({tokens / speed.update_tokens_per_s:.1f} s per trajectory), decoding "
            f"{speed.decode_tokens_per_s:.0f} tokens/s per sequence",
        ]
        if not est.fits:
            problems.append(
                f"estimated peak {max(est.training, est.rollout):.0f} GB exceeds "
                f"{gpu_memory_gb:g} GB "
                "per GPU: see the breakdown above (sleep mode, gradient checkpointing, "
                "micro-batch 1, "
                "more processes, fewer kept screenshots)"
            )

    # packages and model
    from arpo_trainer.desktops import check_source_count, describe_source
    from arpo_trainer.preflight import desktop_preflight, model_problems, package_problems

    report_to = args.report_to if isinstance(args.report_to, list) else [args.report_to]
    problems += package_problems(
        use_vllm=bool(args.use_vllm),
        deepspeed=launch.deepspeed or bool(args.deepspeed),
        attn_implementation=margs.attn_implementation,
        report_to=[str(r) for r in report_to if r],
    )
    problems += model_problems(margs.model_name_or_path)

    # desktops
    source = args.desktop_source
    desktops = args.desktops_per_process  # async_desktops, or one per rollout
    lines += [
        "== desktops",
        f"  provider {args.provider!r}: {desktops} per process, {desktops * n} in all, "
        f"{args.screen_width}x{args.screen_height}, {args.max_turns} turns per episode",
    ]
    if args.desktops:
        lines += describe_source(source, desktops, n)
        problems += check_source_count(source, desktops, n)
    if source.source == "remote" and not source.remotes:
        problems += remote_problems(dict(args.env_kwargs or {}))
    more, found, caps = desktop_preflight(args, desktops * n)
    lines += more
    problems += found

    # tasks
    lines.append("== tasks")
    if caps is None:
        lines.append("  not counted: what the desktops offer could not be read (see the problems)")
    else:
        try:
            report = task_report(args.tasks, args.task_ids, caps)
        except Exception as e:  # noqa: BLE001 - every loader failure is reported, with its message
            problems.append(f"tasks {args.tasks!r} could not be loaded: {e}")
        else:
            skipped = sum(report.unsupported.values())
            lines.append(
                f"  {args.tasks}: {len(report.supported)} supported on these desktops, "
                f"{skipped} unsupported"
            )
            lines += [
                f"    {count:4d} x {reason}" for reason, count in report.unsupported.most_common(12)
            ]
            if len(report.supported) < groups:
                problems.append(
                    f"{len(report.supported)} tasks but a rollout batch needs {groups} groups: "
                    "add tasks or lower per_device_train_batch_size"
                )
    if args.prompt_template_file:
        lines.append(f"  prompt: {args.prompt_template_file}")
    return lines, problems
