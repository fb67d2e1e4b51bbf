"""Hostile agent output: every action set refuses it cleanly and nothing ever executes.

Each string of :func:`hostile_corpus.hostile_corpus` goes through every action set while an
audit hook records process spawning, ``exec``, ``ctypes``, sockets and file writes. A string
either parses into primitives that pass :func:`primitives.validate`, or raises
:class:`ActionError`; any other exception, any recorded event, or any file in the canary
directory fails the test.
"""

from __future__ import annotations

import gc
import time

import pytest
from hostile_corpus import hostile_corpus, hostile_dicts, record_dangerous_events
from osworld_gym.actions import ACTION_SETS, ParsedAction, make_action_set
from osworld_gym.errors import ActionError
from osworld_gym.protocol.primitives import validate

N_STRINGS = 1500


def _outcome(action_set, action) -> str | BaseException:
    try:
        parsed = action_set.parse(action)
    except ActionError as e:
        return f"error: {str(e)[:80]}"
    except BaseException as e:  # noqa: BLE001 - any other exception type is the failure we look for
        return e
    assert isinstance(parsed, ParsedAction)
    for p in parsed.primitives:
        assert validate(p) == p, f"{p!r} from {str(action)[:200]!r} does not re-validate"
    return "ok"


@pytest.fixture(scope="module")
def canary_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("canary")


@pytest.fixture(scope="module")
def corpus(canary_dir) -> list[str]:
    strings = hostile_corpus(N_STRINGS, seed=1234, canary_dir=canary_dir)
    assert len(strings) == N_STRINGS
    return strings


def test_corpus_is_deterministic_and_plants_canaries(canary_dir):
    a = hostile_corpus(1200, seed=7, canary_dir=canary_dir)
    assert a == hostile_corpus(1200, seed=7, canary_dir=canary_dir)
    assert a != hostile_corpus(1200, seed=8, canary_dir=canary_dir)
    assert len(a) == 1200 and sum(str(canary_dir) in s for s in a) > 500
    assert any(len(s) >= 1_000_000 for s in a)


@pytest.mark.parametrize("name", sorted(ACTION_SETS))
def test_hostile_strings_parse_or_raise_action_error_and_execute_nothing(name, corpus, canary_dir):
    action_set = make_action_set(name)
    outcomes: list[str | BaseException] = []
    # the parser's own CPU time (this thread's), not the wall clock: other processes on a loaded
    # machine stretch the wall clock, never the work the parser does
    t0 = time.thread_time()
    with record_dangerous_events() as events:
        for s in corpus:
            outcomes.append(_outcome(action_set, s))
    elapsed = time.thread_time() - t0

    crashes = [
        (s[:120], repr(o))
        for s, o in zip(corpus, outcomes, strict=True)
        if isinstance(o, BaseException)
    ]
    assert not crashes, (
        f"{len(crashes)} inputs raised something other than ActionError: {crashes[:5]}"
    )
    assert events == [], f"dangerous audit events while parsing: {events[:5]}"
    assert list(canary_dir.iterdir()) == [], "a canary payload was executed"
    accepted = sum(o == "ok" for o in outcomes)
    assert accepted < len(corpus) // 2, "the corpus is hostile: most of it must be refused"
    assert elapsed < 15, f"parsing {len(corpus)} hostile strings took {elapsed:.1f} s"


def test_hostile_objects_are_refused_by_computer_13_without_running_their_code(canary_dir):
    action_set = make_action_set("computer_13")
    with record_dangerous_events() as events:
        outcomes = [_outcome(action_set, d) for d in hostile_dicts()]
    crashes = [o for o in outcomes if isinstance(o, BaseException)]
    assert not crashes, crashes[:5]
    assert events == []
    assert all(o != "ok" for o in outcomes), "every hostile object is invalid"


@pytest.mark.parametrize("name", ["pyautogui", "uitars"])
def test_text_sets_refuse_non_text(name):
    action_set = make_action_set(name)
    for obj in hostile_dicts():
        assert isinstance(_outcome(action_set, obj), str)


def test_the_guards_would_notice_an_executed_payload(tmp_path):
    """The detectors work: executing corpus payloads creates canaries and records audit events."""
    from hostile_corpus import _payloads

    with record_dangerous_events() as events:
        for payload in _payloads(str(tmp_path), "live")[1:3]:  # open(..., 'w') and Path.touch()
            exec(payload)  # noqa: S102 - deliberately, to prove the guards see it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live-1", "live-2"]
    assert [e for e, _ in events].count("open") == 2 and "exec" in {e for e, _ in events}
    with record_dangerous_events() as events:
        (tmp_path / "live-1").read_text()
    assert events == []


@pytest.mark.parametrize("name", sorted(ACTION_SETS))
def test_no_single_input_is_slow(name, corpus):
    """Linear-time parsing: no regex backtracking or parser blow-up on any one input."""
    action_set = make_action_set(name)

    def cpu_seconds(s: str) -> float:
        t0 = time.thread_time()
        _outcome(action_set, s)
        return time.thread_time() - t0

    # CPU time of this thread, the garbage collector held off: the parse's own work. A wall-clock
    # bound failed CI under load; so did this thread's CPU time once (0.25 s exceeded in the full
    # suite, where a collection of the whole suite's heap can land inside one parse). A blow-up
    # is deterministic and orders of magnitude above the bound, so an input over it is measured
    # twice more and judged by its fastest run: noise does not repeat, backtracking does.
    slowest = (0.0, "")
    gc.collect()
    gc.disable()
    try:
        for s in corpus:
            t = cpu_seconds(s)
            if t >= 0.05:
                t = min(t, cpu_seconds(s), cpu_seconds(s))
            slowest = max(slowest, (t, s[:60]))
    finally:
        gc.enable()
    assert slowest[0] < 0.25, f"{slowest[1]!r} took {slowest[0]:.2f} s of CPU"


def test_parser_bombs_become_action_errors():
    bombs = [
        "-" * 19_000 + "1",
        "not " * 4000 + "1",
        "a." * 9000 + "b",
        "(" * 5000,
        "[" * 60_000,
        '{"a":' * 12_000,
        "1+" * 9000 + "1",
    ]
    for name in ACTION_SETS:
        action_set = make_action_set(name)
        for b in bombs:
            with pytest.raises(ActionError):
                action_set.parse(b)
            with pytest.raises(ActionError):
                action_set.parse("Action: click(start_box=" + b[:15_000] + ")")


def test_parser_bombs_leave_pythons_parser_intact():
    """CPython 3.11.7 corrupts its AST recursion counter when a deep tree fails to build, after
    which innocent parses raise SystemError. Bombs must be refused before the parser sees them."""
    import ast

    from osworld_gym.actions import make_action_set

    action_set = make_action_set("pyautogui")
    for bomb in [
        "1" + "+1" * 5000,
        "-" * 19_000 + "1",
        "(" * 5000 + ")" * 5000,
        "pyautogui.click(" + "[" * 3000 + "]" * 3000 + ")",
        "a" + ".b" * 6000,
    ]:
        with pytest.raises(ActionError):
            action_set.parse(bomb)
    deep_but_fine = "x = " + "(" * 150 + "1" + ")" * 150  # 150 levels: well within CPython's limit
    ast.parse(deep_but_fine)
    assert action_set.parse("pyautogui.click(10, 20)").primitives
