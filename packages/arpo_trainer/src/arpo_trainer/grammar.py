"""Grammar-constrained decoding of UI-TARS actions: every sampled turn parses.

A randomly initialised policy (the tiny model) has no way to know the UI-TARS syntax except by
behaviour cloning, and a short clone writes broken actions in most episodes
(``click(start_box='(1 click(``), which end the episode before its aim can be judged. This
module restricts each sampling step to the tokens that keep the turn a prefix of a valid action,
so every turn is one well-formed call whose coordinates lie in the model's image frame:

* :class:`ActionGrammar`: the language (``Action: `` and one call of the UI-TARS set, with
  integer points in ``[0, W) x [0, H)``, key chords from a fixed list of key names, and bounded
  ``type`` / ``finished`` contents), as a small nondeterministic automaton over characters;
* :class:`TokenConstraint`: the same over a tokenizer's tokens. ``allowed(state, left)`` is the
  set of tokens a turn may continue with when ``left`` tokens of its budget remain, counting the
  closing ``<|im_end|>``: a token is allowed only if the action can still be closed within the
  budget (its shortest completion, split greedily into vocabulary tokens, fits), so no turn is
  cut at the token limit;
* :class:`GrammarLogitsProcessor`: the constraint as a ``transformers`` logits processor, for
  ``model.generate``;
* :func:`constrained_token_logps`: the learner's side. The sampling log-probs are those of the
  *constrained* distribution (the processed scores ``generate`` reports), so the trainer must
  score the same tokens under the same constraint, or the PPO ratio compares two different
  distributions. The mask of every action token is recomputed from the sequence's own ids (each
  turn begins after ``<|im_start|>assistant\\n``), so replayed trajectories are scored the same.

Only byte-level BPE tokenizers (the tiny model's, Qwen's) are supported: a token's text is read
from its bytes. Building the masks is Python work per automaton state, cached; for the tiny
model's 1,024-token vocabulary it costs milliseconds, for a 150k vocabulary seconds per new
state, which is one reason the option is off by default (the other: a real UI-TARS writes a
``Thought:`` first, which this grammar does not allow).

>>> g = ActionGrammar(frame=(140, 84))
>>> g.accepts("Action: click(start_box='(12,34)')"), g.accepts("Action: click(start_box='(140,3)')")
(True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import torch

#: Key names a ``hotkey`` chord is made of (all accepted by ``osworld_gym``'s ``canonical_key``).
KEY_NAMES: tuple[str, ...] = (
    "ctrl",
    "alt",
    "shift",
    "super",
    "enter",
    "tab",
    "esc",
    "backspace",
    "delete",
    "space",
    "home",
    "end",
    "pageup",
    "pagedown",
    "up",
    "down",
    "left",
    "right",
    *"abcdefghijklmnopqrstuvwxyz0123456789",
)

#: Characters a ``type`` / ``finished`` content may hold as they are (printable ASCII but the
#: quote and the backslash, which only appear in the escapes ``\\n``, ``\\'``, ``\\\\``).
TEXT_CHARS = frozenset(chr(c) for c in range(32, 127)) - {"'", "\\"}
ESCAPED = frozenset("n'\\")


# -- segments: each is one piece of a call, with a small hashable sub-state ---------------------


@dataclass(frozen=True)
class Lit:
    """One of a few fixed strings (a literal when there is one)."""

    options: tuple[str, ...]

    def start(self) -> str:
        return ""

    def step(self, sub: str, c: str) -> str | None:
        nxt = sub + c
        return nxt if any(o.startswith(nxt) for o in self.options) else None

    def done(self, sub: str) -> bool:
        return sub in self.options

    def complete(self, sub: str) -> str:
        return min((o[len(sub) :] for o in self.options if o.startswith(sub)), key=len)

    def example(self) -> str:
        return min(self.options, key=len)


@dataclass(frozen=True)
class Int:
    """A decimal integer in ``[0, bound)`` without leading zeros."""

    bound: int

    def start(self) -> str:
        return ""

    def step(self, sub: str, c: str) -> str | None:
        if not c.isdigit() or sub == "0":
            return None
        nxt = sub + c
        return nxt if int(nxt) < self.bound else None

    def done(self, sub: str) -> bool:
        return sub != ""

    def complete(self, sub: str) -> str:
        return "" if sub else "0"

    def example(self) -> str:
        return "0"


@dataclass(frozen=True)
class Text:
    """Quoted content: ``min_len`` to ``max_len`` characters, escapes counted as one."""

    min_len: int
    max_len: int

    def start(self) -> tuple[int, bool]:
        return (0, False)

    def step(self, sub: tuple[int, bool], c: str) -> tuple[int, bool] | None:
        n, escaping = sub
        if escaping:
            return (n + 1, False) if c in ESCAPED else None
        if n >= self.max_len:
            return None
        if c == "\\":
            return (n, True)
        return (n + 1, False) if c in TEXT_CHARS else None

    def done(self, sub: tuple[int, bool]) -> bool:
        return not sub[1] and sub[0] >= self.min_len

    def complete(self, sub: tuple[int, bool]) -> str:
        n, escaping = sub
        return ("n" if escaping else "") + "a" * max(0, self.min_len - n - int(escaping))

    def example(self) -> str:
        return "a" * self.min_len


@dataclass(frozen=True)
class Keys:
    """One to ``max_keys`` key names from :data:`KEY_NAMES`, separated by single spaces."""

    max_keys: int = 3

    def start(self) -> tuple[int, str]:
        return (0, "")

    def step(self, sub: tuple[int, str], c: str) -> tuple[int, str] | None:
        n, cur = sub
        if c == " ":
            return (n + 1, "") if cur in KEY_NAMES and n + 1 < self.max_keys else None
        nxt = cur + c
        return (n, nxt) if any(k.startswith(nxt) for k in KEY_NAMES) else None

    def done(self, sub: tuple[int, str]) -> bool:
        return sub[1] in KEY_NAMES

    def complete(self, sub: tuple[int, str]) -> str:
        return min((k[len(sub[1]) :] for k in KEY_NAMES if k.startswith(sub[1])), key=len)

    def example(self) -> str:
        return "a"


class Segment(Protocol):
    """What the automaton asks of a segment. Each segment keeps a sub-state of its own type
    (``Lit`` a string, ``Text`` a count and an escape flag, ...); a position carries it as
    ``object`` and only the segment that made it reads it back, hence ``Any`` here."""

    def start(self) -> Any: ...
    def step(self, sub: Any, c: str) -> Any | None: ...
    def done(self, sub: Any) -> bool: ...
    def complete(self, sub: Any) -> str: ...
    def example(self) -> str: ...


#: A position of the automaton: (alternative, segment index, segment sub-state).
Position = tuple[int, int, object]


def _lit(*options: str) -> Lit:
    return Lit(tuple(options))


class ActionGrammar:
    """``Action: `` followed by one UI-TARS call, points inside a ``frame`` of (width, height).

    The calls are those of ``osworld_gym.actions.uitars`` but ``select``, ``hover`` and
    ``left_single`` (aliases the cloned base policy never writes): clicks, ``drag``, ``scroll``,
    ``hotkey``, ``type``, ``wait``, ``finished``, ``call_user``. ``type`` holds 1 to
    ``max_text`` characters, ``finished`` 0 to ``max_text``.
    """

    def __init__(self, frame: tuple[int, int], *, max_text: int = 16, max_keys: int = 3):
        w, h = frame
        if w < 1 or h < 1:
            raise ValueError(f"the image frame must be at least 1x1, got {w}x{h}")
        self.frame = (w, h)

        def point(head: str) -> list[Segment]:
            return [_lit(f"{head}'("), Int(w), _lit(","), Int(h), _lit(")'")]

        head = _lit("Action: ")
        alts: list[list[Segment]] = [
            [
                head,
                _lit("click(", "left_double(", "right_single("),
                *point("start_box="),
                _lit(")"),
            ],
            [head, _lit("drag("), *point("start_box="), *point(", end_box="), _lit(")")],
            [
                head,
                _lit("scroll("),
                *point("start_box="),
                _lit(", direction='"),
                _lit("up", "down", "left", "right"),
                _lit("')"),
            ],
            [head, _lit("hotkey(key='"), Keys(max_keys), _lit("')")],
            [head, _lit("type(content='"), Text(1, max_text), _lit("')")],
            [head, _lit("finished(content='"), Text(0, max_text), _lit("')")],
            [head, _lit("wait()", "call_user()")],
        ]
        self.alternatives: tuple[tuple[Segment, ...], ...] = tuple(tuple(a) for a in alts)
        self.start: frozenset[Position] = self._closure(
            {(a, 0, alt[0].start()) for a, alt in enumerate(self.alternatives)}
        )

    def _closure(self, positions: set[Position]) -> frozenset[Position]:
        """Add, for every finished segment, the start of the next one (``(a, len, None)`` is the
        end of alternative ``a``)."""
        todo, out = list(positions), set(positions)
        while todo:
            a, i, sub = todo.pop()
            alt = self.alternatives[a]
            if i < len(alt) and alt[i].done(sub):
                nxt = (a, i + 1, alt[i + 1].start() if i + 1 < len(alt) else None)
                if nxt not in out:
                    out.add(nxt)
                    todo.append(nxt)
        return frozenset(out)

    def step(self, state: frozenset[Position], c: str) -> frozenset[Position]:
        """The state after character ``c`` (empty: ``c`` cannot follow)."""
        moved: set[Position] = set()
        for a, i, sub in state:
            alt = self.alternatives[a]
            if i < len(alt):
                nxt = alt[i].step(sub, c)
                if nxt is not None:
                    moved.add((a, i, nxt))
        return self._closure(moved) if moved else frozenset()

    def accepting(self, state: frozenset[Position]) -> bool:
        return any(i == len(self.alternatives[a]) for a, i, _ in state)

    def completion(self, state: frozenset[Position]) -> str:
        """A shortest text that turns ``state`` into a complete action."""
        best: str | None = None
        for a, i, sub in state:
            alt = self.alternatives[a]
            if i == len(alt):
                return ""
            text = alt[i].complete(sub) + "".join(s.example() for s in alt[i + 1 :])
            if best is None or len(text) < len(best):
                best = text
        if best is None:
            raise ValueError("the empty state has no completion")
        return best

    def accepts(self, text: str) -> bool:
        state = self.start
        for c in text:
            state = self.step(state, c)
            if not state:
                return False
        return self.accepting(state)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the character each byte is written as -> the byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def token_texts(tokenizer) -> list[str | None]:
    """Each token id's text, or None for a special token or one that is not plain ASCII."""
    dec = _byte_decoder()
    special = set(tokenizer.all_special_ids) | set(
        getattr(tokenizer, "added_tokens_decoder", {}) or {}
    )
    out: list[str | None] = []
    for tid in range(len(tokenizer)):
        piece = tokenizer.convert_ids_to_tokens(tid)
        if tid in special or piece is None or any(ch not in dec for ch in piece):
            out.append(None)
            continue
        raw = bytes(dec[ch] for ch in piece)
        out.append(raw.decode("ascii") if raw.isascii() and raw else None)
    return out


class TokenConstraint:
    """:class:`ActionGrammar` over a byte-level tokenizer's ids, with a token budget per turn.

    Args:
        grammar: the language of one turn.
        tokenizer: a byte-level BPE tokenizer (its texts via :func:`token_texts`).
        eos_token_id: the id that closes a turn (``<|im_end|>``).
        max_new_tokens: the turn's budget, the closing id included.
    """

    def __init__(self, grammar: ActionGrammar, tokenizer, eos_token_id: int, max_new_tokens: int):
        self.grammar = grammar
        self.eos = eos_token_id
        self.vocab = len(tokenizer)
        self.max_new_tokens = max_new_tokens
        texts = token_texts(tokenizer)
        self._ids = {t: tid for tid, t in enumerate(texts) if t}
        self._longest = max(len(t) for t in self._ids)
        self._need: dict[int, int] = {}
        self._by_first: dict[str, list[tuple[int, str]]] = {}
        for tid, t in enumerate(texts):
            if t:
                self._by_first.setdefault(t[0], []).append((tid, t))
        self._states: list[frozenset[Position]] = []
        self._index: dict[frozenset[Position], int] = {}
        self.start = self._intern(grammar.start)
        if self.need(self.start) + 1 > max_new_tokens:
            raise ValueError(
                f"a turn budget of {max_new_tokens} tokens cannot hold the shortest action "
                f"({self.need(self.start)} tokens and the closing token)"
            )
        self._edges: dict[int, dict[int, tuple[int, int]]] = {}
        self._allowed = lru_cache(maxsize=65536)(self._allowed_uncached)
        #: the id the dead state uses: any token continues a turn that left the grammar
        self.DEAD = -1

    def _intern(self, state: frozenset[Position]) -> int:
        sid = self._index.get(state)
        if sid is None:
            sid = self._index[state] = len(self._states)
            self._states.append(state)
        return sid

    def need(self, sid: int) -> int:
        """Tokens that surely complete state ``sid``: its shortest completion, split greedily
        into the longest tokens of the vocabulary (each is a valid continuation, so the policy
        can always close the action in this many tokens)."""
        n = self._need.get(sid)
        if n is None:
            text, n = self.grammar.completion(self._states[sid]), 0
            while text:
                k = min(self._longest, len(text))
                while k > 1 and text[:k] not in self._ids:
                    k -= 1
                if text[:k] not in self._ids:
                    raise ValueError(f"the vocabulary has no token for {text[:1]!r}")
                text, n = text[k:], n + 1
            self._need[sid] = n
        return n

    def edges(self, sid: int) -> dict[int, tuple[int, int]]:
        """token id -> (next state, tokens still needed after it), for every token the
        grammar lets follow state ``sid``."""
        out = self._edges.get(sid)
        if out is not None:
            return out
        g, state = self.grammar, self._states[sid]
        out = {}
        for first, toks in self._by_first.items():
            after_first = g.step(state, first)
            if not after_first:
                continue
            for tid, text in toks:
                s = after_first
                for c in text[1:]:
                    s = g.step(s, c)
                    if not s:
                        break
                if s:
                    nxt = self._intern(s)
                    out[tid] = (nxt, self.need(nxt))
        self._edges[sid] = out
        return out

    def _allowed_uncached(self, sid: int, left: int) -> tuple[int, ...]:
        ids = [t for t, (_, need) in self.edges(sid).items() if need + 1 <= left - 1]
        if self.grammar.accepting(self._states[sid]):
            ids.append(self.eos)
        return tuple(sorted(ids))

    def allowed(self, sid: int, left: int) -> tuple[int, ...] | None:
        """Token ids that may follow state ``sid`` with ``left`` tokens of budget left (None: no
        constraint, for the dead state or a spent budget)."""
        if sid == self.DEAD or left <= 0:
            return None
        ids = self._allowed(sid, left)
        return ids or None

    def advance(self, sid: int, token: int) -> int:
        """The state after ``token`` (:attr:`DEAD` once a turn has left the grammar)."""
        if sid == self.DEAD:
            return sid
        edge = self.edges(sid).get(token)
        return self.DEAD if edge is None else edge[0]

    def masks(self, ids: Sequence[int]) -> list[tuple[int, ...] | None]:
        """The allowed ids before each token of one turn's ``ids`` (as sampled: the first is
        drawn with the whole budget left)."""
        out: list[tuple[int, ...] | None] = []
        sid = self.start
        for k, tok in enumerate(ids):
            out.append(self.allowed(sid, self.max_new_tokens - k))
            sid = self.advance(sid, tok) if tok != self.eos else self.DEAD
        return out


class GrammarLogitsProcessor:
    """Sets every token the grammar forbids to ``-inf`` at each step of ``model.generate``.

    The rows' prompts end where ``generate`` starts; the first call records that length. Rows
    whose turn has ended (or left the grammar, which sampling under this processor never does)
    are left alone. Runs among the logits processors before temperature and top-k/p (transformers
    appends custom processors before its warpers), so ``output_scores`` are the log-probs of the
    constrained distribution the token was drawn from.
    """

    def __init__(self, constraint: TokenConstraint):
        self.constraint = constraint
        self._prompt_len: int | None = None
        self._states: list[int] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        c = self.constraint
        if self._prompt_len is None:
            self._prompt_len = input_ids.shape[1]
            self._states = [c.start] * input_ids.shape[0]
        else:
            last = input_ids[:, -1].tolist()
            self._states = [
                c.DEAD if tok == c.eos else c.advance(s, tok)
                for s, tok in zip(self._states, last, strict=True)
            ]
        done = input_ids.shape[1] - self._prompt_len
        left = c.max_new_tokens - done
        mask = torch.zeros_like(scores, dtype=torch.bool)
        for row, s in enumerate(self._states):
            ids = c.allowed(s, left)
            if ids is None:
                continue
            mask[row] = True
            mask[row, list(ids)] = False
        return scores.masked_fill(mask, float("-inf"))


def turn_spans(ids: Sequence[int], header: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of every assistant turn in a sequence: from after each occurrence of
    ``header`` (``<|im_start|>assistant\\n``) to the next ``<|im_start|>`` or the end."""
    n, h = len(ids), len(header)
    im_start = header[0]
    spans = []
    k = 0
    while k + h <= n:
        if list(ids[k : k + h]) == list(header):
            start = k + h
            end = start
            while end < n and ids[end] != im_start:
                end += 1
            spans.append((start, end))
            k = end
        else:
            k += 1
    return spans


def sequence_masks(
    constraint: TokenConstraint, ids: Sequence[int], header: Sequence[int]
) -> list[tuple[int, ...] | None]:
    """Per position of ``ids``: the ids the grammar allowed when that token was sampled (None
    outside assistant turns, and past a turn's closing id)."""
    out: list[tuple[int, ...] | None] = [None] * len(ids)
    for start, end in turn_spans(ids, header):
        turn = list(ids[start:end])
        if constraint.eos in turn:
            turn = turn[: turn.index(constraint.eos) + 1]
        for k, m in enumerate(constraint.masks(turn)):
            out[start + k] = m
    return out


def constrained_token_logps(
    logits: torch.Tensor,
    completion_ids: torch.Tensor,
    masks: list[list[tuple[int, ...] | None]],
    *,
    temperature: float = 1.0,
    bias: torch.Tensor | None = None,
    compute_entropy: bool = False,
    masked_logit: float = -1.0e4,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and entropies) of ``completion_ids`` under the constrained distributions.

    Args:
        logits: ``(batch, n, vocab)``, position ``t`` predicting ``completion_ids[:, t]``.
        completion_ids: ``(batch, n)``.
        masks: per row and position, the allowed ids (None: unconstrained).
        temperature: the logits are divided by it first, as TRL's fused head does.
        bias: added to every position's logits (the vision-token suppression), if given.
        masked_logit: what forbidden tokens get: finite, so entropies stay finite.
    """
    scaled = logits.float() / temperature
    if bias is not None:
        scaled = scaled + bias.to(scaled.device)
    forbid = torch.zeros_like(scaled, dtype=torch.bool)
    for b, row in enumerate(masks):
        for t, allowed in enumerate(row):
            if allowed is not None:
                forbid[b, t] = True
                forbid[b, t, list(allowed)] = False
    scaled = scaled.masked_fill(forbid, masked_logit)
    logp = torch.log_softmax(scaled, dim=-1)
    picked = logp.gather(-1, completion_ids.unsqueeze(-1).to(logp.device)).squeeze(-1)
    entropy = None
    if compute_entropy:
        entropy = -(logp.exp() * logp).sum(-1)
    return picked, entropy
