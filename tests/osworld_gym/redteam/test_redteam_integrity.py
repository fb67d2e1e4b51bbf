"""Red team, round 3 (issue 24), on real desktops: an agent-made file can never turn a failure
into an infrastructure error, nor a forgery into a 1.

Each attack is what the 2026-11-26 red-team pass did, as the desktop user (the player) from its
own terminal (:func:`redteam.player`), followed by ``DONE``. Each was an ``infra_error`` (or a
reward of 1) before this round; each must now score 0 with the reason in ``info["eval_note"]``.
"""

from __future__ import annotations

import contextlib
import re
import resource
import textwrap
from pathlib import Path

import pytest
from conftest import sandbox_processes
from redteam import player

pytestmark = pytest.mark.desktop

#: Rewrites one member of a zip file in place (run by the player's own python3).
REZIP = """
import io, re, sys, zipfile
def rezip(path, member, change):
    src = zipfile.ZipFile(path)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            data = src.read(info)
            z.writestr(info, change(data) if info.filename == member else data)
    open(path, "wb").write(out.getvalue())
"""


def as_player(env, *parts: str) -> None:
    """Run a Python script (``parts`` dedented each, joined) with the player's python3."""
    script = "\n".join(textwrap.dedent(part) for part in parts)
    out = player(env, f"python3 - <<'EOF'\n{script}\nEOF")
    assert out["returncode"] == 0, out


def scored_zero(env, *reasons: str) -> dict:
    _, reward, terminated, truncated, info = env.step("DONE")
    assert info["infra_error"] is None, info["infra_error"]
    assert terminated and not truncated and reward == 0.0, info
    assert info["eval_note"] and all(r in info["eval_note"] for r in reasons), info["eval_note"]
    return info


def test_deeply_nested_chrome_preferences_score_zero(local_env):
    """chrome-dnt-001 reads Chromium's Preferences with ``check_json_settings``: JSON nested
    100,000 deep made the parser raise RecursionError, an excluded episode. (The profile
    folder made read-only keeps Chromium, stopped cleanly by the postconfig, from writing its
    own Preferences over the agent's.)"""
    local_env.reset(options={"task": "chrome-dnt-001"})
    as_player(
        local_env,
        """
        import os
        d = os.path.expanduser("~/.config/google-chrome/Default")
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "Preferences"), "w").write('{"a":' * 100000 + '1' + '}' * 100000)
        os.chmod(d, 0o555)
        """,
    )
    info = scored_zero(local_env, "RecursionError", "on what the agent left")
    assert info["app_exits"] == [], info["app_exits"]  # no app died: scored, not excused


def test_a_font_size_that_is_not_a_number_scores_zero(local_env):
    """``compare_pptx_files`` reads ``sz`` lazily: ``sz="abc"`` raised ValueError mid-compare."""
    local_env.reset(options={"task": "libreoffice_impress-bold-title-001"})
    as_player(
        local_env,
        REZIP,
        """
        import os
        def sz(data):  # every font size "abc" (or one added where the slide sets none)
            changed = re.sub(rb'sz="[0-9]+"', b'sz="abc"', data)
            return changed if changed != data else data.replace(b"<a:rPr", b'<a:rPr sz="abc"', 1)
        rezip(os.path.expanduser("~/Desktop/office.pptx"), "ppt/slides/slide1.xml", sz)
        """,
    )
    scored_zero(local_env, "ValueError", "gold scored against itself does not")


def test_a_shared_formula_with_an_unterminated_string_scores_zero(local_env):
    """The data is left right, so ``compare_table`` reaches its ``check_cell`` rules, which
    load the formulas: a shared formula ``"unterminated`` raised TokenizerError there."""
    local_env.reset(options={"task": "libreoffice_calc-bold-header-001"})
    as_player(
        local_env,
        REZIP,
        """
        import os
        def shared(data):
            cells = re.findall(rb'<c r="B([23])" t="n"><v>([^<]*)</v></c>', data)
            (r2, v2), (r3, v3) = cells[:2]
            data = data.replace(b'<c r="B2" t="n"><v>' + v2 + b'</v></c>',
                b'<c r="B2"><f t="shared" ref="B2:B3" si="0">"unterminated</f><v>' + v2
                + b'</v></c>')
            return data.replace(b'<c r="B3" t="n"><v>' + v3 + b'</v></c>',
                b'<c r="B3"><f t="shared" si="0"/><v>' + v3 + b'</v></c>')
        rezip(os.path.expanduser("~/Desktop/sales.xlsx"), "xl/worksheets/sheet1.xml", shared)
        """,
    )
    scored_zero(local_env, "TokenizerError")


def _guest_pid() -> int:
    pids = [pid for pid, cmd in sandbox_processes() if "-m osworld_gym.guest" in cmd]
    assert pids, "no guest process found"
    return max(pids)  # the newest desktop's guest


def _hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


def test_cat_of_an_800mb_file_scores_zero_and_grows_neither_guest_nor_host(local_env, capsys):
    """A result command that ``cat``s the agent's 800 MB file: the guest keeps 8 MiB and kills
    it (before: it buffered everything and died, an infra_error; 300 MB took the host process
    to 2.1 GB). Peak memory of the guest (``VmHWM``, reset first) and of this process
    (``ru_maxrss``) are measured around the evaluation."""
    task = {
        "id": "redteam-huge-output",
        "instruction": "Write yes to ~/answer.txt",
        "snapshot": "os",
        "related_apps": ["os"],
        "config": [],
        "evaluator": {
            "func": "exact_match",
            "result": {"type": "vm_command_line", "command": ["cat", "/home/user/answer.txt"]},
            "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
        },
    }
    local_env.reset(options={"task": task})
    assert player(local_env, "truncate -s 800M ~/answer.txt")["returncode"] == 0
    guest = _guest_pid()
    with contextlib.suppress(OSError):
        Path(f"/proc/{guest}/clear_refs").write_text("5")
    guest_before = _hwm_mib(guest)
    host_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    scored_zero(local_env, "output over the size limit", "8388608")
    guest_after = _hwm_mib(guest)
    host_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with capsys.disabled():
        print(
            f"\n800 MB cat: guest peak RSS {guest_before:.0f} -> {guest_after:.0f} MiB, "
            f"host peak RSS {host_before:.0f} -> {host_after:.0f} MiB"
        )
    assert guest_after - guest_before < 64 and host_after - host_before < 64


def _portal_values(instruction: str) -> dict[str, str]:
    m = re.search(
        r'full name "([^"]+)", email (\S+), department (\w+), message "([^"]+)"', instruction
    )
    assert m, instruction
    return dict(zip(("name", "email", "department", "message"), m.groups(), strict=True))


def test_a_forged_portal_log_does_not_score(local_env):
    """The portal logged form posts into the player's ~/.cache/portal/: writing the line the
    evaluator looks for scored 1 without a browser. The record is now the server's own."""
    obs, _ = local_env.reset(options={"task": "chrome-contact-form-001"})
    fields = {**_portal_values(obs["instruction"]), "newsletter": "yes"}
    as_player(
        local_env,
        f"""
        import json, os, time
        d = os.path.expanduser("~/.cache/portal")
        os.makedirs(d, exist_ok=True)
        line = json.dumps({{"path": "/submit", "time": time.time(), "fields": {fields!r}}})
        open(os.path.join(d, "submissions.jsonl"), "a").write(line + "\\n")
        """,
    )
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and info["infra_error"] is None and reward == 0.0, info


def test_a_portal_the_agent_serves_itself_is_refused(local_env):
    """The agent kills the portal and serves the record it wants on port 8000: the evaluator's
    command names the port, the listener is not what setup launched (409), scored 0."""
    obs, _ = local_env.reset(options={"task": "chrome-contact-form-001"})
    fields = {**_portal_values(obs["instruction"]), "newsletter": "yes"}
    line = '{"path": "/submit", "fields": ' + repr(fields).replace("'", '"') + "}"
    out = player(
        local_env,
        "pkill -f [p]ortal.py; sleep 0.3; mkdir -p /tmp/fake/__judge && "
        f"printf '%s\\n' '{line}' > /tmp/fake/__judge/submissions && cd /tmp/fake && "
        "(setsid python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1 &) "
        "&& for i in $(seq 50); do curl -sf http://127.0.0.1:8000/__judge/submissions "
        ">/dev/null && break; sleep 0.2; done",
    )
    assert out["returncode"] == 0, out
    scored_zero(local_env, "port 8000")


def test_the_agents_magic_file_cannot_make_a_text_file_a_png(local_env):
    """multi_apps-snapshot-desktop-001 checks ``file ~/Desktop/frame.png``: a ``~/.magic``
    rule made a text file "PNG image data, 320 x 240" and the episode scored 1."""
    local_env.reset(options={"task": "multi_apps-snapshot-desktop-001"})
    out = player(
        local_env,
        "printf '0 string Hello PNG image data, 320 x 240\\n' > ~/.magic && mkdir -p ~/Desktop "
        "&& echo 'Hello world' > ~/Desktop/frame.png && file ~/Desktop/frame.png",
    )
    assert "PNG image data, 320 x 240" in out["output"], out  # it fools the agent's own `file`
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and info["infra_error"] is None and reward == 0.0, info
