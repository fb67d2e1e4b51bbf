"""Gymnasium's passive env checker, made safe for environments whose ``reset`` can fail.

``gym.make`` wraps every env in :class:`~gymnasium.wrappers.PassiveEnvChecker`, which checks the
first ``reset`` and then, on the first ``step``, compares that step's data with the data the
first reset returned. When that first reset *raised* (a desktop that did not come up), it has
no data to compare and the next ``step`` dies with a ``TypeError`` -- even after a later reset
succeeded. A desktop env must survive a failed reset, so ``OSWorld-v0`` is registered with this
subclass instead: a failed first reset leaves the reset check pending for the next one, and a
step with no successful reset to compare with is passed through unchecked (the env answers it
with a truncated transition carrying ``info["infra_error"]``).
"""

from __future__ import annotations

from typing import Any

from gymnasium.wrappers import PassiveEnvChecker


class ResetTolerantChecker(PassiveEnvChecker):
    """:class:`PassiveEnvChecker` that a raising ``reset`` does not break (module docstring)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        first = not self.checked_reset
        try:
            return super().reset(seed=seed, options=options)
        except BaseException:
            if first:
                self.checked_reset = False  # check the next reset instead
            raise

    def step(self, action: Any):
        if not self.checked_step and self._previous_data is None:
            return self.env.step(action)  # nothing to compare with: no reset has succeeded
        return super().step(action)


def make_env(**kwargs: Any) -> ResetTolerantChecker:
    """Entry point of ``OSWorld-v0``: an :class:`~osworld_gym.env.OSWorldEnv` in the checker."""
    from osworld_gym.env import OSWorldEnv

    return ResetTolerantChecker(OSWorldEnv(**kwargs))
