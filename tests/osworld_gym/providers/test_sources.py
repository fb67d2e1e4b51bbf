"""Where desktops come from (osworld_gym.providers.sources): the slot each desktop gets.

The section's parsing errors and the reset hooks run for real in
tests/arpo_trainer/test_trainer_desktops_config.py (through the trainer, which re-exports these
names); here: one episode per URL, the URL-count and duplicate checks, and how provider_kwargs
merge.
"""

from __future__ import annotations

import doctest
import pickle

import osworld_gym.providers.sources as sources
import pytest
from osworld_gym.providers.sources import HookedReset, ResetHook, parse_desktop_source

URLS = ["http://10.0.0.1:5000", "http://10.0.0.2:5000/", {"url": "http://10.0.0.3:5000",
        "token": "own", "reset_hook": {"http": "http://10.0.0.9/revert/3"}}]  # fmt: skip


def test_doctests():
    result = doctest.testmod(sources, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_each_desktop_gets_its_own_guest_and_index():
    source = parse_desktop_source(
        {"source": "remote", "token": "t", "reset_hook": "revert.sh", "urls": URLS,
         "start_timeout_s": 30}
    )  # fmt: skip
    slots = source.slots(2, first=1, provider_kwargs={"timeout": 9, "url": "http://ignored:1"})
    assert [s["provider"] for s in slots] == ["remote", "remote"]
    one, two = (s["provider_kwargs"] for s in slots)
    # the guest's URL (trailing slash dropped), token and hook win over the run's own kwargs
    assert one["url"] == "http://10.0.0.2:5000" and two["url"] == "http://10.0.0.3:5000"
    assert one["token"] == "t" and two["token"] == "own"
    assert one["timeout"] == two["timeout"] == 9 and one["start_timeout"] == 30
    assert one["reset"] == HookedReset(ResetHook(command="revert.sh"), 1)
    assert two["reset"] == HookedReset(ResetHook(http="http://10.0.0.9/revert/3"), 2)
    # a spawned worker or a Ray actor receives its slot pickled
    assert pickle.loads(pickle.dumps(two)) == two


def test_too_few_urls_and_a_url_listed_twice_are_refused():
    source = parse_desktop_source({"source": "remote", "token": "t", "urls": URLS})
    assert len(source.slots(3)) == 3
    with pytest.raises(ValueError, match=r"this run needs guests 0..3 of desktops.urls, "
                       r"which lists 3: add URLs or use fewer desktops"):  # fmt: skip
        source.slots(4)
    with pytest.raises(ValueError, match=r"process 1 needs guests 2..3 .* lower the batch"):
        source.slots(2, first=2, who="process 1", fewer="lower the batch")
    with pytest.raises(ValueError, match="lists http://10.0.0.1:5000 more than once"):
        parse_desktop_source(
            {"source": "remote", "token": "t", "urls": [*URLS, "http://10.0.0.1:5000/"]}
        )


def test_one_remote_guest_without_a_list_runs_one_desktop():
    source = parse_desktop_source(None, "remote")
    (slot,) = source.slots(1, provider_kwargs={"url": "http://g:1", "token": "t"})
    assert slot == {"provider": "remote", "provider_kwargs": {"url": "http://g:1", "token": "t"}}
    with pytest.raises(ValueError, match=r"2 desktops on one remote guest \(http://g:1\)"):
        source.slots(2, provider_kwargs={"url": "http://g:1", "token": "t"})


def test_local_docker_and_ray_slots_share_the_section_kwargs_under_the_runs():
    docker = parse_desktop_source(
        {"source": "docker", "provider_kwargs": {"image": "a", "memory": "2g"}}
    )
    slots = docker.slots(2, provider_kwargs={"image": "b"})
    assert slots == [{"provider": "docker", "provider_kwargs": {"image": "b", "memory": "2g"}}] * 2
    slots[0]["provider_kwargs"]["image"] = "c"  # each desktop has its own dict
    assert slots[1]["provider_kwargs"]["image"] == "b"
    ray = parse_desktop_source({"source": "ray", "provider": "fake"})
    assert ray.slots(1) == [{"provider": "fake", "provider_kwargs": {}}]
    assert parse_desktop_source(None).slots(1) == [{"provider": "local", "provider_kwargs": {}}]
    with pytest.raises(ValueError, match="at least one desktop"):
        ray.slots(0)
