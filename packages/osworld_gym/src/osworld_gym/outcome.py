"""An episode's outcome: whether it counts, and on disk OSWorld's ``result.txt`` and our
``infra_error.txt``.

:func:`counts` is the one rule every package applies (the environment's episode loop, the
trainer's trajectories, ``arpo-eval``'s records): an episode counts, in a success rate or a
gradient, only when the judge scored it and nothing of the infrastructure failed.

The files have one home too, with their rules, used by :class:`osworld_gym.RecordEpisode`,
:func:`osworld_gym.recording.summarize_results` and ``arpo-eval`` (runner, resume, reports):

* a **scored** episode has ``result.txt`` holding its score (OSWorld's ``show_result.py`` reads a
  file it cannot parse as 0.0: so do we), and no ``infra_error.txt``;
* an episode the judge could not score (an infrastructure error) has ``infra_error.txt`` holding
  the reason, and no ``result.txt``: it is left out of success rates, never counted as 0;
* a directory with neither is unfinished (a resume runs it again).

Standard library only; it sits below :mod:`osworld_gym.recording`.

>>> counts(0.0, None), counts(None, None), counts(1.0, "desktop died")
(True, False, False)
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> write_outcome(d, score=1.0); read_score(d), read_infra_error(d)
(1.0, None)
>>> write_outcome(d, infra_error="desktop died"); read_score(d), read_infra_error(d)
(None, 'desktop died')
"""

from __future__ import annotations

import os
from pathlib import Path

#: OSWorld's score file in an episode directory (``show_result.py`` reads it).
RESULT_FILE = "result.txt"
#: Why an episode could not be scored (ours; OSWorld's tools ignore it).
INFRA_ERROR_FILE = "infra_error.txt"


def counts(score: float | None, infra_error: str | None) -> bool:
    """Whether an episode counts: it has a score and no infrastructure error. A failure the agent
    caused is a score (0), so it counts; an episode the judge could not score, or whose desktop,
    evaluator or model server failed, never does, whatever score it carries."""
    return score is not None and infra_error is None


def write_outcome(
    episode_dir: str | os.PathLike[str],
    *,
    score: float | None = None,
    infra_error: str | None = None,
) -> None:
    """Record a scored episode (``score``) or an unscored one (``infra_error``), removing the
    other file so a directory never says both.

    Raises:
        ValueError: neither or both given.
    """
    if (score is None) == (infra_error is None):
        raise ValueError("give exactly one of score and infra_error")
    d = Path(episode_dir)
    result, marker = d / RESULT_FILE, d / INFRA_ERROR_FILE
    if infra_error is None:
        result.write_text(f"{score}\n")
        marker.unlink(missing_ok=True)
    else:
        result.unlink(missing_ok=True)
        marker.write_text(f"{infra_error}\n")


def is_scored(episode_dir: str | os.PathLike[str]) -> bool:
    """Whether the episode has a score (``result.txt``)."""
    return (Path(episode_dir) / RESULT_FILE).is_file()


def read_score(episode_dir: str | os.PathLike[str]) -> float | None:
    """The episode's score, ``None`` when unscored; an unparsable file is 0.0 (as OSWorld's
    ``show_result.py``)."""
    result = Path(episode_dir) / RESULT_FILE
    if not result.is_file():
        return None
    try:
        return float(result.read_text().strip())
    except ValueError:
        return 0.0


def read_infra_error(episode_dir: str | os.PathLike[str]) -> str | None:
    """The recorded infrastructure error, ``None`` when there is none."""
    marker = Path(episode_dir) / INFRA_ERROR_FILE
    return marker.read_text().strip() if marker.is_file() else None
