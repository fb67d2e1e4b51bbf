"""1,000 hostile or garbage agent outputs against a live desktop: nothing runs, the env survives.

The parser-level test (test_actions_hostile.py) proves with audit hooks that parsing never
executes anything on the host. Here the same corpus goes through ``env.step`` on a real
sandboxed desktop. Every code-execution payload in it, if anything ever ran it, would create a
file in a canary directory that exists both on the host and inside the desktop (whose /tmp is
private). Both must stay empty; every step must come back as a normal step (a parsed action or
an ``action_error``, never an infrastructure error); afterwards the same desktop still solves a
task.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import gymnasium as gym
import pytest
from hostile_corpus import hostile_corpus
from osworld_gym.settle import SettleConfig

pytestmark = pytest.mark.desktop


def sandbox_canary_files(env, canary: str) -> list[str]:
    client = env.unwrapped.provider.start()
    out = client.execute(["bash", "-c", f"mkdir -p {canary} && ls -A {canary}"])
    assert out["returncode"] == 0, out
    return out["output"].split()


def test_hostile_actions_execute_nothing_and_the_env_keeps_working():
    canary = f"/tmp/osworld-gym-canary-{uuid.uuid4().hex}"
    host_canary = Path(canary)
    host_canary.mkdir()
    corpus = hostile_corpus(1000, seed=1, canary_dir=canary)
    assert len(corpus) == 1000 and any(canary in s for s in corpus)
    env = gym.make(
        "OSWorld-v0", provider="local", tasks="builtin", max_steps=10**6, settle=None, wait_s=0.0
    )
    try:
        env.reset(options={"task": "os-mkdir-001"})
        assert sandbox_canary_files(env, canary) == []
        rejected = 0
        for i, text in enumerate(corpus):
            _, _, terminated, truncated, info = env.step(text)
            assert info["infra_error"] is None, f"string {i} broke the desktop: {text[:200]!r}"
            rejected += bool(info["action_error"])
            if terminated or truncated:
                assert sandbox_canary_files(env, canary) == [], (
                    f"string {i} ran code in the desktop"
                )
                env.reset(options={"task": "os-mkdir-001"})
        assert sandbox_canary_files(env, canary) == [], "a payload ran code in the desktop"
        assert not any(host_canary.iterdir()), "a payload ran code on the host"
        print(
            f"hostile corpus: {rejected} rejected with an action_error, {1000 - rejected} "
            "parsed into validated primitives or WAIT/DONE/FAIL"
        )
        assert rejected > 600

        # the desktop is still fully usable: the oracle still solves a task
        env.unwrapped.settle = SettleConfig()
        task = env.unwrapped.tasks["os-mkdir-001"]
        env.reset(options={"task": task.id})
        for action in [*task.oracle, "DONE"]:
            _, reward, terminated, truncated, info = env.step(action)
        assert terminated and reward == 1.0
    finally:
        env.close()
        for f in host_canary.iterdir():
            f.unlink()
        host_canary.rmdir()
