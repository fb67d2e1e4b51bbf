"""Rollout benchmark (issue 28): the synchronous lock-step loop against the asynchronous one, side
by side in one run, on real local desktops with the tiny model.

Both modes play the same groups (same tasks, same group size, same episode lengths) on the same
number of desktops, and run the same learner between steps; what differs is only the loop:

* **sync**: :class:`~arpo_trainer.rollout.Collector` (what ``arpo-train`` runs today): one step =
  reset all desktops, lock-step turns until every episode ended, then the learner step; the
  desktops and the generator wait for the learner and for the slowest episode;
* **async**: :mod:`arpo_trainer.async_rollout`: each desktop plays whole episodes on its own thread
  against a batching generation service, the learner takes complete groups as they arrive
  (``max_staleness`` versions old at most), weights go to the generator every step.

Conditions that are *simulated*, and stated in the table's header:

* ``--gen-latency-s``: added to every generate call (the tiny model answers in milliseconds; a 7B
  model on a GPU needs on the order of 0.5-2 s per turn, nearly independent of batch size);
* ``--learn-s``: the learner step is a sleep of this length (a stand-in for the optimizer step,
  which is not part of what is measured here: the rollout loop is);
* episode lengths: the tiny model's text is sampled for real (its ids and log-probs are kept) but
  the *action sent* follows a script per (task, group member): ``length - 1`` clicks then DONE, with
  lengths spread from 1 to ``max_turns``, as a real policy's uneven episodes are. Desktop work
  (resets, clicks, settles, scoring) is real.

Measured from timestamps the rollout code records (:class:`~arpo_trainer.async_rollout.Timeline`):
desktop utilisation = desktop-seconds inside a reset, an action, its settle or scoring (each
desktop's own ``info["timings"]``) / (desktops x wall time); generator idle = share of wall time
with no generate call running; learner idle = share with no learner step running.

    uv run python benchmarks/bench_async_rollout.py [--desktops 4] [--groups 8] \
        [--gen-latency-s 0.5] [--learn-s 2.0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TASKS = ["os-mkdir-001", "os-rename-001", "os-copy-001", "os-count-lines-001"]
LENGTHS = [1, 6, 2, 4, 1, 3, 5, 2]
CLICK_CANDIDATES = [
    "Thought: look\nAction: click(start_box='(70,42)')",
    "Thought: look\nAction: click(start_box='<|box_start|>(70,42)<|box_end|>')",
]


def episode_length(task_index: int, member: int, max_turns: int) -> int:
    return min(max_turns, LENGTHS[(3 * task_index + 5 * member) % len(LENGTHS)])


class ScriptedLengths:
    """Samples with the real policy, then sends a scripted action so that episode lengths are
    uneven and the same in both modes (see the module docstring)."""

    def __init__(self, policy: Any, click: str, done: str, max_turns: int):
        self.policy, self.click, self.done, self.max_turns = policy, click, done, max_turns
        self.key_of: dict[int, tuple[int, int]] = {}  # row -> (task index, member)
        self.lookup: Callable[[int], tuple[int, int]] | None = None  # async: uid -> key
        self.turn: dict[int, int] = {}
        self.lock = threading.Lock()

    def sample(self, contexts, rows):
        from arpo_trainer.generation import TurnSample

        out = self.policy.sample(contexts, rows)
        scripted = []
        with self.lock:
            for r, s in zip(rows, out, strict=True):
                key = self.lookup(r) if self.lookup else self.key_of[r]
                k = self.turn.get(r, 0)
                self.turn[r] = k + 1
                text = self.done if k + 1 >= episode_length(*key, self.max_turns) else self.click
                scripted.append(TurnSample(ids=s.ids, logps=s.logps, text=text))
        return scripted


def build(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    import torch
    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.envspec import env_kwargs, make_encoder, make_policy_action_set
    from arpo_trainer.generation import TransformersPolicy, turn_generation_config
    from arpo_trainer.tasks import resolve_tasks
    from arpo_trainer.tiny import build_tiny_vlm
    from osworld_gym.episodes import done_text

    torch.set_num_threads(1)
    cfg = ARPOConfig(
        output_dir=tmp,
        use_cpu=True,
        bf16=False,
        report_to="none",
        provider="local",
        settle=True,
        settle_max_s=1.0,
        vector_env="async",
        screen_width=640,
        screen_height=360,
        max_turns=args.max_turns,
        max_turn_tokens=8,
        end_on_format_error=False,
        task_ids=TASKS,
        per_device_train_batch_size=args.desktops,
        num_generations=args.group_size,
    )
    vlm = build_tiny_vlm(seed=0)
    encoder = make_encoder(cfg, vlm.processor)
    action_set = make_policy_action_set(cfg, encoder)
    click = None
    for c in CLICK_CANDIDATES:
        try:
            action_set.parse(c)
            click = c
            break
        except Exception as e:  # noqa: BLE001 - try the next spelling
            print(f"{c!r}: {e}")
    if click is None:
        raise SystemExit(f"none of {CLICK_CANDIDATES} parses in {cfg.action_set}")
    gen = TransformersPolicy(
        vlm.model, encoder, turn_generation_config(encoder, max_new_tokens=cfg.max_turn_tokens)
    )
    tasks = resolve_tasks(cfg.tasks, TASKS, provider="local")
    return dict(
        cfg=cfg,
        encoder=encoder,
        action_set=action_set,
        env=env_kwargs(cfg, encoder),
        policy=gen,
        click=click,
        done=done_text(action_set),
        tasks=[tasks[t] for t in TASKS],
    )


def run_sync(b: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    from arpo_trainer.async_rollout import InstrumentedPolicy, InstrumentedPool, Timeline
    from arpo_trainer.desktops import DesktopPool
    from arpo_trainer.rollout import Collector

    tl = Timeline()
    G, n = args.group_size, args.desktops
    per_step = n // G
    pool = InstrumentedPool(DesktopPool(n, b["env"], backend="async"), tl)
    scripted = ScriptedLengths(b["policy"], b["click"], b["done"], args.max_turns)
    policy = InstrumentedPolicy(scripted, tl, args.gen_latency_s)
    col = Collector(
        pool,  # pyright: ignore[reportArgumentType] - a DesktopPool's interface, instrumented
        b["encoder"],
        b["action_set"],
        max_turns=args.max_turns,
        end_on_format_error=False,
    )
    try:
        pool.pool.reset([b["tasks"][0]] * n)  # start the desktops outside the measured time
        tl.desktop_busy = 0.0
        start = time.monotonic()
        for step in range(args.groups // per_step):
            groups = [step * per_step + j for j in range(per_step)]
            tasks, keys = [], {}
            for g in groups:
                for m in range(G):
                    keys[len(tasks)] = (g % len(b["tasks"]), m)
                    tasks.append(b["tasks"][g % len(b["tasks"])])
            scripted.key_of, scripted.turn = keys, {}
            trajs = col.run(tasks, policy, step=step)
            for t in trajs:
                tl.add_episode(len(t.turns))
            t0 = time.monotonic()
            time.sleep(args.learn_s)
            tl.add_span("learn", t0, time.monotonic())
        end = time.monotonic()
    finally:
        pool.close()
    rep = tl.report(start, end, n)
    return rep


def run_async(b: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    from arpo_trainer import async_rollout as ar
    from arpo_trainer.desktops import DesktopPool

    tl = ar.Timeline()
    G, n = args.group_size, args.desktops
    per_step = n // G
    pools = [ar.InstrumentedPool(DesktopPool(1, b["env"], backend="async"), tl) for _ in range(n)]
    scripted = ScriptedLengths(b["policy"], b["click"], b["done"], args.max_turns)
    if args.latency_model == "per-call":
        gen = ar.BatchingGenerator(ar.InstrumentedPolicy(scripted, tl, args.gen_latency_s))
    else:  # a continuous-batching server: every request pays the latency, concurrently
        gen = ar.BatchingGenerator(
            ar.InstrumentedPolicy(scripted, tl), request_latency_s=args.gen_latency_s, timeline=tl
        )
    col = None
    try:
        warm = [threading.Thread(target=p.pool.reset, args=([b["tasks"][0]],)) for p in pools]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        tl.desktop_busy = 0.0
        col = ar.AsyncCollector(
            pools,
            b["encoder"],
            b["action_set"],
            gen,
            max_turns=args.max_turns,
            end_on_format_error=False,
            timeline=tl,
        )
        jobs = col.episode_of
        scripted.lookup = lambda uid: (TASKS.index(jobs[uid].task.id), jobs[uid].index)
        asm = ar.GroupAssembler(G, args.max_staleness)

        def task_of(g: int) -> Any:
            return b["tasks"][g % len(b["tasks"])]

        def learn(groups, version):
            time.sleep(args.learn_s)

        start = time.monotonic()
        steps = ar.run_async(
            col,
            asm,
            task_of,
            groups=args.groups,
            groups_per_step=per_step,
            learn=learn,
            weight_sync_every=args.weight_sync_every,
            prefetch_groups=args.prefetch_groups,
            timeline=tl,
        )
        end = time.monotonic()
    finally:
        if col is not None:
            col.close()
        gen.close()
        for p in pools:
            p.close()
    rep = tl.report(start, end, n)
    rep["learner_steps"] = float(steps)
    rep["dropped_stale"] = float(asm.stats.dropped_stale)
    rep["mean_batch"] = sum(gen.batch_sizes) / max(len(gen.batch_sizes), 1)
    return rep


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--desktops", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=2)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--gen-latency-s", type=float, default=0.5)
    ap.add_argument(
        "--latency-model",
        choices=["per-request", "per-call"],
        default="per-request",
        help="async generator: 'per-request' (continuous batching, as vLLM serves) or "
        "'per-call' (a batch must finish before the next starts). Sync is the same in both.",
    )
    ap.add_argument("--learn-s", type=float, default=2.0)
    ap.add_argument("--max-staleness", type=int, default=1)
    ap.add_argument(
        "--prefetch-groups",
        type=int,
        default=None,
        help="async: groups queued ahead of the learner (default 2 x groups per step)",
    )
    ap.add_argument("--weight-sync-every", type=int, default=1)
    ap.add_argument("--modes", default="sync,async")
    args = ap.parse_args()
    if args.desktops % args.group_size:
        raise SystemExit("--desktops must be a multiple of --group-size")
    with tempfile.TemporaryDirectory() as tmp:
        b = build(args, tmp)
        results = {}
        for mode in args.modes.split(","):
            results[mode] = (run_sync if mode == "sync" else run_async)(b, args)
            print(f"{mode}: {results[mode]}", flush=True)
    print(
        f"\n{args.desktops} local desktops, groups of {args.group_size}, {args.groups} groups, "
        f"max_turns {args.max_turns}; simulated: generate latency {args.gen_latency_s} s/call, "
        f"({args.latency_model}), learner step {args.learn_s} s; "
        f"scripted uneven lengths {LENGTHS}\n"
    )
    rows = [
        ("episodes/hour", "episodes_per_hour", "{:.0f}"),
        ("episodes", "episodes", "{:.0f}"),
        ("wall s", "wall_s", "{:.1f}"),
        ("desktop utilisation", "desktop_utilisation", "{:.1%}"),
        ("generator idle", "generator_idle", "{:.1%}"),
        ("learner idle", "learner_idle", "{:.1%}"),
    ]
    modes = list(results)
    print("| | " + " | ".join(modes) + " |")
    print("|---|" + "---:|" * len(modes))
    for label, key, fmt in rows:
        print(f"| {label} | " + " | ".join(fmt.format(results[m][key]) for m in modes) + " |")
    if "async" in results:
        a = results["async"]
        print(
            f"\nasync: {a['learner_steps']:.0f} learner steps, {a['dropped_stale']:.0f} groups "
            f"dropped as stale, mean generate batch {a['mean_batch']:.2f}"
        )


if __name__ == "__main__":
    main()
