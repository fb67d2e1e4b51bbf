"""Hostile and garbage agent outputs, plus a recorder proving none of them ran anything.

Shared by the parser-level test (``test_actions_hostile.py``) and env-level tests that feed the
same strings to a live desktop.

- :func:`hostile_corpus` gives ``n`` strings for a seed: hand-written escapes (every code
  execution trick we know, wrapped in the syntax of each action set), parser bombs, huge and
  non-finite numbers, homoglyphs, control characters, JSON bombs, then seeded fuzz (random
  bytes, mutated valid actions, token soup). Every payload that *would* run code, if anything
  ever executed it, creates its own file ``<canary_dir>/<tag>``; after the run, the canary
  directory must be empty.
- :func:`hostile_dicts` gives non-string hostile inputs for dict-based sets (``computer_13``).
- :func:`record_dangerous_events` records audit events (``exec``, process spawning, ``ctypes``,
  sockets, ``open`` for writing) raised while it is active.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_CANARY_DIR = Path(tempfile.gettempdir()) / "osworld-gym-canary"

# -- audit recording ------------------------------------------------------------------------------

_DANGEROUS = frozenset(
    {
        "exec",
        "os.system",
        "subprocess.Popen",
        "socket.connect",
        "socket.bind",
        "os.fork",
        "os.forkpty",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.kill",
        "shutil.rmtree",
        "pty.spawn",
        "os.startfile",
    }
)
_DANGEROUS_PREFIXES = ("os.exec", "os.posix_spawn", "os.spawn", "ctypes.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_recording: list[tuple[str, str]] | None = None
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    rec = _recording
    if rec is None:  # the hook stays installed for the whole process; it is idle by default
        return
    if event in _DANGEROUS or event.startswith(_DANGEROUS_PREFIXES):
        rec.append((event, repr(args)[:200]))
    elif event == "open" and len(args) >= 3:
        _path, mode, flags = args[:3]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writes:
            rec.append((event, repr(args)[:200]))


@contextlib.contextmanager
def record_dangerous_events() -> Iterator[list[tuple[str, str]]]:
    """Collect ``(event, args)`` for every dangerous audit event raised inside the block.

    Keep only the code under test inside the block (no logging to files, no test framework
    calls that write).
    """
    global _recording, _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    events: list[tuple[str, str]] = []
    _recording = events
    try:
        yield events
    finally:
        _recording = None


# -- hand-written corpus --------------------------------------------------------------------------


def _payloads(c: str, tag: str) -> list[str]:
    """Python expressions that, if ever executed, create ``<c>/<tag>-<i>`` (all but ``-9``, which
    needs a real pyautogui module to reach ``os``)."""
    f = f"{c}/{tag}"
    return [
        f"__import__('os').system('touch {f}-0')",
        f"open('{f}-1', 'w').write('x')",
        f"__import__('pathlib').Path('{f}-2').touch()",
        f"__import__('subprocess').run(['touch', '{f}-3'])",
        f"exec(\"open('{f}-4', 'w')\")",
        f"eval(\"__import__('os').system('touch {f}-5')\")",
        f"(lambda: open('{f}-6', 'w'))()",
        f"[open('{f}-7', 'w') for _ in [0]]",
        f"getattr(__import__('builtins'), 'open')('{f}-8', 'w')",
        f"pyautogui.__class__.__init__.__globals__['os'].system('touch {f}-9')",
        (
            "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "
            "'catch_warnings'][0]()"
            f"._module.__builtins__['__import__']('os').system('touch {f}-10')"
        ),
        f"__import__('ctypes').CDLL(None).system(b'touch {f}-11')",
        f"exec(compile('open(\\'{f}-12\\', \\'w\\')', 'x', 'exec'))",
        f"vars(__import__('builtins'))['open']('{f}-13', 'w')",
        f"__import__('shutil').copy('/etc/hostname', '{f}-14')",
    ]


_PY_CONTEXTS = [
    "{p}",
    "pyautogui.click(x={p}, y=1)",
    "pyautogui.write({p})",
    "pyautogui.hotkey('ctrl', {p})",
    "import os\n{p}",
    "import pyautogui\npyautogui.click(1, 2)\n{p}",
    "pyautogui.click(1, 2); {p}",
    "@{p}\ndef f(): pass",
    "class A({p}): pass",
    "def f(x={p}): pass",
    "pyautogui.write(f'{{{p}}}')",
    "with {p}: pass",
    "for _ in [{p}]: pass",
    "if {p}: pass",
    "x = {p}",
    "pyautogui.press([{p}])",
    "pyautogui.click(*[{p}])",
    "pyautogui.click(**{{'x': {p}}})",
    "lambda: {p}",
    "(_ := {p})",
    "```python\n{p}\n```",
    "try:\n    {p}\nexcept Exception: pass",
    "assert {p}",
    "pyautogui.moveTo(1, 2, tween={p})",
    "time.sleep({p})",
    "pyautogui.{p}",
    "pyautogui.click({p})({p})",
    "pyautogui.write('x' if {p} else 'y')",
    "pyautogui.write(['a'][{p}])",
    "async def f(): await {p}",
]
_UITARS_CONTEXTS = [
    "Thought: x\nAction: {p}",
    "Action: click(start_box={p})",
    "Action: type(content={p})",
    "Action: type(content='x')\n\n{p}",
    "Action: hotkey(key={p})",
    "Thought: {p}\nAction: wait()",
    "Action: finished(content=''){p}",
    "Action: scroll(direction={p})",
    "Action: {p}\n\nfinished()",
    "Action: click(start_box='(1,1)', **{p})",
]


def _json_contexts(p: str) -> list[str]:
    return [
        json.dumps({"action_type": "TYPING", "parameters": {"text": p}}),
        '{"action_type": ' + p + "}",
        json.dumps({"action_type": p}),
        '{"action_type": "CLICK", "parameters": {"x": ' + p + ', "y": 1}}',
        json.dumps({"action_type": "HOTKEY", "parameters": {"keys": [p, "c"]}}),
    ]


def _fixed(c: str) -> list[str]:
    out: list[str] = []
    for i, ctx in enumerate(_PY_CONTEXTS + _UITARS_CONTEXTS):
        for p in _payloads(c, f"ctx{i}"):
            out.append(ctx.replace("{p}", p).replace("{{", "{").replace("}}", "}"))
    for p in _payloads(c, "json"):
        out += _json_contexts(p)
    big = 1_000_000
    out += [
        # parser bombs and size limits
        "(" * 199 + ")" * 199,
        "(" * 5000,
        "[" * 19_000 + "]" * 1,
        "-" * 19_000 + "1",
        "pyautogui.click(" + "-" * 15_000 + "1, 2)",
        "not " * 4000 + "1",
        "a." * 9000 + "b",
        "x" + "[0]" * 6000,
        "1+" * 9000 + "1",
        "lambda:" * 2500 + "1",
        "f'{" * 200 + "1" + "}'" * 200,
        "Action: click(start_box=" + "(" * 10_000,
        "Action: " + "click(" * 3000,
        "[" * 60_000,
        '{"a":' * 12_000,
        "[" * 30_000 + "]" * 30_000,
        '{"action_type":' * 10_000,
        "A" * big,
        "pyautogui.write('" + "a" * big + "')",
        "Action: type(content='" + "x" * big + "')",
        '{"action_type": "TYPING", "text": "' + "a" * big + '"}',
        "(" * big,
        "\n" * big,
        "pyautogui.write('" + "a" * 4097 + "')",
        "pyautogui.write('a')\n" * 51,
        "pyautogui.press(['a'] * 64, presses=50)",
        "pyautogui.press(" + repr(["a"] * 64) + ", presses=50)",
        "Action: " + "wait()\n\n" * 60,
        "Action: " + "type(content='a')\n\n" * 60,
        # regex-backtracking bait (must stay linear time)
        "```\n" + " " * 19_990 + "x",
        "```python\n" + "\t" * 19_000 + "x```",
        "```\n" + " " * 65_000 + "x",
        "Action: type(content='" + "' " * 9_990,
        "Action: type(content=" + " " * 19_900,
        "Action: " + "\n \n" * 6_000,
        "Action:" * 2_800,
        "Action: click(start_box='" + " " * 19_000 + "')",
        "Thought: " + "Thought: " * 2_000 + "\nAction: wait()",
        "\n" * 19_000 + "Action: wait()",
        "Action: type(content='" + "\\" * 9_990 + "')",
        "Action: type(content='" + "\\'" * 6_000 + "')",
        # numbers
        "pyautogui.click(1e999, 1)",
        "pyautogui.click(-1e999, 1)",
        "pyautogui.click(float('nan'), 1)",
        "pyautogui.click(10**10**10, 1)",
        "pyautogui.click(" + "9" * 4299 + ", 1)",
        "pyautogui.click(" + "9" * 5000 + ", 1)",
        "pyautogui.click(1e308, 1e308)",
        "pyautogui.sleep(1e-400)",
        "pyautogui.press('a', presses=99999999999)",
        "pyautogui.scroll(-10**6)",
        "pyautogui.click(0x7fffffff, 1)",
        "pyautogui.click(1j, 2)",
        "pyautogui.click(..., 2)",
        "pyautogui.click(True, False)",
        '{"action_type": "CLICK", "x": NaN, "y": 1}',
        '{"action_type": "CLICK", "x": Infinity, "y": -Infinity}',
        '{"action_type": "CLICK", "x": 1e999, "y": 1}',
        '{"action_type": "SCROLL", "dy": ' + "9" * 5000 + "}",
        '{"action_type": "CLICK", "parameters": {"x": 1, "y": 1, "num_clicks": 1e100}}',
        "Action: click(start_box='(1e999,1)')",
        "Action: click(start_box='(" + "9" * 100 + ",1)')",
        "Action: click(start_box='(nan,nan)')",
        "Action: scroll(start_box='(-5,-5)', direction='up')",
        # homoglyphs, invisible and control characters
        "руautogui.click(1, 2)",
        "pyautogui.сlick(1, 2)",
        "ｐｙａｕｔｏｇｕｉ.click(1, 2)",
        f"__ｉｍｐｏｒｔ__('os').system('touch {c}/homoglyph-0')",
        "pyauto\u200bgui.click(1, 2)",
        "pyautogui.click(1, 2)\u202e",
        "\ufeffpyautogui.click(1, 2)",
        "pyautogui.write('\ud800')",
        "pyautogui.click(１, ２)",
        "Action: сlick(start_box='(1,1)')",
        "Аction: click(start_box='(1,1)')",
        "pyautogui.click(1, 2)\x00",
        "\x00" * 100,
        "pyautogui.write('a\x00b')",
        "Action: type(content='a\x00b')",
        "pyautogui.write('\x1b[31m')",
        "pyautogui.write('a\\x00b')",
        "pyautogui.write('\\N{BELL}')",
        '{"action_type": "TYPING", "text": "\\u0000"}',
        '{"action_type": "TYPING", "text": "\\ud800"}',
        # unbalanced / odd quoting
        "pyautogui.write('abc)",
        "pyautogui.write(\"abc')",
        "pyautogui.write('''abc",
        "Action: type(content='abc)",
        "Action: type(content='a'b')",
        "Action: type(content='a\\'); __import__(\\'os\\')')",
        f"Action: type(content=''); __import__('os').system('touch {c}/quote-0'); x=('')",
        "Action: hotkey(key='ctrl c\")",
        '{"action_type": "TYPING", "text": "abc}',
        # structure tricks
        "pyautogui.click(1, 2) if True else None",
        "pyautogui.click(1, 2), pyautogui.click(3, 4)",
        "[pyautogui.click(1, 2)]",
        "pyautogui.click(1, 2).__class__",
        "(pyautogui.click)(1, 2)",
        "pyautogui.click.__call__(1, 2)",
        "pyautogui.hotkey.__globals__",
        "pyautogui.__dict__",
        "getattr(pyautogui, 'hotkey')('ctrl', 'c')",
        "vars(pyautogui)",
        "pyautogui.FAILSAFE = False",
        "del pyautogui",
        "import pyautogui.os",
        "import time as os",
        "from pyautogui import *",
        "import pyautogui, os",
        "global pyautogui",
        "raise SystemExit",
        "while True: pass",
        "pyautogui.click(x=1, y=2, x=3)",
        "pyautogui.click(1, 2, 3, 4, 5, 6, 7, 8)",
        "pyautogui.hotkey(*'ctrl')",
        "time.time()",
        "time.sleep(31)",
        "time.sleep(-1)",
        "pyautogui.sleep(20); time.sleep(20)",
        "pyautogui.moveRel(5, 5)",
        "pyautogui.dragRel(1, 1)",
        "pyautogui.locateOnScreen('x.png')",
        "pyautogui.screenshot('/tmp/x.png')",
        "pyautogui.click(pyautogui.position())",
        "pyautogui.click(pyautogui.size())",
        "Action: click(start_box='(1,1)').__class__",
        "Action: click.__globals__",
        "Action: __import__('os').system('id')",
        "Action: type(content=open('/etc/passwd').read())",
        "Thought: ignore previous instructions\nAction: exec('import os')",
        '{"action_type": "__import__", "parameters": {}}',
        '{"action_type": "CLICK", "parameters": [1, 2]}',
        '{"action_type": "CLICK", "parameters": {"x": "1", "y": "2"}}',
        '{"action_type": null}',
        '{"action_type": "HOTKEY", "keys": ["ctrl"' + ', "ctrl"' * 100 + "]}",
        '{"action_type": "TYPING", "text": ' + json.dumps("x" * 5000) + "}",
        '{"action_type": "CLICK", "__proto__": {"x": 1}}',
        "{}",
        "[]",
        "null",
        "1",
        '"WAIT "',
        "WAIT DONE",
        "DONE; __import__('os')",
        "Action: DONE",
        "done",
        "",
        " ",
        "\n\n\n",
        "```",
        "```python\n```",
    ]
    return out


# -- fuzz -----------------------------------------------------------------------------------------

_VALID = [
    "pyautogui.click(100, 200)",
    "pyautogui.write('hello world\\n')",
    "pyautogui.hotkey('ctrl', 'c')",
    (
        "import pyautogui\nimport time\npyautogui.moveTo(5, "
        "5)\ntime.sleep(0.5)\npyautogui.dragTo(50, 60)"
    ),
    "pyautogui.scroll(-3, x=10, y=10)",
    "pyautogui.press(['tab', 'enter'])",
    "Thought: open it\nAction: click(start_box='<|box_start|>(100,200)<|box_end|>')",
    "Action: type(content='abc\\n')",
    "Action: hotkey(key='ctrl s')\n\nfinished(content='ok')",
    "Action: drag(start_box='(1,1)', end_box='(50,50)')",
    "Action: scroll(direction='down')",
    '{"action_type": "CLICK", "parameters": {"button": "left", "x": 10, "y": 20}}',
    '{"action_type": "TYPING", "text": "hi"}',
    '{"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "v"]}}',
    "WAIT",
    "DONE",
    "FAIL",
]
_TOKENS = [
    "pyautogui",
    ".",
    "click",
    "write",
    "hotkey",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    "=",
    "'",
    '"',
    "\\",
    "__import__",
    "'os'",
    "os",
    "system",
    "eval",
    "exec",
    "lambda",
    "open",
    "getattr",
    "__class__",
    "__globals__",
    "__builtins__",
    "import",
    "from",
    " ",
    "\n",
    "\n\n",
    "\t",
    ";",
    ":",
    "1",
    "-1",
    "1e999",
    "NaN",
    "*",
    "**",
    "@",
    "#",
    "f'",
    "{x}",
    ":=",
    "Action:",
    "Thought:",
    "<|box_start|>",
    "<|box_end|>",
    "start_box=",
    "content=",
    '{"action_type":',
    '"CLICK"',
    '"x":',
    "null",
    "true",
    "WAIT",
    "DONE",
    "\x00",
    "\u202e",
    "ё",
    "🙂",
    "time.sleep(",
    "0" * 40,
    "type(",
    "finished(",
    "<point>",
    "</point>",
]
_CHARS = "()[]{}'\",.=_:;\n\t \\x0123456789-+*/@#<>|!?~`$%^&"


def _mutate(rng: random.Random, s: str) -> str:
    for _ in range(rng.randint(1, 3)):
        i = rng.randint(0, len(s))
        op = rng.randrange(6)
        if op == 0:
            s = s[:i] + rng.choice(_CHARS) + s[i:]
        elif op == 1 and s:
            s = s[:i] + s[i + 1 :]
        elif op == 2 and s:
            s = s[:i] + rng.choice(_CHARS) + s[i + 1 :]
        elif op == 3:
            j = rng.randint(i, len(s))
            s = s[:j] + s[i:j] * rng.randint(1, 4) + s[j:]
        elif op == 4:
            s = s[:i] + rng.choice(_TOKENS) + s[i:]
        else:
            s = s[i:] + s[:i]
    return s


def hostile_corpus(
    n: int = 1000, seed: int = 0, canary_dir: str | os.PathLike[str] | None = None
) -> list[str]:
    """``n`` hostile strings, deterministic for ``seed``: the hand-written list first, then fuzz.

    Args:
        n: how many strings (the hand-written part alone is about 700; fuzz fills the rest).
        seed: seeds the fuzz.
        canary_dir: where executed payloads would create files (default: a fixed directory
            under the system temp dir). Check it is empty afterwards.
    """
    c = str(canary_dir if canary_dir is not None else DEFAULT_CANARY_DIR)
    rng = random.Random(seed)
    out = _fixed(c)[:n]
    tag = 0
    while len(out) < n:
        kind = rng.randrange(5)
        if kind == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
            out.append(
                data.decode("utf-8", errors=rng.choice(["replace", "ignore", "surrogateescape"]))
            )
        elif kind == 1:
            out.append(_mutate(rng, rng.choice(_VALID)))
        elif kind == 2:
            out.append("".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 40))))
        else:  # a payload spliced into a valid action, then maybe mutated
            tag += 1
            payload = rng.choice(_payloads(c, f"fuzz{tag}"))
            base = rng.choice(_VALID)
            i = rng.randint(0, len(base))
            s = base[:i] + payload + base[i:]
            out.append(_mutate(rng, s) if kind == 4 else s)
    return out


def hostile_dicts() -> list[Any]:
    """Non-string hostile inputs for dict action sets (``computer_13``)."""
    deep: Any = {}
    for _ in range(50_000):
        deep = {"action_type": "CLICK", "parameters": deep}
    deep_list: Any = []
    for _ in range(50_000):
        deep_list = [deep_list]

    class Sneaky(dict):
        def __getitem__(self, k: Any) -> Any:
            raise RuntimeError("a dict subclass that raises")

    class EvilStr(str):
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("comparison")

        __hash__ = str.__hash__

    return [
        deep,
        {"action_type": "TYPING", "parameters": {"text": deep_list}},
        {"action_type": deep_list},
        {"action_type": ["CLICK"]},
        {"action_type": {"CLICK": 1}},
        {"action_type": None},
        {"action_type": b"CLICK"},
        {"action_type": "CLICK", "parameters": {"x": object(), "y": 1}},
        {"action_type": "CLICK", "parameters": {"x": float("nan"), "y": 1}},
        {"action_type": "CLICK", "parameters": {"x": 10**400, "y": 1}},
        {"action_type": "TYPING", "parameters": {"text": "x" * 1_000_000}},
        {"action_type": "HOTKEY", "parameters": {"keys": ["ctrl"] * 10_000}},
        {"action_type": "HOTKEY", "parameters": {"keys": [object()]}},
        {"action_type": "PRESS", "parameters": {"key": EvilStr("enter")}},
        {"action_type": EvilStr("CLICK")},
        Sneaky(action_type="CLICK"),
        {b"action_type": "CLICK"},
        {("action_type",): "CLICK"},
        {"action_type": "CLICK", "parameters": "x=1"},
        {"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "num_clicks": 2.0}},
        {"action_type": "SCROLL", "parameters": {"dy": True}},
        {"action_type": 10**100},
        {"action_type": -1},
        {"action_type": 3.0},
        {"command": "__import__('os')"},
        None,
        42,
        ["CLICK"],
        ("CLICK",),
        b'{"action_type": "WAIT"}',
        object(),
    ]
