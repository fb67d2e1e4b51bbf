"""A :class:`~arpo_trainer.vllm_server.VLLMServer` ends with the process that started it.

The server runs in a session of its own, so a trainer or test killed outright (SIGKILL, an
OOM kill, a scheduler's SIGTERM that Python does not turn into an exception) used to leave it
running with its engine and, on a GPU, the GPU memory they hold: once a killed test run left
three vLLM processes behind here. The stand-in server below answers ``/health`` like vLLM's, so
the lifetime is tested without vLLM installed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

STARTER = textwrap.dedent(
    """
    import sys, time
    import arpo_trainer.vllm_server as vs

    HEALTH = '''
    import http.server, sys
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
    '''

    def stand_in(model, *, port, **kw):
        return [sys.executable, "-c", HEALTH, str(port)]

    vs.server_command = stand_in
    srv = vs.VLLMServer("no-model", startup_timeout_s=120)
    srv.start()
    print(srv._proc.pid, flush=True)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_server_ends_when_the_process_that_started_it_is_killed(sig):
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True)
    server_pid = None
    try:
        assert starter.stdout is not None
        line = starter.stdout.readline()
        assert line.strip().isdigit(), f"the starter did not start a server: {line!r}"
        server_pid = int(line)
        assert _alive(server_pid)
        starter.send_signal(sig)
        starter.wait(60)
        for _ in range(300):  # a bound on waiting for the kernel's signal, not a timing test
            if not _alive(server_pid):
                break
            time.sleep(0.1)
        assert not _alive(server_pid), "the server outlived the process that started it"
    finally:
        starter.kill()
        starter.wait(60)
        if server_pid is not None and _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)
