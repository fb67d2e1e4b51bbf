"""The trainer's ``desktops`` section: parsing, clear errors, ``--dry_run``, and the reset hooks.

Hooks run for real (a shell command; an HTTP call to a real server on loopback). The docker source
is checked here up to the plan (the image is the docker tests' business: building it costs
minutes); the remote and Ray sources also train for real in their own test files.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from arpo_trainer.config import ARPOConfig
from arpo_trainer.desktops import DesktopPool, DesktopSource, ResetHook, parse_desktop_source
from osworld_gym.errors import InfraError
from repo_paths import ROOT

DEMO = ROOT / "packages" / "arpo_trainer" / "configs" / "demo.yaml"
COMMON = dict(output_dir="/tmp/arpo-desktops-test", use_cpu=True, bf16=False, report_to="none",
              per_device_train_batch_size=2, num_generations=2)  # fmt: skip


#: What these tests plan: the demo's settings on four built-in tasks, one group of four desktops
#: (the demo itself trains the pixel family with two groups a step).
TASK_IDS = ["os-infeasible-001", "os-infeasible-002", "terminal-infeasible-001",
            "multi_apps-infeasible-001"]  # fmt: skip


def config_with(tmp_path: Path, desktops: dict, **extra) -> Path:
    cfg = yaml.safe_load(DEMO.read_text())
    # the tiny model built offline instead of the demo's checked-in base: these tests are about
    # desktops, not the policy
    cfg.update(
        desktops=desktops, output_dir=str(tmp_path / "run"), model_name_or_path="tiny",
        tasks="builtin", task_ids=TASK_IDS, per_device_train_batch_size=4, env_kwargs=None,
    )  # fmt: skip
    cfg.update(extra)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def arpo_train(*flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arpo_trainer.cli", *flags], capture_output=True, text=True,
        timeout=300, cwd=ROOT, env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})},
    )  # fmt: skip


def test_remote_urls_from_yaml_are_split_over_processes_and_shown_by_the_dry_run(tmp_path):
    urls = [f"http://10.0.0.{i}:5000" for i in range(1, 5)]
    path = config_with(tmp_path, {
        "source": "remote", "token": "secret", "reset_hook": "virsh snapshot-revert vm clean",
        "urls": urls[:3] + [{"url": urls[3], "osworld_compat": True,
                             "reset_hook": {"http": "http://10.0.0.9/revert/4"}}]})  # fmt: skip
    proc = arpo_train("--config", str(path), "--dry_run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "provider 'remote': 4 per process" in out
    assert "source 'remote': 4 guest URL(s), 4 used" in out
    assert f"process 0 desktop 0: {urls[0]} (our guest server), reset hook: command " in out
    assert (
        f"process 0 desktop 3: {urls[3]} (OSWorld guest), reset hook: POST http://10.0.0.9/revert/4"
        in out
    )
    assert "secret" not in out  # the token is not printed
    # two processes need 8 guests: the plan says so before anything starts
    proc = arpo_train("--config", str(path), "--dry_run", "--num_processes", "2")
    assert proc.returncode == 2
    assert (
        "desktops.urls lists 4 guest(s), but the run needs 8 (4 per process x 2 process(es))"
        in proc.stderr
    )


def test_docker_source_plans_with_its_provider_and_reports_a_missing_daemon(tmp_path):
    path = config_with(
        tmp_path, {"source": "docker", "provider_kwargs": {"image": "osworld-gym:test"}}
    )
    proc = arpo_train(
        "--config", str(path), "--dry_run", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"}
    )
    assert "provider 'docker': 4 per process" in proc.stdout
    assert (
        "source 'docker': 4 per process on this machine, provider_kwargs {'image': "
        "'osworld-gym:test'}"
    ) in proc.stdout
    # no daemon, so no image to read what it holds: the tasks are not counted, never assumed
    assert "not counted: what the desktops offer could not be read" in proc.stdout
    assert proc.returncode == 2
    assert "desktops (docker): cannot reach the Docker daemon" in proc.stderr
    assert "set DOCKER_HOST" in proc.stderr


@pytest.fixture(scope="module")
def ray_cluster():
    """A real one-node Ray cluster (this process is its head) with 8 desktop slots."""
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants

    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False
    ray.init(address="local", num_cpus=8, resources={"osworld_desktop": 8},
             include_dashboard=False,
             log_to_driver=False, object_store_memory=100 * 1024**2)  # fmt: skip
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_source_reads_each_desktop_node_and_checks_slots_and_num_desktops(
    tmp_path, ray_cluster
):
    path = config_with(
        tmp_path,
        {
            "source": "ray",
            "ray_address": ray_cluster,
            "num_desktops": 8,
            "resources": {"osworld_desktop": 1},
            "num_cpus": 1,
        },
        task_ids=["os-mkdir-001", "os-copy-001"],
    )
    proc = arpo_train("--config", str(path), "--dry_run", "--num_processes", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert (
        f"source 'ray': 4 actor(s) per process on {ray_cluster}, each running provider 'local'"
        in out
    )
    # the node itself said what its desktops offer (the probe ran there, as a Ray task)
    assert f"Ray cluster at {ray_cluster}: 1 desktop node(s)" in out
    assert "8 desktop slot(s), 8 CPUs" in out and "this machine (local sandbox)" in out
    assert "builtin: 2 supported on these desktops" in out
    proc = arpo_train("--config", str(path), "--dry_run", "--num_processes", "4")
    assert proc.returncode == 2
    assert "desktops.num_desktops is 8, but the run uses 16 desktops" in proc.stderr
    assert "the Ray cluster has 8 desktop slot(s)" in proc.stderr
    assert "but the run starts 16 desktops: run `ray start --head" in proc.stderr


def test_ray_source_without_a_cluster_says_how_to_start_one(tmp_path):
    path = config_with(
        tmp_path,
        {"source": "ray", "ray_address": "127.0.0.1:9", "resources": {"osworld_desktop": 1}},
        task_ids=["os-mkdir-001", "os-copy-001"],
    )
    proc = arpo_train("--config", str(path), "--dry_run")
    assert proc.returncode == 2
    assert "no Ray cluster at 127.0.0.1:9" in proc.stderr
    assert """ray start --head --resources='{"osworld_desktop": 4}'""" in proc.stderr


@pytest.mark.parametrize(("section", "message"), [
    ({"source": "cloud"},
     "desktops.source must be one of local, docker, remote, ray, fake, got 'cloud'"),
    ({"source": "ray", "urls": ["http://a:1"]}, "source 'ray' does not take 'urls'"),
    ({"source": "remote", "urls": []}, "desktops.urls must be a non-empty list"),
    ({"source": "remote", "urls": ["10.0.0.1:5000"], "token": "t"}, "must start with http:// or https://"),
    ({"source": "remote", "urls": ["http://a:1"]}, "our guest server needs its token"),
    ({"source": "remote", "urls": ["http://a:1", "http://a:1/"], "token": "t"}, "more than once"),
    ({"source": "remote", "urls": ["http://a:1"], "token": "t", "reset_hook": {"cmd": "x"}},
     "desktops.reset_hook: unknown key 'cmd'"),
    ({"source": "remote", "urls": [{"url": "http://a:1", "reset_hook": {"http": "ftp://h"}}],
      "osworld_compat": True}, "desktops.urls[0].reset_hook.http must start with http://"),
    ({"source": "ray", "provider": "remote"},
     "desktops.provider (what each Ray actor runs) must be one of"),
    ({"source": "ray", "num_desktops": 0}, "num_desktops must be a positive integer"),
])  # fmt: skip
def test_a_bad_desktops_section_is_a_clear_error(section, message):
    with pytest.raises(ValueError) as e:
        ARPOConfig(desktops=section, **COMMON)
    assert message in str(e.value)


def test_the_cli_reports_a_bad_section_in_one_line_and_a_contradicting_provider(tmp_path):
    path = config_with(tmp_path, {"source": "remote", "urls": ["http://a:1"], "tokn": "t"})
    proc = arpo_train("--config", str(path), "--dry_run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "arpo-train: desktops: source 'remote' does not take 'tokn'" in proc.stderr
    with pytest.raises(ValueError, match="provider 'docker' contradicts desktops.source 'ray'"):
        ARPOConfig(provider="docker", desktops={"source": "ray"}, **COMMON)
    # JSON on the command line works as YAML does
    cfg = ARPOConfig(desktops='{"source": "ray", "provider": "fake"}', **COMMON)
    assert cfg.provider == "fake" and cfg.desktop_source.ray_provider == "fake"


def test_a_pool_needs_enough_urls_for_its_process():
    source = parse_desktop_source(
        {
            "source": "remote",
            "token": "t",
            "urls": ["http://127.0.0.1:9", "http://127.0.0.1:10", "http://127.0.0.1:11"],
        }
    )
    with pytest.raises(
        ValueError, match=r"process 1 needs guests 2..3 of desktops.urls, which lists 3"
    ):
        DesktopPool(2, {"settle": None}, backend="sync", source=source, rank=1)


def test_a_command_hook_sees_its_desktop_and_its_failure_is_an_infra_error(tmp_path):
    out = tmp_path / "seen"
    ResetHook(command=f'echo "$OSWORLD_DESKTOP_INDEX $OSWORLD_DESKTOP_URL" > {out}').run(
        "http://g:1", 3
    )
    assert out.read_text() == "3 http://g:1\n"
    with pytest.raises(InfraError, match=r"exited with status 7: no snapshot"):
        ResetHook(command="echo no snapshot >&2; exit 7").run("http://g:1", 0)
    with pytest.raises(InfraError, match="did not finish within 0.5 s"):
        ResetHook(command="sleep 30", timeout_s=0.5).run("http://g:1", 0)


def test_an_http_hook_calls_the_url_and_a_non_2xx_answer_is_an_infra_error():
    calls: list[tuple[str, str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            calls.append((self.command, self.path, self.headers["X-OSWorld-Desktop-Url"]))
            self.send_response(200 if self.path == "/revert/ok" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        ResetHook(http=f"{base}/revert/ok").run("http://g:1", 0)
        with pytest.raises(InfraError, match=r"answered HTTP 503"):
            ResetHook(http=f"{base}/revert/busy").run("http://g:2", 1)
    finally:
        server.shutdown()
        server.server_close()
    assert calls == [("POST", "/revert/ok", "http://g:1"), ("POST", "/revert/busy", "http://g:2")]
    with pytest.raises(InfraError, match="failed"):  # nobody listens there any more
        ResetHook(http=f"{base}/revert/ok", timeout_s=5).run("http://g:1", 0)


def test_the_async_loops_one_desktop_pools_take_the_processs_guests_each_once():
    # one pool per desktop (rollout_mode: async) must take the guests one pool of n would take,
    # not guest 0 of the list n times
    source = parse_desktop_source(
        {
            "source": "remote",
            "token": "t",
            "urls": [f"http://127.0.0.1:{p}" for p in (9, 10, 11, 12)],
        }
    )
    pools = DesktopPool.singles(2, {"settle": None}, backend="sync", source=source, rank=1)
    try:
        assert [p.urls for p in pools] == [["http://127.0.0.1:11"], ["http://127.0.0.1:12"]]
    finally:
        for p in pools:
            p.close()
    with pytest.raises(ValueError, match=r"process 1 needs guests 3..5 of desktops.urls"):
        DesktopPool.singles(3, {"settle": None}, backend="sync", source=source, rank=1)
    # a remote source without a list: n one-desktop pools would put n episodes on its one guest
    with pytest.raises(ValueError, match="2 desktops on one remote guest"):
        DesktopPool.singles(2, {"settle": None}, backend="sync", source=DesktopSource("remote"))
