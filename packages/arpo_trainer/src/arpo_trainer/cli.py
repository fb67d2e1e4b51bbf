"""``arpo-train``: train with ARPO, or select the tasks worth training on.

Usage::

    arpo-train --config configs/demo.yaml [--key value ...]          # train
    arpo-train select-tasks --config configs/demo.yaml --k 16 --selection_output tasks.json
    accelerate launch --config_file configs/accelerate_zero3_8gpu.yaml -m arpo_trainer.cli \
        select-tasks --config configs/arpo_uitars_osworld.yaml --k 16   # as training runs
    arpo-train --config configs/arpo_uitars_osworld.yaml --dry_run \
        --accelerate_config configs/accelerate_zero3_8gpu.yaml   # print and check the plan

Every field of :class:`~arpo_trainer.config.ARPOConfig` (TRL's GRPOConfig + ARPO's),
:class:`~arpo_trainer.modeling.ModelArguments` and, for ``select-tasks``,
:class:`SelectArguments` is a ``--flag``; a YAML ``--config`` sets defaults (TRL's ``TrlParser``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if (
    TYPE_CHECKING
):  # heavy imports stay inside the commands (desktop subprocesses re-import this module)
    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.modeling import ModelArguments

log = logging.getLogger("arpo_trainer")


@dataclass
class SelectArguments:
    """Options of ``arpo-train select-tasks``."""

    k: int = field(
        default=16, metadata={"help": "Rollouts of the baseline policy per task (ARPO 16)."}
    )
    selection_output: str = field(
        default="selected_tasks.json",
        metadata={
            "help": "Where to write the selected task list (read back by --tasks); a Markdown "
            "success "
            "table and a JSON of per-task counts are written next to it."
        },
    )
    exclude_infeasible: bool = field(
        default=False, metadata={"help": "Drop infeasible tasks (evaluator 'infeasible')."}
    )
    uncertain_only: bool = field(
        default=False,
        metadata={"help": "Keep only tasks with 0 < success rate < 1 (drop always-solved ones)."},
    )
    # not `desktops`: that is the training config's desktop-source section
    selection_desktops: int | None = field(
        default=None,
        metadata={
            "help": "Desktops each process runs the baseline on (default: as training, "
            "per_device_train_batch_size x steps_per_generation)."
        },
    )


@dataclass
class RunArguments:
    """How ``arpo-train`` runs (not part of the training config)."""

    dry_run: bool = field(
        default=False,
        metadata={
            "help": "Print the resolved plan (processes, memory per GPU, desktops, tasks) and "
            "check it; "
            "start nothing. Exit status 2 when a problem is found."
        },
    )
    accelerate_config: str | None = field(
        default=None,
        metadata={
            "help": "The accelerate config the run is launched with (--dry_run reads its "
            "num_processes and ZeRO stage)."
        },
    )
    num_processes: int | None = field(
        default=None,
        metadata={"help": "Processes of the run, for --dry_run (overrides the above)."},
    )
    gpu_memory_gb: float = field(
        default=80.0, metadata={"help": "Memory of one GPU, for --dry_run's estimate."}
    )


def dry_run(args: ARPOConfig, margs: ModelArguments, rargs: RunArguments) -> int:
    """Print the resolved plan; 0 when no problem was found, 2 otherwise (see
    :mod:`arpo_trainer.plan`)."""
    from arpo_trainer.plan import build_plan, launch_settings

    try:
        launch = launch_settings(rargs.accelerate_config, rargs.num_processes)
    except FileNotFoundError as e:
        print(f"dry run: {e}", file=sys.stderr)
        return 2
    lines, problems = build_plan(args, margs, launch, gpu_memory_gb=rargs.gpu_memory_gb)
    print("\n".join(lines))
    if problems:
        print(f"== {len(problems)} problem(s)", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 2
    print("== no problem found")
    return 0


def build_policy(margs: ModelArguments, args: ARPOConfig, tasks: Any):
    """``(model, processor)``: a checkpoint, or the offline tiny VLM for
    ``model_name_or_path='tiny'``."""
    from arpo_trainer.modeling import load_model, load_processor

    if margs.model_name_or_path != "tiny":
        return (
            load_model(
                margs.model_name_or_path,
                dtype=margs.dtype,
                attn_implementation=margs.attn_implementation,
            ),
            load_processor(margs.model_name_or_path),
        )
    from osworld_gym.actions import make_action_set

    from arpo_trainer.demos import oracle_script
    from arpo_trainer.tiny import build_tiny_vlm

    corpus: list[str] = []
    if margs.tiny_corpus_from_tasks:
        aset = make_action_set(args.action_set, screen_size=args.screen_size)
        corpus.append(aset.describe())
        for task in tasks:
            corpus.append(task.instruction)
            try:
                corpus.extend(oracle_script(task, aset))
            except ValueError:
                pass
    vlm = build_tiny_vlm(
        seed=margs.seed_model,
        hidden_size=margs.tiny_hidden_size,
        num_layers=margs.tiny_layers,
        max_pixels=margs.tiny_max_pixels,
        vocab_size=1024,
        extra_corpus=tuple(corpus),
    )
    return vlm.model, vlm.processor


def _setup_logging(args: ARPOConfig) -> None:
    level = logging.INFO if args.should_log else logging.WARNING
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    for noisy in ("httpx", "urllib3", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def train(args: ARPOConfig, margs: ModelArguments) -> int:
    """Build the policy and trainer, warm-start the replay if asked, train, plot the curve."""
    from transformers.trainer_utils import get_last_checkpoint

    from arpo_trainer.modeling import lora_config
    from arpo_trainer.plotting import curve_text, plot_success
    from arpo_trainer.preflight import run_capabilities
    from arpo_trainer.tasks import resolve_tasks
    from arpo_trainer.trainer import ARPOTrainer

    _setup_logging(args)
    tasks = resolve_tasks(args.tasks, args.task_ids, provider=run_capabilities(args))
    model, processor = build_policy(margs, args, tasks)
    peft = None
    if margs.use_lora:
        peft = lora_config(
            model,
            r=margs.lora_r,
            alpha=margs.lora_alpha,
            dropout=margs.lora_dropout,
            target_modules=margs.lora_target_modules,
            include_vision=margs.lora_include_vision,
        )
    trainer = ARPOTrainer(model, args, processor, tasks=tasks, peft_config=peft)
    resume = args.resume_from_checkpoint
    if resume in ("last", "true", "True"):
        resume = get_last_checkpoint(args.output_dir)
        if resume is None:
            log.info("no checkpoint in %s to resume from; starting fresh", args.output_dir)
    t0 = time.monotonic()
    try:
        if args.replay_warm_start == "oracle" and resume is None:
            stored = trainer.warm_start_replay()
            print(
                f"replay warm start: {stored} oracle demonstrations stored "
                f"({', '.join(trainer.replay_buffer.task_ids()) or 'none'})",
                flush=True,
            )
        trainer.train(resume_from_checkpoint=resume)
    finally:
        trainer.close_desktops()
    minutes = (time.monotonic() - t0) / 60
    trainer.save_model(args.output_dir)
    if peft is not None and margs.save_merged and trainer.accelerator.is_main_process:
        merged_dir = args.run_dir / "merged"
        trainer.accelerator.unwrap_model(trainer.model).merge_and_unload().save_pretrained(
            merged_dir
        )
        processor.save_pretrained(merged_dir)
        print(f"merged model: {merged_dir}")
    history = trainer.state.log_history
    note = (
        "Replay warm-started from oracle demonstrations."
        if args.replay_warm_start == "oracle"
        else None
    )
    path = plot_success(
        history,
        args.run_dir / "success_curve.png",
        title=f"ARPO on {', '.join(t.id for t in tasks)[:80]}",
        note=note,
    )
    print(curve_text(history))
    print(f"trained {trainer.state.global_step} steps in {minutes:.1f} min; curve: {path}")
    if note:
        print(note)
    return 0


def select_tasks(args: ARPOConfig, margs: ModelArguments, sargs: SelectArguments) -> int:
    """Run the baseline policy k times per task; write the solved-at-least-once list and a table.

    It runs as training does: under ``accelerate launch`` every process plays its share of the
    attempts on its own desktops (the config's ``desktops`` section, ``per_device_train_batch_size
    x steps_per_generation`` per process unless ``selection_desktops`` says otherwise), sampling
    with the training generation backend (vLLM when ``use_vllm``): the trainer is built as for
    training (its processes, DeepSpeed, vLLM engine and weight sync) and only its rollout is used.
    """
    from accelerate import PartialState
    from accelerate.utils import set_seed

    from arpo_trainer.preflight import run_capabilities
    from arpo_trainer.selection import choose_tasks, evaluate_tasks, stats_records, success_table
    from arpo_trainer.tasks import resolve_tasks, task_dataset, write_task_list
    from arpo_trainer.trainer import ARPOTrainer

    _setup_logging(args)
    set_seed(args.seed)
    tasks = resolve_tasks(args.tasks, args.task_ids, provider=run_capabilities(args))
    model, processor = build_policy(margs, args, tasks)
    per_process = args.per_device_train_batch_size * args.generation_steps
    n = sargs.selection_desktops or per_process
    # the trainer wants one generation batch of rows (groups); selection never iterates them
    rows = task_dataset(tasks)
    need = per_process * PartialState().num_processes // args.group_size
    if len(rows) < need:
        rows = rows.select([i % len(rows) for i in range(need)])
    trainer = ARPOTrainer(model, args, processor, tasks=tasks, train_dataset=rows)
    t0 = time.monotonic()
    try:
        with trainer.policy() as policy:
            stats = evaluate_tasks(
                list(tasks),
                trainer.collector(n),
                policy,
                k=sargs.k,
                success_threshold=args.replay_success_threshold,
            )
    finally:
        trainer.close_desktops()
    if not trainer.accelerator.is_main_process:
        return 0
    selected = choose_tasks(
        stats, exclude_infeasible=sargs.exclude_infeasible, uncertain_only=sargs.uncertain_only
    )
    out = write_task_list(
        sargs.selection_output,
        args.tasks,
        selected,
        k=sargs.k,
        model=margs.model_name_or_path,
        exclude_infeasible=sargs.exclude_infeasible,
        uncertain_only=sargs.uncertain_only,
        processes=trainer.accelerator.num_processes,
        desktops_per_process=n,
        generation="vllm-" + args.vllm_mode if args.use_vllm else "transformers",
    )
    table = success_table(stats, selected)
    out.with_suffix(".md").write_text(table + "\n")
    out.with_name(out.stem + "_stats.json").write_text(
        json.dumps(stats_records(stats), indent=2) + "\n"
    )
    print(table)
    print(
        f"selected {len(selected)}/{len(stats)} tasks in "
        f"{(time.monotonic() - t0) / 60:.1f} min on {trainer.accelerator.num_processes} "
        f"process(es) x {n} desktops -> {out}"
    )
    return 0


def _has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


def _ended(code: int) -> int:
    """The exit code of a run that returned normally, once every rank has left the process group.
    (A rank that raised leaves without the barrier: the launcher stops the others.)"""
    from arpo_trainer.ranks import end_process_group

    end_process_group()
    return code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.scripts._hf_argparser import DataClassType
    from trl.scripts.utils import TrlParser

    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.modeling import ModelArguments

    if argv and argv[0] == "select-tasks":
        parser = TrlParser(
            [DataClassType(t) for t in (ARPOConfig, ModelArguments, SelectArguments)],
            prog="arpo-train select-tasks",
        )
        args, margs, sargs = parser.parse_args_and_config(argv[1:])
        return _ended(select_tasks(args, margs, sargs))
    parser = TrlParser(
        [DataClassType(t) for t in (ARPOConfig, ModelArguments, RunArguments)], prog="arpo-train"
    )
    if "--dry_run" in argv and not _has_accelerator():
        # planning a GPU run on a machine without one: transformers refuses bf16 without use_cpu
        argv = [*argv, "--use_cpu", "true"]
    try:
        args, margs, rargs = parser.parse_args_and_config(argv)
    except (ValueError, FileNotFoundError) as e:  # a config value that cannot work, said plainly
        print(f"arpo-train: {e}", file=sys.stderr)
        return 2
    if rargs.dry_run:
        return dry_run(args, margs, rargs)
    return _ended(train(args, margs))


if __name__ == "__main__":
    raise SystemExit(main())
