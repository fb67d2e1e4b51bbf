"""The programs a task runs inside the desktop, read from its JSON.

A task runs programs in four places: ``launch``/``execute``/``command`` setup steps (config and
the evaluator's postconfig), ``open`` steps (the default application of the file's type), and
``vm_command_line``-style getters. Commands come as argument lists or as shell text; shell text is
read the way a shell would split it into simple commands (``a | b && c; $(d)``), taking the first
word of each after variable assignments and keywords. That is a reading, not an interpreter:
words that are not program names (``$f``, ``~/bin/x``, ``{{name}}``) are skipped, and a program
started only through ``eval`` or a variable is not seen.

This is what ``osworld-gym doctor`` and ``scripts/install.sh`` are checked against, so a task that
starts using a new program fails a test until the program is installed, instead of failing its
setup on a fresh machine.

>>> sorted(shell_programs("cd ~/x && find . -type f | LC_ALL=C sort; python3 -c 'import os'"))
['find', 'python3', 'sort']
>>> sorted(shell_programs("if [ -x ~/a.sh ]; then ~/a.sh; else echo $(date +%s); fi"))
['date']
>>> sorted(shell_programs("s=$(( (s * 7) % 9 )); head -c $s /dev/urandom > a.dat"))
['head']
>>> sorted(command_programs(["bash", "-c", "git log | head -n 1"]))
['bash', 'git', 'head']
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: Shell keywords that stand before a command's name (``then ls``, ``! grep``).
KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "time", "!", "{"})
#: Words that start no program: builtins and the keywords that end or open a compound command.
BUILTINS = frozenset(
    {
        "fi",
        "for",
        "in",
        "done",
        "case",
        "esac",
        "function",
        "select",
        "}",
        "[",
        "[[",
        "]]",
        "]",
        "cd",
        "echo",
        "printf",
        "export",
        "read",
        "test",
        "set",
        "unset",
        "local",
        "return",
        "exit",
        "true",
        "false",
        "alias",
        "source",
        ".",
        "eval",
        "exec",
        "command",
        "type",
        "shift",
        "trap",
        "wait",
        "declare",
        "typeset",
        "let",
        "pushd",
        "popd",
        "umask",
        "ulimit",
        "builtin",
        "hash",
        "readonly",
        "getopts",
        "break",
        "continue",
        ":",
        "shopt",
        "history",
        "jobs",
        "fg",
        "bg",
    }
)
#: Shells whose ``-c`` argument is itself shell text.
SHELLS = frozenset({"bash", "sh", "dash", "zsh"})
#: Steps whose ``command`` parameter runs a program.
COMMAND_STEPS = frozenset({"launch", "execute", "command", "execute_with_verification"})
#: Getters that run a command inside the desktop.
COMMAND_GETTERS = frozenset({"vm_command_line", "vm_command_error", "vm_terminal_output"})

# operators that end a simple command; `$(`, backticks and `(`/`)` open or close a sub-shell
_SEPARATORS = re.compile(r"\|\||&&|;;|[;&|\n()`]|\$\(")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PROGRAM = re.compile(r"^[A-Za-z][A-Za-z0-9._+-]*$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def _drop_arithmetic(text: str) -> str:
    """``text`` with each ``$(( ... ))`` (parentheses may nest inside) replaced by ``0``."""
    out, i = [], 0
    while (start := text.find("$((", i)) >= 0:
        out.append(text[i:start] + "0")
        depth, j = 2, start + 3
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def _drop_bodies(text: str) -> str:
    """``text`` without here-document bodies and ``$((arithmetic))``: neither runs programs."""
    text = _drop_arithmetic(text)
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        out.append(lines[i])
        delimiters = [m.group(2) for m in _HEREDOC.finditer(lines[i])]
        i += 1
        for delimiter in delimiters:
            while i < len(lines) and lines[i].strip() != delimiter:
                i += 1
            i += 1
    return "\n".join(out)


def _split_words(text: str) -> list[str] | None:
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        return None


def _segments(text: str) -> Iterator[str]:
    """Pieces of shell text that each start a simple command, outside of quotes."""
    out, buf, quote, i = [], [], "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"' and i + 1 < len(text):
                buf.append(text[i + 1])
                i += 1
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif ch == "\\" and i + 1 < len(text):
            buf.append(text[i : i + 2])
            i += 1
        elif m := _SEPARATORS.match(text, i):
            out.append("".join(buf))
            buf = []
            i = m.end()
            continue
        else:
            buf.append(ch)
        i += 1
    out.append("".join(buf))
    return (s for s in out if s.strip())


def shell_programs(text: str) -> set[str]:
    """Programs that shell ``text`` starts (see the module docstring for what is seen)."""
    found: set[str] = set()
    for segment in _segments(_drop_bodies(text)):
        words = _split_words(segment) or segment.split()
        # keywords (`then`, `do`, `!`, `{`) and assignments stand before a command's name
        while words and (words[0] in KEYWORDS or _ASSIGNMENT.match(words[0])):
            words = words[1:]
        if words and words[0] not in BUILTINS:
            found |= command_programs(words)
    return found


def command_programs(argv: list[str] | str) -> set[str]:
    """Programs a command runs: its own name, and for ``bash -c TEXT`` / ``sudo CMD`` /
    ``env CMD`` / ``timeout N CMD`` the programs inside."""
    if isinstance(argv, str):
        return shell_programs(argv)
    if not argv:
        return set()
    name = Path(str(argv[0])).name
    if name in BUILTINS or name in KEYWORDS or not _PROGRAM.match(name) or "/" in str(argv[0]):
        return set()
    found = {name}
    rest = [str(a) for a in argv[1:]]
    if name in SHELLS and "-c" in rest[:-1]:
        found |= shell_programs(rest[rest.index("-c") + 1])
    elif name in ("sudo", "env", "nohup", "timeout", "xargs", "nice", "setsid"):
        while rest and (
            rest[0].startswith("-")
            or _ASSIGNMENT.match(rest[0])
            or (name == "timeout" and rest[0][:1].isdigit())
        ):
            rest = rest[1:]
        found |= command_programs(rest)
    return found


def json_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``{}``: task JSON is read leniently here (the task's
    own validation reports a malformed ``evaluator`` or ``parameters``)."""
    return value if isinstance(value, dict) else {}


def json_objects(value: Any) -> Iterator[dict[str, Any]]:
    """The JSON objects in ``value``: the dict entries of a list, or ``value`` if it is one."""
    for entry in value if isinstance(value, list) else [value]:
        if isinstance(entry, dict):
            yield entry


def _steps(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """``raw``'s setup and postconfig steps (those that are JSON objects), in order."""
    postconfig = json_object(raw.get("evaluator")).get("postconfig")
    return [*json_objects(raw.get("config") or []), *json_objects(postconfig or [])]


def is_shell(params: dict[str, Any]) -> bool:
    """Whether a step's or getter's ``shell`` is on: OSWorld accepts ``true`` and ``"true"``."""
    return params.get("shell") in (True, "true", "True", 1)


_is_shell = is_shell


def task_programs(raw: dict[str, Any]) -> set[str]:
    """Every program ``raw`` (a task's JSON) starts inside the desktop, by name; ``open`` steps
    are left to :func:`opened_suffixes` (their program is the file type's default app)."""
    evaluator = json_object(raw.get("evaluator"))
    found: set[str] = set()
    for step in _steps(raw):
        params = json_object(step.get("parameters"))
        if step.get("type") in COMMAND_STEPS and "command" in params:
            command = params["command"]
            if isinstance(command, list) and _is_shell(params):
                command = " ".join(str(c) for c in command)
            found |= command_programs(command if isinstance(command, (list, str)) else str(command))
    for key in ("result", "expected"):
        for getter in json_objects(evaluator.get(key)):
            if getter.get("type") in COMMAND_GETTERS and "command" in getter:
                command = getter["command"]
                if isinstance(command, list) and _is_shell(getter):
                    command = " ".join(str(c) for c in command)
                found |= command_programs(command)
    return found


def opened_suffixes(raw: dict[str, Any]) -> set[str]:
    """File suffixes (``.xlsx``) that ``raw``'s ``open`` steps open with their default app."""
    out: set[str] = set()
    for step in _steps(raw):
        params = json_object(step.get("parameters"))
        if step.get("type") == "open" and isinstance(params.get("path"), str):
            if suffix := Path(params["path"]).suffix.lower():
                out.add(suffix)
    return out


def programs_of(tasks: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """``{program: {task ids that run it}}`` over ``tasks`` (raw JSON dicts)."""
    out: dict[str, set[str]] = {}
    for raw in tasks:
        for program in task_programs(raw):
            out.setdefault(program, set()).add(str(raw.get("id", "?")))
    return out
