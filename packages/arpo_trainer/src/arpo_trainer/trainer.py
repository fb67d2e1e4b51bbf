"""``ARPOTrainer``: TRL's ``GRPOTrainer`` with multi-turn desktop rollouts and success replay.

Only the generation seam is replaced (``_generate_and_score_completions``); TRL keeps the batching,
the loss variants and clipping, PEFT, vLLM weight sync, optimizer and checkpoints. Per generation
batch (rows = tasks, repeated ``num_generations`` times in contiguous groups):

1. one episode per row on a pool of desktops, lock-step turns, the policy sampling token ids
   (:class:`~arpo_trainer.rollout.Collector`);
2. replay: one rollout of every all-failure group is replaced by a stored success of its task,
   then the fresh successes enter the buffer (:class:`~arpo_trainer.replay.ReplayBuffer`);
3. rewards = evaluator score + format penalty through TRL's reward functions; trajectories whose
   desktop failed are unscorable (left out of the group statistics and the loss) and counted;
4. group-relative advantages (``scale_rewards``), one sequence per trajectory with the
   observation tokens masked out of the loss (``tool_mask``), ``mm_token_type_ids`` for mRoPE.

With ``rollout_mode="async"`` (issue 28) step 1 is replaced: complete groups come from desktops
playing on their own against a batching generator (its own copy of the weights, or the vLLM
server of ``vllm_mode="server"``; :class:`~arpo_trainer.async_rollout.TrainerRollouts`, one per
process, over the process's own desktops and share of the rows), at most ``max_staleness`` steps
old, and their sampling log-probs go into the truncated importance-sampling correction; steps 2-4
are the same code, so replay stays global across processes.

The replay buffer is saved in every checkpoint (``arpo_replay.zip``) and restored on resume.

Across processes (``accelerate launch``) the turn count is agreed every turn, the fresh successes
of every rank enter every rank's buffer, and the logged episode/replay metrics and completion
rows cover every rank (:mod:`arpo_trainer.ranks`). The buffer is written once, by the main
process, and on resume the main process reads it and broadcasts it to the others.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import time
import warnings
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import torch
from accelerate.utils import is_peft_model
from datasets import Dataset
from transformers import PreTrainedModel, TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl.models.utils import disable_gradient_checkpointing, unwrap_model_for_generation
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.utils import use_adapter

from arpo_trainer.async_rollout import ServerPolicy, TrainerRollouts
from arpo_trainer.batch import (
    collate,
    importance_sampling_ratio,
    training_sequence,
    window_loss_scales,
)
from arpo_trainer.config import ARPOConfig
from arpo_trainer.demos import record_demonstrations
from arpo_trainer.desktops import DesktopPool
from arpo_trainer.envspec import env_kwargs, make_encoder, make_policy_action_set
from arpo_trainer.generation import (
    SUPPRESSED_LOGIT,
    Policy,
    SimulatedLatencyPolicy,
    TransformersPolicy,
    TRLGenerationPolicy,
    action_constraint,
    assistant_header,
    special_token_suppression,
    suppressed_tokens_in_loss,
    turn_generation_config,
)
from arpo_trainer.grammar import TokenConstraint, constrained_token_logps, sequence_masks
from arpo_trainer.metrics import (
    LiveSuccessCallback,
    QuietProgressCallback,
    append_rollout_log,
    rollout_metrics,
)
from arpo_trainer.modeling import weight_io_bars_off
from arpo_trainer.preflight import run_capabilities
from arpo_trainer.ranks import RankGroup
from arpo_trainer.replay import InjectionStats, ReplayBuffer
from arpo_trainer.rewards import evaluator_score, format_error, group_advantages
from arpo_trainer.rollout import Collector, RolloutStats, Trajectory
from arpo_trainer.tasks import resolve_tasks, task_dataset
from arpo_trainer.vllm_rollout import (
    VLLMRolloutEngine,
    configure_vllm_generation,
    trl_weight_handshake,
    vllm_on_cpu,
)

log = logging.getLogger(__name__)

REPLAY_FILE = "arpo_replay.zip"


# TRL 1.16's unwrap_model_for_generation / disable_gradient_checkpointing (used on every rollout
# and log-prob pass) call transformers 5's deprecated gradient_checkpointing_* aliases; the call
# sites are TRL's, so these three messages are filtered once, here, and nothing else.
warnings.filterwarnings(
    "ignore",
    message=r"`(is_gradient_checkpointing|gradient_checkpointing_enable|"
    r"gradient_checkpointing_disable)` is deprecated",
    category=FutureWarning,
)


class ARPOTrainer(GRPOTrainer):
    """Multi-turn GRPO on desktops with ARPO's success replay (see the module docstring).

    Args:
        model: a Qwen-VL model (or its name/path), possibly a ``PeftModel``.
        args: an :class:`~arpo_trainer.config.ARPOConfig`.
        processing_class: the model's processor (tokenizer + image processor).
        train_dataset: rows with ``prompt`` and ``task_id``; default: one row per task of
            ``args.tasks``.
        reward_funcs: default ``[evaluator_score, format_error]`` weighted ``[1,
            args.format_penalty]``.
        tasks: the task set to look ``task_id`` up in (default: ``args.tasks``).
        replay_buffer: start from this buffer (e.g. warm-started with demonstrations).
        peft_config, callbacks, optimizers: as for ``GRPOTrainer``.
    """

    _tag_names = ["trl", "grpo", "arpo"]
    args: ARPOConfig  # narrowed from TrainingArguments: __init__ only accepts an ARPOConfig

    def __init__(
        self,
        model: Any,
        args: ARPOConfig,
        processing_class: Any = None,
        *,
        train_dataset: Dataset | None = None,
        reward_funcs: Any = None,
        tasks: Any = None,
        replay_buffer: ReplayBuffer | None = None,
        peft_config: Any = None,
        callbacks: list[TrainerCallback] | None = None,
        optimizers: Any = (None, None),
    ):
        if not isinstance(args, ARPOConfig):
            raise TypeError(f"ARPOTrainer needs an ARPOConfig, got {type(args).__name__}")
        self.tasks = (
            tasks
            if tasks is not None
            else resolve_tasks(args.tasks, args.task_ids, provider=run_capabilities(args))
        )
        if train_dataset is None:
            train_dataset = task_dataset(self.tasks, args.task_ids)
        if reward_funcs is None:
            reward_funcs = [evaluator_score, format_error]
            if args.reward_weights is None:
                args.reward_weights = [1.0, args.format_penalty]
        # The colocated engine sleeps between rollouts (VLLMRolloutEngine), not after every turn.
        # vLLM's CPU build refuses enable_sleep_mode: build it without, run the same sleep calls.
        vllm_sleeps = bool(
            args.use_vllm and args.vllm_mode == "colocate" and args.vllm_enable_sleep_mode
        )
        if vllm_sleeps and vllm_on_cpu():
            log.info(
                "vLLM's CPU build has no sleep mode: the engine is built without it; between "
                "rollouts it still sleeps (caches dropped, no memory released)"
            )
            args.vllm_enable_sleep_mode = False
        with trl_weight_handshake(args.vllm_weight_transfer):  # "disk": no NCCL handshake
            super().__init__(
                model=model,
                reward_funcs=reward_funcs,
                args=args,
                train_dataset=train_dataset,
                processing_class=processing_class,
                peft_config=peft_config,
                callbacks=callbacks,
                optimizers=optimizers,
            )
        groups_per_batch = (
            args.per_device_train_batch_size
            * args.generation_steps
            * self.accelerator.num_processes
            // args.group_size
        )
        if len(self.task_rows) < groups_per_batch:
            # TRL's sampler would silently yield no batch at all: training would end at step 0
            raise ValueError(
                f"{len(self.task_rows)} task rows, but one generation batch over "
                f"{self.accelerator.num_processes} process(es) needs {groups_per_batch} groups "
                "of num_generations: add tasks or lower per_device_train_batch_size"
            )
        if not self._is_vlm:
            raise ValueError(
                "ARPOTrainer needs a vision-language model and its processor (ProcessorMixin)"
            )
        self.ranks = RankGroup.from_accelerator(self.accelerator)
        self.encoder = make_encoder(args, self.processing_class)
        self.action_set = make_policy_action_set(args, self.encoder)
        self.replay_buffer = replay_buffer or ReplayBuffer(
            capacity=args.replay_capacity,
            success_threshold=args.replay_success_threshold,
            fail_std=args.replay_fail_std,
            fail_mean=args.replay_fail_mean,
            # ranks inject into different groups: independent draws (a restored buffer brings its
            # state)
            seed=args.seed + self.ranks.process_index,
        )
        # token ids neither sampling path can produce; the trainer scores without them too
        self.suppressed_ids = special_token_suppression(self.encoder)
        self.vllm_engine: VLLMRolloutEngine | None = None
        if self.use_vllm:
            configure_vllm_generation(
                self.vllm_generation, self.encoder, max_turn_tokens=args.max_turn_tokens
            )
            self.vllm_engine = VLLMRolloutEngine(
                self.vllm_generation,
                self.accelerator,
                sleeps=vllm_sleeps,
                weight_transfer=args.vllm_weight_transfer,
                weights_dir=Path(args.output_dir or ".") / "vllm-weights",
            )
        else:
            self.turn_generation_config = turn_generation_config(
                self.encoder,
                max_new_tokens=args.max_turn_tokens,
                temperature=args.temperature,
                top_p=args.top_p,
                top_k=args.top_k,
                base=self.generation_config,
            )
        # grammar-constrained decoding: sampled and scored under the same constraint
        self.action_constraint: TokenConstraint | None = None
        self._assistant_header: list[int] = []
        if args.action_grammar:
            frame = getattr(self.action_set, "frame", None)
            if frame is None:
                raise ValueError("action_grammar needs the uitars action set (its image frame)")
            self.action_constraint = action_constraint(
                self.encoder, tuple(frame), args.max_turn_tokens
            )
            self._assistant_header = assistant_header(self.encoder)
        self._started: float | None = None
        self._learner_per_call_s = 0.0  # simulated_learner_latency_per_turn_s, per training_step
        self._pool: DesktopPool | None = None
        self._collector: Collector | None = None
        self._async: TrainerRollouts | None = None  # rollout_mode="async" (issue 28)
        self._generator_model: torch.nn.Module | None = None
        self._synced_at = 0
        self._desktop_busy_seen = 0.0
        if args.rollout_mode == "async":
            plugin = self.accelerator.state.deepspeed_plugin
            if plugin is not None and plugin.zero_stage == 3:
                raise ValueError(
                    "rollout_mode='async' copies the learner's weights into its generator, and "
                    "ZeRO-3 partitions them across processes: use ZeRO-2 (or none), or "
                    "rollout_mode='sync'"
                )
        self.live_stats: dict[str, Any] = {}
        # one quiet progress bar (the metrics dict goes to report_to, not the terminal)
        if any(type(cb) is ProgressCallback for cb in self.callback_handler.callbacks):
            self.remove_callback(ProgressCallback)
            self.add_callback(QuietProgressCallback)
        self.add_callback(LiveSuccessCallback(self))

    @property
    def task_rows(self) -> Dataset:
        """The training rows (``task_id``, ``prompt``): TRL types ``train_dataset`` more widely."""
        rows = self.train_dataset
        if not isinstance(rows, Dataset):
            raise TypeError(
                f"ARPOTrainer's train_dataset must be a datasets.Dataset, got {type(rows).__name__}"
            )
        return rows

    @property
    def trained_model(self) -> torch.nn.Module:
        """``self.model``, which the base trainer types as optional (it is set in ``__init__``)."""
        if self.model is None:
            raise RuntimeError("ARPOTrainer has no model")
        return self.model

    def _gathered(self, tensor: torch.Tensor) -> torch.Tensor:
        """``accelerator.gather`` of one tensor (accelerate types the result as any nesting)."""
        out = self.accelerator.gather(tensor)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"gathering a tensor gave {type(out).__name__}")
        return out

    def collector(self, n: int) -> Collector:
        """The collector over a pool of ``n`` desktops (started on first use, reused afterwards)."""
        if self._pool is not None and self._pool.n != n:
            self._close_lock_step()  # only that pool: the async loop (if any) plays on
        if self._pool is None:
            self._pool = DesktopPool(
                n,
                env_kwargs(self.args, self.encoder),
                backend=self.args.vector_env,
                step_timeout=self.args.step_timeout_s,
                source=self.args.desktop_source,
                rank=self.ranks.process_index,
            )
            self._collector = Collector(
                self._pool,
                self.encoder,
                self.action_set,
                max_turns=self.args.max_turns,
                end_on_format_error=self.args.end_on_format_error,
                ranks=self.ranks,
                allow_unseparated=self.args.allow_unseparated_desktops,
            )
        assert self._collector is not None
        return self._collector

    def warm_start_replay(self, repeats: int = 1) -> int:
        """Seed the replay buffer with oracle demonstrations that succeed on a desktop; returns how
        many."""
        n = self.args.per_device_train_batch_size * self.args.generation_steps
        task_ids = sorted(set(self.task_rows["task_id"]))
        demos = record_demonstrations(
            [self.tasks[t] for t in task_ids],
            self.collector(n),
            repeats=repeats,
            step=self.state.global_step,
        )
        # every rank played the demonstrations (its collector joins the others' turns); all keep the
        # main rank's, so the buffers stay identical
        demos = self.ranks.broadcast(demos)
        stored = sum(self.replay_buffer.add(d, step=self.state.global_step) for d in demos)
        failed = sorted({d.task_id for d in demos} - set(self.replay_buffer.task_ids()))
        if failed:
            log.warning("oracle demonstrations did not succeed for: %s", ", ".join(failed))
        return stored

    def close_desktops(self) -> None:
        """Stop the desktops (they are restarted on the next rollout), the async loop's too."""
        if self._async is not None:
            self._async.close()
            self._async = None
        self._close_lock_step()

    def _close_lock_step(self) -> None:
        """Stop the lock-step pool's desktops (warm start, evaluation, sync rollouts), if open."""
        if self._pool is not None:
            self._pool.close()
            self._pool, self._collector = None, None

    @contextlib.contextmanager
    def policy(self) -> Iterator[Any]:
        """The current policy, ready to sample (TRL's vLLM path, or ``generate`` on the unwrapped
        model)."""
        if self.vllm_engine is not None:
            step = self.state.global_step
            if self._async is not None and self.vllm_engine.synced_step != step:
                # the async generator shares the server: push between two of its batches, so
                # the version it tags turns with follows the weights
                self._sync_async_generator(step)
            # awake, with the current weights, for every turn of the rollout; asleep after it
            with self.vllm_engine.rollout(step):
                yield TRLGenerationPolicy(self, self.encoder)
            return
        with unwrap_model_for_generation(
            self.model_wrapped,
            self.accelerator,
            gather_deepspeed3_params=self.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=self.args.checkpointing_kwargs,
        ) as unwrapped:
            yield self._with_simulated_latency(
                TransformersPolicy(
                    unwrapped, self.encoder, self.turn_generation_config, self.action_constraint
                )
            )

    def _with_simulated_latency(self, policy: Policy) -> Policy:
        """``policy``, paying ``simulated_generation_latency_s`` per call where that is set."""
        latency = self.args.simulated_generation_latency_s
        return SimulatedLatencyPolicy(policy, latency) if latency > 0 else policy

    # -- the seam ----------------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        mode = "train" if self.trained_model.training else "eval"
        device = self.accelerator.device
        G = (
            self.args.group_size
            if mode == "train"
            else (self.args.num_generations_eval or self.args.group_size)
        )
        step = self.state.global_step
        if len(inputs) % G:
            raise ValueError(f"{len(inputs)} rows are not whole groups of {G}")

        # 1. rollouts
        if self._started is None:
            self._started = time.monotonic()
        if self.args.rollout_mode == "async" and mode == "train":
            # complete groups from the desktops playing on their own; the rows are theirs
            inputs, fresh, rstats = self._async_groups(len(inputs), G, step)
        else:
            tasks = [self.tasks[row["task_id"]] for row in inputs]
            collector = self.collector(len(inputs))
            with self.policy() as policy:
                fresh = collector.run(tasks, policy, step=step)
            rstats = collector.last_stats

        # 2. replay: inject into this rank's groups, then every rank stores every rank's successes
        groups = [fresh[i : i + G] for i in range(0, len(fresh), G)]
        inj = InjectionStats(groups=len(groups))
        replay_on = self.args.replay and mode == "train"
        if replay_on:
            groups, inj = self.replay_buffer.inject(groups, step)
        trajs = [t for g in groups for t in g]
        per_turn = self.args.simulated_learner_latency_per_turn_s
        if mode == "train" and per_turn:
            # this rank's rows, each trained num_iterations times over the training_step calls
            # that use this batch: slept evenly, after each real one
            owed = per_turn * sum(len(t.turns) for t in trajs) * self.num_iterations
            self._learner_per_call_s = owed / (self.args.generation_steps * self.num_iterations)
            # a step lasts as long as its slowest rank
            slowest = self._gathered(torch.tensor([owed], device=device)).max()
            self._metrics[mode]["train/simulated_learner_s"].append(float(slowest))
        prompts = [row["prompt"] for row in inputs]
        completions = [
            [{"role": "assistant", "content": "\n".join(u.action_text for u in t.turns)}]
            for t in trajs
        ]
        astats = (
            self._async.assembler.stats
            if self.args.rollout_mode == "async" and mode == "train" and self._async is not None
            else None
        )
        # one exchange per step: new successes whole, everything else without screenshots
        shared = self.ranks.gather(
            [
                {
                    "successes": [
                        t
                        for t in fresh
                        if replay_on and t.source == "policy" and self.replay_buffer.is_success(t)
                    ],
                    "fresh": [t.without_screenshots() for t in fresh],
                    "batch": [t.without_screenshots() for t in trajs],
                    "inj": inj,
                    "rstats": rstats,
                    "prompts": prompts,
                    "completions": completions,
                    # the async loop's staleness of this step's groups, totals since the start
                    "async": None
                    if astats is None
                    else (
                        astats.staleness[-len(groups) :],
                        astats.dropped_stale,
                        astats.taken,
                        self._async.collector.gated_waits if self._async is not None else 0,
                    ),
                }
            ]
        )
        stored = 0
        if replay_on:
            stored = self.replay_buffer.update([t for r in shared for t in r["successes"]], step)
        if self.args.rollout_log and self.accelerator.is_main_process:
            path = Path(self.args.rollout_log)
            append_rollout_log(
                path if path.is_absolute() else self.args.run_dir / path,
                [t for r in shared for t in r["batch"]],
                step,
            )

        # 3. rewards
        seqs = [training_sequence(t, self.encoder) for t in trajs]
        reward_rows = [
            {
                **row,
                "score": t.score,
                "format_errors": t.format_errors,
                "infra_error": t.infra_error,
                "source": t.source,
            }
            for row, t in zip(inputs, trajs, strict=True)
        ]
        rewards_per_func = self._calculate_rewards(
            reward_rows, prompts, completions, [s.completion_ids for s in seqs]
        )
        advantages, rewards, std = group_advantages(
            rewards_per_func,
            self.reward_weights.to(rewards_per_func.device),
            G,
            scale_rewards=self.scale_rewards,
            aggregation=self.multi_objective_aggregation,
            clip=self.args.advantage_clip,
        )
        local = slice(
            self.accelerator.process_index * len(inputs),
            (self.accelerator.process_index + 1) * len(inputs),
        )
        all_advantages = advantages.clone()
        advantages = advantages[local].cpu()

        # 4. tensors, kept on the host (screenshots as uint8 patches): TRL buffers the whole
        # generation batch until the next rollout, and _prepare_inputs moves one micro-batch at a
        # time to the device
        pad_id = self._tokenizer.pad_token_id
        if not isinstance(pad_id, int):
            raise ValueError(f"the tokenizer's pad_token_id must be one id, got {pad_id!r}")
        batch, sampling_logps = collate(
            seqs,
            pad_id=pad_id,
            image_token_id=self.encoder.image_token_id,
        )
        loss_mask = batch["completion_mask"] * batch["tool_mask"]
        output: dict[str, Any] = {
            **batch,
            "advantages": advantages,
            "valid": torch.tensor([t.valid for t in trajs], dtype=torch.bool),
            "num_items_in_batch": self._gathered(loss_mask.sum().to(device)).sum(),
        }
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logits_to_keep = batch["completion_ids"].size(1)
        self._add_logps(
            output,
            input_ids,
            attention_mask,
            logits_to_keep,
            sampling_logps,
            loss_mask,
            trajs,
            mode,
        )

        # 5. metrics
        if astats is not None and self._async is not None:
            m = self._metrics[mode]
            ranks = [r["async"] for r in shared]  # every process's groups
            taken = [s for r in ranks for s in r[0]]
            m["async/staleness_mean"].append(sum(taken) / max(len(taken), 1))
            m["async/staleness_max"].append(float(max(taken, default=0)))
            m["async/dropped_stale"].append(float(sum(r[1] for r in ranks)))
            m["async/groups_taken"].append(float(sum(r[2] for r in ranks)))
            # episodes whose start waited at the version gate (cumulative): desktops held back
            m["async/gated_waits"].append(float(sum(r[3] for r in ranks)))
            m["async/generator_version"].append(float(self._async.generator.version))
            # most generation batches this process had in flight at once (cumulative)
            m["async/requests_in_flight_peak"].append(float(self._async.generator.peak_in_flight))
        self._record_metrics(
            mode,
            [t for r in shared for t in r["fresh"]],
            [t for r in shared for t in r["batch"]],
            rewards_per_func,
            rewards,
            std,
            InjectionStats.merged([r["inj"] for r in shared]),
            stored,
            RolloutStats.merged([r["rstats"] for r in shared]),
            all_advantages,
            [p for r in shared for p in r["prompts"]],
            [c for r in shared for c in r["completions"]],
        )
        return output

    def _add_logps(
        self,
        output: dict[str, Any],
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        sampling_logps: torch.Tensor,
        loss_mask: torch.Tensor,
        trajs: list[Trajectory],
        mode: str,
    ) -> None:
        """Old / reference log-probs and the vLLM importance-sampling ratio, as TRL's seam computes
        them."""
        batch_size = (
            self.args.per_device_train_batch_size
            if mode == "train"
            else self.args.per_device_eval_batch_size
        )
        fwd = {k: output[k] for k in ("pixel_values", "image_grid_thw") if k in output}
        fwd.update(num_images=output["num_images"], mm_token_type_ids=output["mm_token_type_ids"])
        generate_every = self.args.generation_steps * self.num_iterations
        # async rollouts sample with an older copy of the weights: the same correction as vLLM's
        use_is = self._corrects_sampling()
        replayed = torch.tensor([t.source != "policy" for t in trajs], device=sampling_logps.device)
        with (
            torch.no_grad(),
            # TRL annotates PreTrainedModel; it only uses the checkpointing API, which a PeftModel
            # forwards to its base model
            disable_gradient_checkpointing(
                cast(PreTrainedModel, self.trained_model), self.args.checkpointing_kwargs
            ),
        ):
            old = None
            if self.args.gradient_accumulation_steps % generate_every != 0 or use_is:
                old, _, _ = self._get_per_token_logps_and_entropies(
                    self.model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size=batch_size,
                    **fwd,
                )
                old = old.cpu()
                output["old_per_token_logps"] = old
            if self.beta != 0.0:
                if self.ref_model is not None:
                    ref, _, _ = self._get_per_token_logps_and_entropies(
                        self.ref_model,
                        input_ids,
                        attention_mask,
                        logits_to_keep,
                        batch_size=batch_size,
                        **fwd,
                    )
                else:
                    unwrapped = self.accelerator.unwrap_model(self.model)
                    with use_adapter(
                        unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None
                    ):
                        ref, _, _ = self._get_per_token_logps_and_entropies(
                            self.model,
                            input_ids,
                            attention_mask,
                            logits_to_keep,
                            batch_size=batch_size,
                            **fwd,
                        )
                output["ref_per_token_logps"] = ref.cpu()
        # Replayed and demonstrated turns were not sampled by this policy now: no sampling
        # log-probs,
        # so they get importance ratio 1 (as in ARPO, which recomputes them with the current
        # policy).
        unknown = torch.isnan(sampling_logps) | replayed.unsqueeze(1)
        if old is not None:
            sampling_logps = torch.where(unknown, old, sampling_logps)
            output["sampling_per_token_logps"] = sampling_logps
        if use_is:
            assert old is not None, "importance sampling computes the old log-probs above"
            output["importance_sampling_ratio"] = importance_sampling_ratio(
                old,
                sampling_logps,
                loss_mask,
                mode=self.vllm_importance_sampling_mode,
                clip_min=self.vllm_importance_sampling_clip_min,
                clip_max=self.vllm_importance_sampling_clip_max,
            )

    def training_step(self, model, inputs, num_items_in_batch):
        """TRL's step; then, benchmarks only (``simulated_learner_latency_per_turn_s``), this
        micro-batch's share of a large model's update, slept on the learner's thread, so async
        rollouts go on meanwhile as they would beside a real update."""
        out = super().training_step(model, inputs, num_items_in_batch)
        if self._learner_per_call_s:
            time.sleep(self._learner_per_call_s)
        return out

    def _corrects_sampling(self) -> bool:
        """Whether the truncated importance-sampling correction applies (TRL's for vLLM's
        sampling log-probs; ours for the async generator's, which lag the learner)."""
        sampled_elsewhere = self.use_vllm or self.args.rollout_mode == "async"
        return bool(sampled_elsewhere and self.vllm_importance_sampling_correction)

    def _compute_loss(self, model, inputs):
        """TRL's loss; in async mode TRL's vLLM-only switch for the importance-sampling ratio is
        turned on for the call, so the async generator's ratio multiplies the per-token loss as
        vLLM's does (the switch is read nowhere else in the loss)."""
        if self.use_vllm or not self._corrects_sampling():
            return super()._compute_loss(model, inputs)
        self.use_vllm = True
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self.use_vllm = False

    def async_policy(self, model: torch.nn.Module) -> Policy:
        """What the asynchronous loop's generator samples with: ``generate`` on ``model``, the
        generator's own copy of the weights (a subclass may wrap it, as the 2-process test does to
        pace what each rank plays)."""
        return TransformersPolicy(
            model, self.encoder, self.turn_generation_config, self.action_constraint
        )

    def _async_groups(
        self, rows: int, G: int, step: int
    ) -> tuple[list[dict[str, Any]], list[Trajectory], RolloutStats]:
        """``rows // G`` complete groups from the asynchronous loop (started on first use), their
        training rows, and the rollout stats of the wait. Weights go to the generator every
        ``weight_sync_every`` steps, tagged with the learner's step as the policy version."""
        if self._async is None:
            # the oracle warm start's lock-step desktops would idle beside the loop's own for
            # the whole run (an evaluation re-opens them when it needs them)
            self._close_lock_step()
            if self.vllm_engine is not None:
                # the vLLM server samples: no copy of the model on the learner's device
                policy: Any = ServerPolicy(self.vllm_engine, self.encoder)
            else:
                learner = self.accelerator.unwrap_model(self.trained_model)
                generator_model = copy.deepcopy(learner).eval().requires_grad_(False)
                self._generator_model = generator_model
                policy = self.async_policy(generator_model)
                if not self.args.simulated_generation_concurrent:  # else paid per request
                    policy = self._with_simulated_latency(policy)
            desktops = self.args.desktops_per_process
            pools = DesktopPool.singles(
                desktops,
                env_kwargs(self.args, self.encoder),
                backend=self.args.vector_env,
                step_timeout=self.args.step_timeout_s,
                source=self.args.desktop_source,
                rank=self.ranks.process_index,
            )
            self._async = TrainerRollouts(
                pools,
                self.encoder,
                self.action_set,
                policy,
                rows=[dict(r) for r in self.task_rows.to_list()],
                task_of=lambda row: self.tasks[row["task_id"]],
                group_size=G,
                max_staleness=self.args.max_staleness,
                max_turns=self.args.max_turns,
                end_on_format_error=self.args.end_on_format_error,
                # two steps' groups ahead of the learner, and at least enough to keep every
                # desktop playing
                prefetch_groups=max(2 * (rows // G), -(-desktops // G) + rows // G),
                seed=self.args.seed,
                rank=self.ranks.process_index,
                processes=self.accelerator.num_processes,
                groups_per_step=rows // G,
                # optimizer steps (policy versions) between two generation batches: TRL
                # generates every steps_per_generation * num_iterations micro-batches and steps
                # every gradient_accumulation_steps, so not always a whole number (rounded, the
                # gates drifted off the learner's steps and played groups were dropped)
                steps_per_take=Fraction(
                    self.args.generation_steps * self.num_iterations,
                    self.args.gradient_accumulation_steps,
                ),
                start_version=step,
                gate=self.args.async_version_gate,
                allow_unseparated=self.args.allow_unseparated_desktops,
                # a vLLM server batches concurrent requests itself: by default one per desktop,
                # so no desktop's turn waits for a batch it missed (docs/async.md measures it)
                requests_in_flight=self.args.async_requests_in_flight
                or (desktops if self.vllm_engine is not None else 1),
                request_latency_s=self.args.simulated_generation_latency_s
                if self.args.simulated_generation_concurrent
                else 0.0,
            )
            if self.vllm_engine is not None and self.vllm_engine.synced_step != step:
                self.vllm_engine.push_weights(step)  # before the first request
            self._async.generator.version = step
            self._synced_at = step
            self._desktop_busy_seen = 0.0  # a new loop, a new timeline
        # the learner waits for a weight sync (it waits for the generator's batch in flight)
        # as it waits for groups: both count as the step's rollout seconds
        t0 = time.monotonic()
        if step - self._synced_at >= self.args.weight_sync_every:
            self._sync_async_generator(step)
        taken = self._async.take(rows // G, step)
        trajs = [t for _, g in taken for t in g]
        turns = sum(len(t.turns) for t in trajs)
        # desktop-seconds of every desktop since the last step (episodes played ahead included)
        rstats = RolloutStats(
            seconds=time.monotonic() - t0,
            env_seconds=self._async.timeline.desktop_busy - self._desktop_busy_seen,
            env_steps=turns,
            turns=turns,
        )
        self._desktop_busy_seen = self._async.timeline.desktop_busy
        return [row for row, g in taken for _ in g], trajs, rstats

    def _sync_async_generator(self, step: int) -> None:
        """The learner's weights into the async generator, between two of its batches, tagged
        ``step``: the vLLM server's push, or a copy into the generator's own model."""
        assert self._async is not None, "made with the async loop"
        engine = self.vllm_engine
        if engine is not None:
            self._async.sync(step, lambda: engine.push_weights(step))
        else:
            learner = self.accelerator.unwrap_model(self.trained_model)
            target = self._generator_model
            assert target is not None, "made with the async loop"

            def copy_weights() -> None:
                with torch.no_grad():
                    target.load_state_dict(learner.state_dict())

            self._async.sync(step, copy_weights)
        self._synced_at = step

    # -- the device sees one micro-batch at a time -----------------------------------------------

    def _prepare_inputs(self, generation_batch: Any) -> dict[str, Any]:
        """TRL's buffering (the generation batch stays on the host), then: every micro-batch's
        loss scaled to a mean over valid trajectories (:func:`~arpo_trainer.batch.
        window_loss_scales`), and only the micro-batch handed out moved to the device."""
        buffered = self._buffered_inputs
        inputs = super()._prepare_inputs(generation_batch)
        refilled = self._buffered_inputs
        if self.trained_model.training and refilled is not None and refilled is not buffered:
            self._scale_to_valid_rows(refilled)
        device = self.accelerator.device
        return {
            k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
            for k, v in inputs.items()
        }

    def _scale_to_valid_rows(self, micro_batches: list[dict[str, Any]]) -> None:
        valid = torch.tensor([int(mb["valid"].sum()) for mb in micro_batches])
        every = self._gathered(valid.to(self.accelerator.device)).cpu()
        scales = window_loss_scales(
            every.view(-1, len(micro_batches)),
            rows=len(micro_batches[0]["valid"]),
            accumulation=self.current_gradient_accumulation_steps,
            first_step=self._step,
            loss_type=self.loss_type,
        )
        for mb, scale in zip(micro_batches, scales.tolist(), strict=True):
            mb["loss_scale"] = torch.tensor(scale, dtype=torch.float32)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        scale = inputs.get("loss_scale")
        return loss if scale is None else loss * scale.to(loss.device)

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        pixel_values=None,
        image_grid_thw=None,
        num_images=None,
        mm_token_type_ids=None,
        **others,
    ):
        """TRL's per-token log-probs, ``batch_size`` rows at a time, each chunk moved to the
        device and its screenshots turned from uint8 patches into the processor's values there;
        scored with the vision tokens suppressed (:func:`~arpo_trainer.generation.
        suppressed_tokens_in_loss`)."""
        if any(v is not None for v in others.values()):
            raise ValueError(f"unexpected model inputs for Qwen-VL: {sorted(others)}")
        device = self.accelerator.device
        n = input_ids.size(0)
        step = batch_size or n
        unwrapped = self.accelerator.unwrap_model(model)
        patched = unwrapped.get_base_model() if is_peft_model(unwrapped) else unwrapped
        dtype = next(unwrapped.parameters()).dtype
        images: list[int] = []  # the screenshots of rows [0, r) are images[r] (cumulative)
        rows: list[int] = []  # the patches of screenshots [0, i) are rows[i] (cumulative)
        if pixel_values is not None:
            if image_grid_thw is None or num_images is None:
                raise ValueError("pixel_values come with image_grid_thw and num_images")
            images = torch.tensor([0, *num_images]).cumsum(0).tolist()
            per_image = image_grid_thw.prod(-1).cpu()
            rows = torch.cat([torch.zeros(1, dtype=per_image.dtype), per_image.cumsum(0)]).tolist()
        logps, entropies, aux = [], [], []
        for start in range(0, n, step):
            end = min(start + step, n)
            kw: dict[str, Any] = {}
            i0, i1 = (images[start], images[end]) if images else (0, 0)
            # a chunk of stubs only (failed desktops) has no screenshot at all; the None checks
            # hold whenever images is filled (checked above)
            if (
                i1 > i0
                and pixel_values is not None
                and image_grid_thw is not None
                and num_images is not None
            ):
                chunk = pixel_values[rows[i0] : rows[i1]].to(device, non_blocking=True)
                kw["pixel_values"] = self.encoder.model_pixels(chunk, dtype)
                kw["image_grid_thw"] = image_grid_thw[i0:i1].to(device)
                kw["num_images"] = num_images[start:end]
            if mm_token_type_ids is not None:
                kw["mm_token_type_ids"] = mm_token_type_ids[start:end].to(device)
            if self.action_constraint is not None:
                lp, ent = self._constrained_logps(
                    model,
                    input_ids[start:end].to(device),
                    attention_mask[start:end].to(device),
                    logits_to_keep,
                    compute_entropy,
                    kw,
                )
                logps.append(lp)
                entropies.append(ent)
                continue
            with suppressed_tokens_in_loss(patched, self.suppressed_ids):
                lp, ent, ax = super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids[start:end].to(device),
                    attention_mask[start:end].to(device),
                    logits_to_keep,
                    batch_size=None,
                    compute_entropy=compute_entropy,
                    compute_aux_loss=compute_aux_loss,
                    **kw,
                )
            logps.append(lp)
            entropies.append(ent)
            aux.append(ax)
        return (
            torch.cat(logps),
            torch.cat(entropies) if compute_entropy else None,
            torch.stack(aux).mean() if compute_aux_loss and aux else None,
        )

    def _constrained_logps(
        self,
        model,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        compute_entropy: bool,
        kw: dict[str, Any],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-token log-probs under ``action_grammar``: the full logits of the completion (the
        fused head takes one bias for every position, the grammar's mask differs per token),
        divided by the temperature, the vision tokens and every token the grammar forbade at
        that position suppressed, as the sampling path did (:mod:`arpo_trainer.grammar`)."""
        constraint = self.action_constraint
        assert constraint is not None, "called only with action_grammar"
        kw = {k: v for k, v in kw.items() if k != "num_images"}
        with self.accelerator.autocast():
            out = model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                logits_to_keep=logits_to_keep + 1,
                use_cache=False,
                **kw,
            )
        logits = out.logits[:, :-1, :]
        completion = input_ids[:, -logits_to_keep:]
        masks = []
        for row in input_ids.tolist():
            per_pos = sequence_masks(constraint, row, self._assistant_header)
            masks.append(per_pos[-logits_to_keep:])
        bias = torch.zeros(logits.size(-1), dtype=torch.float32, device=logits.device)
        bias[self.suppressed_ids] = SUPPRESSED_LOGIT
        lp, ent = constrained_token_logps(
            logits,
            completion,
            masks,
            temperature=self.temperature,
            bias=bias,
            compute_entropy=compute_entropy,
            masked_logit=SUPPRESSED_LOGIT,
        )
        # padding positions score 0, as TRL's fused head leaves them
        keep = attention_mask[:, -logits_to_keep:].bool()
        lp = lp.masked_fill(~keep, 0.0)
        ent = ent.masked_fill(~keep, 0.0) if ent is not None else None
        return lp, ent

    # -- logging -----------------------------------------------------------------------------------

    def _record_metrics(
        self,
        mode: str,
        fresh: list[Trajectory],
        trajs: list[Trajectory],
        rewards_per_func: torch.Tensor,
        rewards: torch.Tensor,
        std: torch.Tensor,
        inj: InjectionStats,
        stored: int,
        rstats: RolloutStats,
        all_advantages: torch.Tensor,
        prompts: list[Any],
        completions: list[Any],
    ) -> None:
        """TRL's reward metrics and completion logs, plus ours (:mod:`arpo_trainer.metrics`).

        Every argument is global (all ranks, in rank order), like TRL's gathered rewards."""
        m = self._metrics[mode]
        for i, name in enumerate(self.reward_func_names):
            m[f"rewards/{name}/mean"].append(torch.nanmean(rewards_per_func[:, i]).item())
        valid = ~torch.isnan(rewards)
        m["reward"].append(torch.nanmean(rewards).item())
        m["reward_std"].append(rewards[valid].std().item() if int(valid.sum()) > 1 else 0.0)
        m["frac_reward_zero_std"].append(
            torch.isclose(std[valid], torch.zeros_like(std[valid])).float().mean().item()
            if valid.any()
            else float("nan")
        )
        ours = rollout_metrics(
            fresh,
            trajs,
            inj,
            stored,
            len(self.replay_buffer),
            rstats,
            success_threshold=self.args.replay_success_threshold,
        )
        ours["time/minutes"] = (time.monotonic() - (self._started or time.monotonic())) / 60
        if self.args.simulated_generation_latency_s:  # the run's timings are partly simulated
            ours["rollout/simulated_latency_s"] = float(self.args.simulated_generation_latency_s)
        for key, value in ours.items():
            m[key].append(value)
        if mode == "train":
            self.live_stats = {
                "success": ours["episode/success_rate"],
                "replayed": inj.injected,
                "buffer": len(self.replay_buffer),
                "infra": int(ours["episode/infra_errors"]),
            }
        self._logs["prompt"].extend(prompts)
        self._logs["completion"].extend(completions)
        for i, name in enumerate(self.reward_func_names):
            self._logs["rewards"][name].extend(rewards_per_func[:, i].tolist())
        self._logs["advantages"].extend(all_advantages.tolist())

    # -- checkpoints -------------------------------------------------------------------------------

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """As transformers saves (checkpoints call this too), without its \"Writing model
        shards\" bar under the training bar."""
        with weight_io_bars_off():
            super().save_model(output_dir, _internal_call)

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = (
                Path(self._get_output_dir(trial=trial))
                / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            self.replay_buffer.save(folder / REPLAY_FILE)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        # the main process reads the one saved copy and hands it to every rank (no shared disk
        # needed)
        loaded = None
        if self.accelerator.is_main_process and os.path.exists(
            os.path.join(checkpoint, REPLAY_FILE)
        ):
            loaded = ReplayBuffer.load(os.path.join(checkpoint, REPLAY_FILE))
        loaded = self.ranks.broadcast(loaded)
        if loaded is not None:
            self.replay_buffer.load_state_from(loaded)
            log.info(
                "restored the replay buffer from %s: %d trajectories",
                checkpoint,
                len(self.replay_buffer),
            )
