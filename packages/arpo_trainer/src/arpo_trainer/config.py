"""``ARPOConfig``: TRL's ``GRPOConfig`` plus the knobs of multi-turn desktop RL with success replay.

Every field carries ``help`` metadata, so ``arpo-train --help`` documents it. Defaults follow the
ARPO paper (arXiv 2505.16282) where it states a value; where the released code differs, the field's
help says so (see also ``configs/arpo_uitars_osworld.yaml``).

>>> cfg = ARPOConfig(output_dir="/tmp/arpo-doc", use_cpu=True, bf16=False, report_to="none",
...                  per_device_train_batch_size=4, num_generations=4)
>>> cfg.epsilon, cfg.epsilon_high, cfg.beta, cfg.loss_type
(0.2, 0.3, 0.0, 'grpo')
>>> cfg.screen_size
(1920, 1080)
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trl.trainer.grpo_config import GRPOConfig

VECTOR_BACKENDS = ("auto", "sync", "async")


@dataclass
class ARPOConfig(GRPOConfig):
    """Configuration of :class:`arpo_trainer.ARPOTrainer`.

    GRPO settings keep their TRL meaning (``num_generations`` = G rollouts per task,
    ``epsilon``/``epsilon_high`` = asymmetric clip, ``beta`` = KL weight, ``loss_type``,
    ``scale_rewards``, ``temperature``). ``max_completion_length`` is TRL's whole-completion
    length (only the ``dr_grpo`` loss reads it); each turn is capped by ``max_turn_tokens``.
    """

    # -- GRPO defaults that differ from TRL's, as in ARPO ------------------------------------
    epsilon_high: float | None = field(
        default=0.3,
        metadata={"help": "Upper clip ε_high of the ratio (ARPO 0.3; lower ε is `epsilon`, 0.2)."},
    )
    loss_type: str = field(
        default="grpo",
        metadata={
            "help": "TRL loss variant: grpo (per-trajectory token mean, as ARPO), dapo, dr_grpo, "
            "bnpo, "
            "cispo, sapo, luspo, vespo."
        },
    )
    # Multi-turn trajectories are long (up to 15 turns x thousands of tokens). A sequence-level
    # ratio is exp(sum of per-token log-ratios): small vLLM/trainer mismatches add up over
    # thousands of tokens, so TRL's default `sequence_mask` (cap 3) zeroes whole trajectories, and
    # `sequence_truncate` would cap them all at the same weight. Per-token ratios do not compound
    # with length; truncating (TIS) rather than masking keeps every token's gradient, only
    # bounding the weight of a token vLLM sampled with a different probability.
    vllm_importance_sampling_mode: str = field(
        default="token_truncate",
        metadata={
            "help": "vLLM/trainer mismatch correction: token_truncate (default here: per-token "
            "ratios "
            "clipped at vllm_importance_sampling_clip_max, which do not compound over long "
            "multi-turn trajectories), token_mask, sequence_truncate, sequence_mask "
            "(TRL's default)."
        },
    )
    remove_unused_columns: bool | None = field(
        default=False, metadata={"help": "Keep the `task_id` column (must stay False for ARPO)."}
    )

    # -- desktops and tasks -----------------------------------------------------------------------
    tasks: str = field(
        default="builtin",
        metadata={
            "help": "Where tasks come from: 'builtin', a task JSON file or directory, an OSWorld "
            "evaluation_examples meta file, or a task list written by `arpo-train select-tasks`."
        },
    )
    task_ids: list[str] | None = field(
        default=None,
        metadata={"help": "Train only on these task ids (default: every task in `tasks`)."},
    )
    provider: str = field(
        default="local",
        metadata={
            "help": "Desktop provider: 'local' (sandboxed Xvfb), 'docker', 'remote', 'fake'."
        },
    )
    action_set: str = field(
        default="uitars",
        metadata={
            "help": "Action syntax the policy writes: 'uitars', 'pyautogui' or 'computer_13'."
        },
    )
    action_set_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": "Extra arguments for the action set, as a dict or JSON string. For 'uitars' "
            "the "
            "coordinate frame (`max_pixels`) defaults to `image_max_pixels` so coordinates refer "
            "to the screenshot the model sees."
        },
    )
    screen_width: int = field(
        default=1920, metadata={"help": "Desktop width in pixels (ARPO 1920)."}
    )
    screen_height: int = field(
        default=1080, metadata={"help": "Desktop height in pixels (ARPO 1080)."}
    )
    settle: bool = field(
        default=True,
        metadata={
            "help": "Wait for the screen to stop changing after each action (else capture at once)."
        },
    )
    settle_max_s: float = field(
        default=3.0, metadata={"help": "Longest wait for the screen to settle, seconds."}
    )
    vector_env: str = field(
        default="auto",
        metadata={
            "help": "How the G desktops of a generation batch run: 'async' (one subprocess each, "
            "in "
            "parallel), 'sync' (in turn, in this process) or 'auto' (sync for the fake provider)."
        },
    )
    step_timeout_s: float | None = field(
        default=300.0,
        metadata={
            "help": "Seconds a desktop may take for one step or reset (async pool) before its "
            "episode is "
            "ended as an infrastructure error and its worker replaced."
        },
    )
    env_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "Extra keyword arguments for gym.make('OSWorld-v0', ...), dict or JSON."},
    )
    allow_unseparated_desktops: bool = field(
        default=False,
        metadata={
            "help": "Train on desktops whose agent is not separated from the judge "
            "(reset info['separated'] is False: a non-root host, judge_separation=False, a "
            "docker host user with the player's uid 1000 or an image from before separation). "
            "The policy can then forge its own scores; off by default."
        },
    )
    desktops: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": "Where the desktops come from (a YAML section or JSON object): {source: local} "
            "(default: `provider` on this machine), {source: docker}, {source: remote, "
            "urls: [...], "
            "token_file: ..., osworld_compat: false, reset_hook: 'shell command' | "
            "{http: URL}} (guests "
            "that already run; the hook runs before every episode's reset and its failure is an "
            "infrastructure error), or {source: ray, ray_address: auto, provider: local, "
            "resources: "
            "{osworld_desktop: 1}} (desktops as Ray actors). Optional num_desktops "
            "checks the total. "
            "See arpo_trainer.desktops."
        },
    )

    # -- the multi-turn episode -------------------------------------------------------------------
    max_turns: int = field(
        default=15,
        metadata={"help": "Actions per episode before it is truncated and scored (ARPO 15)."},
    )
    # -- asynchronous rollouts (issue 28; arpo_trainer.async_rollout) --------------------------
    rollout_mode: str = field(
        default="sync",
        metadata={
            "help": "'sync': lock-step rollouts, the paper's loop (the reference). 'async': each "
            "desktop plays on its own against a batching generator, the learner takes complete "
            "groups at most max_staleness policy versions old (arpo_trainer.async_rollout; "
            "benchmarks/bench_async_rollout.py). Its generator is transformers on a copy of the "
            "model, or the vLLM server (vllm_mode='server'); in one process or several "
            "(accelerate launch; not under ZeRO-3)."
        },
    )
    max_staleness: int = field(
        default=1,
        metadata={
            "help": "async: oldest policy version a trained group may come from, in "
            "learner steps behind (0 = on-policy); with async_version_gate no group is played "
            "that would be older, without it older groups are dropped and counted."
        },
    )
    async_version_gate: bool = field(
        default=True,
        metadata={
            "help": "async: the version gate (bounded staleness by admission): a group's "
            "episodes start only once the generator is at most max_staleness versions behind "
            "the learner step that will take it, and steps take groups in the order they were "
            "submitted, so no played group is dropped as stale. False: groups start at once, "
            "steps take whichever complete groups came first and drop too stale ones."
        },
    )
    weight_sync_every: int = field(
        default=1,
        metadata={
            "help": "async: push the learner's weights to the generator every k learner steps."
        },
    )
    async_desktops: int = field(
        default=0,
        metadata={
            "help": "async: desktops per process, each playing whole episodes on its own (0: one "
            "per row of a generation batch, as sync mode). More desktops than rows keep the "
            "learner fed while episodes of uneven length finish; the generator batches their turns."
        },
    )
    async_requests_in_flight: int = field(
        default=0,
        metadata={
            "help": "async: generation batches out at once. 0 (default): one per desktop of the "
            "process with vllm_mode='server', 1 otherwise. 1: a batch waits for the answer to "
            "the one before it. More (vLLM server only): the turns that arrive while earlier "
            "batches are being generated go out at once, and the server batches them into its "
            "running batch (continuous batching); a weight push waits for every batch in "
            "flight. The transformers generator (one model copy) takes 1. Measured in "
            "docs/async.md: with one in flight the async loop is slower than sync."
        },
    )
    vllm_weight_transfer: str = field(
        default="nccl",
        metadata={
            "help": "vllm_mode='server': how the learner's weights reach the server. 'nccl': TRL's "
            "push (NCCL weight-transfer engine; needs CUDA and a server started with "
            "--weight-transfer-config). 'disk': a safetensors file under output_dir that the "
            "server loads through arpo_trainer.vllm_server.DiskWeightLoader (start the server "
            "with --worker-extension-cls arpo_trainer.vllm_server.DiskWeightLoader; a shared "
            "filesystem; works on vLLM's CPU build, which has no NCCL)."
        },
    )
    simulated_generation_latency_s: float = field(
        default=0.0,
        metadata={
            "help": "Benchmarks only: seconds added to every generation call of the "
            "transformers generator, in both rollout modes (one lock-step turn of the batch in "
            "sync mode, one batch of the async generator; evaluation and select-tasks rollouts "
            "too, oracle warm starts not), so that a CPU run with a tiny model "
            "stands in for a large model's per-turn time on a GPU (about the same for any batch "
            "size). Figures measured with it are simulated (logged as "
            "rollout/simulated_latency_s). 0: off. Not with use_vllm, whose latency is real."
        },
    )
    simulated_generation_concurrent: bool = field(
        default=False,
        metadata={
            "help": "Benchmarks only, async: pay simulated_generation_latency_s per request, "
            "concurrently, as on a continuous-batching vLLM server (the GPU setting, one "
            "request in flight per desktop): each answer arrives that long after its batch was "
            "computed, without holding the generator for the next batch. Off: each batch pays it "
            "in turn (one model copy answering one call at a time). A weight sync does not wait "
            "for answers still in their simulated delay (a server's push would wait for them)."
        },
    )
    simulated_learner_latency_per_turn_s: float = field(
        default=0.0,
        metadata={
            "help": "Benchmarks only: seconds of learner time per turn trained on (fresh and "
            "replayed trajectories, times num_iterations), slept on the learner's thread after "
            "each real training step that uses the batch, in both rollout modes, so that the "
            "tiny model's learner stands in for a large model's update; async rollouts go on "
            "meanwhile, as they would beside a real update. Each process sleeps for its own "
            "rows, as a data-parallel learner would: docs/async.md puts a 7B update at 0.89 s "
            "of one GPU per turn at the plan's estimated speed, so with P processes "
            "0.89 * P / n stands for n GPUs. Logged per generation batch as "
            "train/simulated_learner_s (the slowest process's). 0: off."
        },
    )
    # -- end of asynchronous rollouts ---------------------------------------------------------
    max_history_images: int = field(
        default=15,
        metadata={
            "help": "Screenshots kept in the context (the latest ones; ARPO 15). Older ones "
            "become a "
            "short text marker. With max_history_images >= max_turns every sampled turn is "
            "trained in exactly the context it was sampled in."
        },
    )
    max_turn_tokens: int = field(
        default=512, metadata={"help": "New tokens per turn (ARPO's max_response_length is 8192)."}
    )
    image_max_pixels: int | None = field(
        default=None,
        metadata={
            "help": "Screenshots are resized to at most this many pixels before the processor "
            "sees them "
            "(ARPO 2116800 = 1092x1932 for 1080p). Default: the image processor's own limit."
        },
    )
    feature_cache_mb: int = field(
        default=2048,
        metadata={
            "help": "Host memory (MB, per process) for screenshots already turned into the vision "
            "tower's uint8 patches (every turn re-encodes a context with all its screenshots; "
            "least recently used out first). Enough for one rollout's screenshots avoids "
            "re-processing: desktops per process x kept screenshots x ~6.3 MB at 1092x1932 "
            "(16 x 15 x 6.3 = 1.5 GB in the paper's recipe)."
        },
    )
    system_prompt: str = field(
        default="You are a helpful assistant.",
        metadata={"help": "System message of every episode."},
    )
    prompt_template: str | None = field(
        default=None,
        metadata={
            "help": "First user message; `{instruction}` is replaced by the task. Default: the "
            "action "
            "set's own prompt (`describe()`)."
        },
    )

    prompt_template_file: str | None = field(
        default=None,
        metadata={
            "help": "Read `prompt_template` from this file: run the exact prompt your model was "
            "trained "
            "with (e.g. UI-TARS-1.5's computer-use prompt from its own repository; the "
            "project ships "
            "no third-party prompt text). `{instruction}` is replaced by the task; any other "
            "placeholder must be filled in the file."
        },
    )
    # -- reward ------------------------------------------------------------------------------------
    format_penalty: float = field(
        default=-1.0,
        metadata={
            "help": "Added to the evaluator score when any turn could not be parsed. Paper: -1; "
            "released code: -0.5 (format reward -1 weighted 0.5)."
        },
    )
    end_on_format_error: bool = field(
        default=True,
        metadata={
            "help": "End the episode at the first unparsable turn (ARPO: the action becomes DONE "
            "and the "
            "desktop is scored). False: the turn does nothing and the episode goes on."
        },
    )

    action_grammar: bool = field(
        default=False,
        metadata={
            "help": "Grammar-constrained decoding (arpo_trainer.grammar): every sampled turn is "
            "one well-formed UI-TARS call ('Action: click(...)' etc., no 'Thought:') with its "
            "points inside the model's image frame, and the learner scores every action token "
            "under the same constraint. For a policy that cannot know the syntax otherwise (the "
            "randomly initialised tiny model); off by default for real models, whose thoughts "
            "the grammar does not allow. Needs action_set 'uitars' and the transformers "
            "generation path (not use_vllm)."
        },
    )

    advantage_clip: float | None = field(
        default=None,
        metadata={
            "help": "Clip every advantage to [-advantage_clip, advantage_clip] after scaling "
            "(default: "
            "no clip, as TRL). With scale_rewards='none' advantages are bounded by the "
            "reward range "
            "anyway; with 'group' a near-converged group like [0.5, 1, 1, 1] gives the odd one out "
            "A = -1.5, and a clip bounds what one such group can do to the policy."
        },
    )

    # -- success replay ----------------------------------------------------------------------------
    replay: bool = field(
        default=True, metadata={"help": "Enable the per-task success replay buffer (ARPO)."}
    )
    replay_capacity: int = field(
        default=8, metadata={"help": "Successful trajectories kept per task, FIFO (ARPO 8)."}
    )
    replay_success_threshold: float = field(
        default=0.1,
        metadata={
            "help": "A trajectory is stored when its evaluator score exceeds this (ARPO 0.1)."
        },
    )
    replay_fail_std: float = field(
        default=0.05,
        metadata={
            "help": "A group counts as all-failure when the std of its scores is below this..."
        },
    )
    replay_fail_mean: float = field(
        default=0.2,
        metadata={"help": "...and the mean of its scores is below this (ARPO 0.05 / 0.2)."},
    )
    replay_warm_start: str | None = field(
        default=None,
        metadata={
            "help": "Seed the buffer before training: 'oracle' executes each task's built-in "
            "oracle on a "
            "desktop, rendered in the policy's action syntax, and stores it if it succeeds."
        },
    )

    # -- logging -----------------------------------------------------------------------------------
    rollout_log: str | None = field(
        default=None,
        metadata={
            "help": "Append one JSON line per finished trajectory (task, score, turns, actions) "
            "to this "
            "file; relative paths are under output_dir."
        },
    )

    def __post_init__(self) -> None:
        # transformers 5 renamed gradient_checkpointing to activation_checkpointing and warns
        # (FutureWarning) whenever only the old name is set; TRL's base config sets it (default
        # True), so every GRPOConfig warned. Translate it here, at the cause: the YAML key
        # `gradient_checkpointing` keeps working, and transformers mirrors the old name back.
        for old, new in (
            ("gradient_checkpointing", "activation_checkpointing"),
            ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
        ):
            if getattr(self, new, None) is None and getattr(self, old, None) is not None:
                setattr(self, new, getattr(self, old))
        super().__post_init__()
        if self.prompt_template_file:
            if self.prompt_template is not None:
                raise ValueError("set prompt_template or prompt_template_file, not both")
            path = Path(self.prompt_template_file).expanduser()
            if not path.is_file():
                raise FileNotFoundError(
                    f"prompt_template_file {path} does not exist: save the prompt your model was "
                    "trained with there (with an `{instruction}` slot for the task)"
                )
            self.prompt_template = path.read_text()
            if not self.prompt_template.strip():
                raise ValueError(f"prompt_template_file {path} is empty")
        self.action_set_kwargs = _as_dict(self.action_set_kwargs, "action_set_kwargs")
        self.env_kwargs = _as_dict(self.env_kwargs, "env_kwargs")
        self.desktops = _as_dict(self.desktops, "desktops")
        from arpo_trainer.desktops import parse_desktop_source

        if self.desktops:
            self.desktop_source = parse_desktop_source(self.desktops)
            implied = self.desktop_source.provider
            if self.provider not in ("local", implied):
                raise ValueError(
                    f"provider {self.provider!r} contradicts desktops.source "
                    f"{self.desktop_source.source!r} (whose desktops run {implied!r}): "
                    "set one of them"
                )
            self.provider = implied
        else:
            self.desktop_source = parse_desktop_source(None, self.provider)
        if self.vector_env not in VECTOR_BACKENDS:
            raise ValueError(
                f"vector_env must be one of {VECTOR_BACKENDS}, got {self.vector_env!r}"
            )
        if self.rollout_mode not in ("sync", "async"):  # issue 28
            raise ValueError(f"rollout_mode must be 'sync' or 'async', got {self.rollout_mode!r}")
        if self.action_grammar and (self.use_vllm or self.action_set != "uitars"):
            raise ValueError(
                "action_grammar constrains the transformers generation path to the UI-TARS "
                f"grammar; got use_vllm={self.use_vllm}, action_set={self.action_set!r}: use "
                "use_vllm=False and action_set='uitars', or action_grammar=False"
            )
        if self.rollout_mode == "async" and self.use_vllm and self.vllm_mode != "server":
            raise ValueError(
                "rollout_mode='async' with vLLM needs vllm_mode='server': a colocated engine "
                "shares the learner's device and sleeps while the learner steps, so it cannot "
                "sample while the learner trains; use vllm_mode='server' or use_vllm=False"
            )
        if self.vllm_weight_transfer not in ("nccl", "disk"):
            raise ValueError(
                f"vllm_weight_transfer must be 'nccl' or 'disk', got {self.vllm_weight_transfer!r}"
            )
        if self.vllm_weight_transfer == "disk" and not (
            self.use_vllm and self.vllm_mode == "server"
        ):
            raise ValueError(
                "vllm_weight_transfer='disk' pushes weights to a vLLM server: it needs "
                "use_vllm=True and vllm_mode='server'"
            )
        if self.max_staleness < 0 or self.weight_sync_every < 1:
            raise ValueError(
                f"max_staleness must be >= 0 and weight_sync_every >= 1, got "
                f"{self.max_staleness} and {self.weight_sync_every}"
            )
        if self.async_desktops < 0:
            raise ValueError(
                f"async_desktops must be >= 0 (0: one per row), got {self.async_desktops}"
            )
        if self.async_desktops and self.rollout_mode != "async":
            raise ValueError(
                f"async_desktops={self.async_desktops} is for rollout_mode='async'; sync mode "
                "plays one desktop per row of the generation batch"
            )
        lat = self.simulated_generation_latency_s
        for name in ("simulated_generation_latency_s", "simulated_learner_latency_per_turn_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (
                isinstance(value, (int, float)) and math.isfinite(value) and value >= 0
            ):
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
        if lat and self.use_vllm:
            raise ValueError(
                "simulated_generation_latency_s stands in for a large model's latency on the "
                "transformers generator; with use_vllm the generation latency is real: set it to 0"
            )
        if not isinstance(self.simulated_generation_concurrent, bool):
            raise ValueError(
                f"simulated_generation_concurrent must be true or false, got "
                f"{self.simulated_generation_concurrent!r}"
            )
        if self.simulated_generation_concurrent and not (lat and self.rollout_mode == "async"):
            raise ValueError(
                "simulated_generation_concurrent pays simulated_generation_latency_s per "
                "request of the async generator: it needs rollout_mode='async' and "
                "simulated_generation_latency_s > 0"
            )
        if self.async_requests_in_flight < 0:
            raise ValueError(
                f"async_requests_in_flight must be >= 0 (0: one per desktop with a vLLM server, "
                f"else 1), got {self.async_requests_in_flight}"
            )
        if self.async_requests_in_flight > 1 and not (
            self.rollout_mode == "async" and self.use_vllm and self.vllm_mode == "server"
        ):
            raise ValueError(
                f"async_requests_in_flight={self.async_requests_in_flight} sends concurrent "
                "requests to a vLLM server: it needs rollout_mode='async', use_vllm=True and "
                "vllm_mode='server' (the transformers generator is one model copy, which "
                "answers one batch at a time)"
            )
        if self.rollout_mode == "async" and self.weight_sync_every > self.max_staleness + 1:
            # between two syncs every episode is sampled with the last synced version, up to
            # weight_sync_every - 1 steps behind the learner: with the version gate the groups of
            # step v could then never start (their gate is v - max_staleness), without it they
            # would all be dropped; either way the learner would wait for ever
            raise ValueError(
                f"weight_sync_every={self.weight_sync_every} needs max_staleness >= "
                f"{self.weight_sync_every - 1} (got {self.max_staleness}): groups played between "
                "two weight syncs would all be too stale to train on"
            )
        if (
            self.rollout_mode == "async"
            and self.max_staleness > 0
            and not self.vllm_importance_sampling_correction
        ):
            warnings.warn(
                f"rollout_mode='async' with max_staleness={self.max_staleness} and "
                "vllm_importance_sampling_correction=False: groups sampled by a policy up to "
                f"{self.max_staleness} version(s) behind the learner are trained as if on-policy "
                "(ratio 1); turn the correction on unless that is the ablation you want",
                UserWarning,
                stacklevel=2,
            )
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.max_history_images < 1:
            raise ValueError(
                f"max_history_images must be at least 1, got {self.max_history_images}"
            )
        if self.feature_cache_mb < 0:
            raise ValueError(
                f"feature_cache_mb must be >= 0 (0: no cache), got {self.feature_cache_mb}"
            )
        if self.advantage_clip is not None and self.advantage_clip <= 0:
            raise ValueError(f"advantage_clip must be positive or None, got {self.advantage_clip}")
        if self.replay_capacity < 1:
            raise ValueError(f"replay_capacity must be at least 1, got {self.replay_capacity}")
        if self.replay_warm_start not in (None, "oracle"):
            raise ValueError(
                f"replay_warm_start must be None or 'oracle', got {self.replay_warm_start!r}"
            )
        per_process = self.per_device_train_batch_size * self.generation_steps
        if per_process % self.group_size != 0:
            raise ValueError(
                f"each process's generation batch ({per_process} = per_device_train_batch_size x "
                "steps_per_generation) must hold whole groups of "
                f"num_generations={self.num_generations}, so "
                "that replay sees every group on one process; adjust per_device_train_batch_size"
            )

    @property
    def screen_size(self) -> tuple[int, int]:
        """``(width, height)`` of every desktop."""
        return (self.screen_width, self.screen_height)

    @property
    def group_size(self) -> int:
        """``num_generations`` (G), which TRL types ``int | None`` and resolves in
        ``__post_init__``."""
        return _resolved(self.num_generations, "num_generations")

    @property
    def generation_steps(self) -> int:
        """``steps_per_generation``, which TRL types ``int | None`` and resolves in
        ``__post_init__`` (from ``generation_batch_size`` or ``gradient_accumulation_steps``)."""
        return _resolved(self.steps_per_generation, "steps_per_generation")

    @property
    def desktops_per_process(self) -> int:
        """How many desktops each process plays on: one per row of its generation batch, or
        ``async_desktops`` in async mode when set."""
        return self.async_desktops or self.per_device_train_batch_size * self.generation_steps

    @property
    def run_dir(self) -> Path:
        """``output_dir`` (transformers types it optional and defaults it in ``__post_init__``)."""
        if self.output_dir is None:
            raise ValueError("output_dir is unset: it is resolved when the config is constructed")
        return Path(self.output_dir)

    @property
    def checkpointing_kwargs(self) -> dict[str, Any] | None:
        """``gradient_checkpointing_kwargs`` as a dict (or None), as TRL's helpers take it."""
        value = self.gradient_checkpointing_kwargs
        return None if value is None else _as_dict(value, "gradient_checkpointing_kwargs")

    @property
    def action_set_options(self) -> dict[str, Any]:
        """``action_set_kwargs`` as the dict ``__post_init__`` parsed it into."""
        return _as_dict(self.action_set_kwargs, "action_set_kwargs")

    @property
    def env_options(self) -> dict[str, Any]:
        """``env_kwargs`` as the dict ``__post_init__`` parsed it into."""
        return _as_dict(self.env_kwargs, "env_kwargs")


def _resolved(value: int | None, name: str) -> int:
    if value is None:
        raise ValueError(f"{name} is unset: it is resolved when the config is constructed")
    return value


def _as_dict(value: dict[str, Any] | str | None, name: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return dict(value)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{name} must be a dict or a JSON object string, got {value!r}: {e}"
        ) from e
    if not isinstance(parsed, dict):
        raise ValueError(f"{name} must be a JSON object, got {value!r}")
    return parsed
