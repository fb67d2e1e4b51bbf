"""Token layout of a multi-turn episode: one sequence per trajectory, built from token ids.

An episode is encoded as Qwen-VL chat turns (the layout of UI-TARS' OSWorld agent and ARPO)::

    <|im_start|>system\\n{system}<|im_end|>\\n
    <|im_start|>user\\n{prompt with the instruction}<|im_end|>\\n
    <|im_start|>user\\n<|vision_start|><|image_pad|>...<|vision_end|><|im_end|>\\n<|im_start|>assistant\\n
    {sampled action ids ending in <|im_end|>}
    \\n<|im_start|>user\\n<|vision_start|>...<|vision_end|><|im_end|>\\n<|im_start|>assistant\\n
    {sampled action ids}
    ...

Everything up to the first ``assistant\\n`` is the *prompt*; the rest is the *completion*, where
only the sampled action ids count for the loss (``action_mask`` = 1). The action ids are the ones
the policy sampled, never a re-tokenization of their decoded text. Screenshots older than the last
``max_history_images`` are replaced by a short text marker; when that cap is at least the number
of turns, the context each action was sampled in is exactly a prefix of the training sequence.

Text pieces are tokenized separately and concatenated; chunks between special tokens tokenize
independently, so the result equals tokenizing the whole rendered conversation
(``tests/arpo_trainer/test_trainer_chat.py`` checks this against ``processor.apply_chat_template``).
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch
from osworld_gym.actions.uitars import smart_resize
from PIL import Image

log = logging.getLogger(__name__)

OMITTED_SCREENSHOT = "(earlier screenshot omitted)"


@dataclass
class ImageFeatures:
    """One screenshot as the vision tower's patches, still in uint8.

    ``pixel_values`` holds the processor's patch layout (``grid_thw`` patches of
    ``channels x patch x patch`` bytes each) *before* rescaling and normalization, and one frame of
    the processor's ``temporal_patch_size`` copies (a still image repeats the same frame): 588
    bytes per patch where the processor's float32 output takes 4,704 (8x less: 6.3 MB instead of
    50.6 MB for a 1092x1932 screenshot). :meth:`TurnEncoder.model_pixels` turns them into the
    processor's values right before a forward pass.
    """

    pixel_values: torch.Tensor  # (patches, channels * patch area), uint8
    grid_thw: torch.Tensor  # (1, 3)
    num_tokens: int  # <|image_pad|> tokens it occupies in the text

    @property
    def nbytes(self) -> int:
        return self.pixel_values.nbytes + self.grid_thw.nbytes


@dataclass
class EncodedSequence:
    """One trajectory (or the context of its next turn) as token ids.

    Attributes:
        prompt_ids: system + task prompt + first observation, ending in ``assistant\\n``.
        completion_ids: every later token: actions, and the observation turns between them.
        action_mask: per completion token, 1 where the policy sampled it (trained), else 0.
        sampling_logps: per completion token, the log-prob it was sampled with (NaN if unknown
            or not sampled).
        images: features of the screenshots shown as images, in order of appearance.
        pngs: those screenshots (PNG bytes), same order.
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    sampling_logps: list[float] = field(default_factory=list)
    images: list[ImageFeatures] = field(default_factory=list)
    pngs: list[bytes] = field(default_factory=list)

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


class TurnEncoder:
    """Builds prompt/observation token ids and screenshot features for a Qwen-VL style processor.

    Args:
        processor: a Qwen2-VL / Qwen2.5-VL processor (tokenizer + image processor).
        prompt_template: the first user message; ``{instruction}`` is replaced by the task.
        system_prompt: the system message.
        max_history_images: how many of the latest screenshots stay images in the context.
        image_max_pixels: screenshots are resized (Qwen smart-resize, aspect kept) to at most this
            many pixels before processing; ``None`` uses the image processor's limit.
        feature_cache_bytes: bytes of screenshot patches to keep (least recently used first out;
            a context is re-encoded each turn, so the cache should hold a rollout's screenshots:
            desktops x turns x ~6.3 MB at 1092x1932).
    """

    def __init__(
        self,
        processor,
        prompt_template: str,
        *,
        system_prompt: str = "You are a helpful assistant.",
        max_history_images: int = 15,
        image_max_pixels: int | None = None,
        feature_cache_bytes: int = 2 * 1024**3,
    ):
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.image_processor = processor.image_processor
        self.prompt_template = prompt_template
        self.system_prompt = system_prompt
        self.max_history_images = max_history_images
        ip = self.image_processor
        self.merge_size = int(getattr(ip, "merge_size", 2))
        self.factor = int(getattr(ip, "patch_size", 14)) * self.merge_size
        size = getattr(ip, "size", None) or {}
        proc_max = int(size.get("longest_edge") or getattr(ip, "max_pixels", 0) or 16384 * 28 * 28)
        self.min_pixels = int(size.get("shortest_edge") or getattr(ip, "min_pixels", 0) or 56 * 56)
        self.max_pixels = min(proc_max, image_max_pixels) if image_max_pixels else proc_max
        self.image_token_id = self._token_id("<|image_pad|>")
        self.eos_token_id = self._token_id("<|im_end|>")
        self._vision = (self._token_id("<|vision_start|>"), self._token_id("<|vision_end|>"))
        self._obs_head = self._encode("<|im_start|>user\n")
        self._obs_tail = self._encode("<|im_end|>\n<|im_start|>assistant\n")
        self._newline = self._encode("\n")
        self._omitted = self._encode(OMITTED_SCREENSHOT)
        self.patch_size = int(getattr(ip, "patch_size", 14))
        self.temporal_patch_size = int(getattr(ip, "temporal_patch_size", 2))
        # the processor's rescale and normalization, per channel
        rescale = (
            float(getattr(ip, "rescale_factor", 1 / 255))
            if getattr(ip, "do_rescale", True)
            else 1.0
        )
        mean = torch.tensor(
            ip.image_mean if getattr(ip, "do_normalize", True) else [0.0] * 3, dtype=torch.float32
        )
        std = torch.tensor(
            ip.image_std if getattr(ip, "do_normalize", True) else [1.0] * 3, dtype=torch.float32
        )
        self._scale, self._shift = rescale / std, -mean / std
        if feature_cache_bytes < 0:
            raise ValueError(f"feature_cache_bytes must be >= 0, got {feature_cache_bytes}")
        self._cache: OrderedDict[str, ImageFeatures] = OrderedDict()
        self._cache_budget = feature_cache_bytes
        self._cache_bytes = 0

    # -- pieces ------------------------------------------------------------------------------------

    def _token_id(self, token: str) -> int:
        tid = self.tokenizer.convert_tokens_to_ids(token)
        if tid is None or tid == self.tokenizer.unk_token_id:
            raise ValueError(
                f"the tokenizer has no {token} token; a Qwen-VL style processor is needed"
            )
        return int(tid)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_text(self, instruction: str) -> str:
        """The first user message for ``instruction``."""
        if "{instruction}" in self.prompt_template:
            return self.prompt_template.replace("{instruction}", instruction)
        return f"{self.prompt_template}\n\n## User Instruction\n{instruction}"

    def header_ids(self, instruction: str) -> list[int]:
        """System message and task prompt."""
        return self._encode(
            f"<|im_start|>system\n{self.system_prompt}<|im_end|>\n"
            f"<|im_start|>user\n{self.prompt_text(instruction)}<|im_end|>\n"
        )

    def observation_ids(self, num_image_tokens: int | None, *, first: bool) -> list[int]:
        """A user turn holding one screenshot (``None``: the omitted-screenshot marker), then
        ``assistant\\n``."""
        if num_image_tokens is None:
            body = self._omitted
        else:
            body = [self._vision[0], *([self.image_token_id] * num_image_tokens), self._vision[1]]
        return ([] if first else self._newline) + self._obs_head + body + self._obs_tail

    # -- screenshots -------------------------------------------------------------------------------

    def image_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` a screenshot is resized to before processing."""
        h, w = smart_resize(
            height,
            width,
            factor=self.factor,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )
        return w, h

    def screenshot_png(self, frame: np.ndarray) -> bytes:
        """Resize a ``(H, W, 3)`` uint8 screenshot to the model's budget and encode it as PNG."""
        img = Image.fromarray(np.asarray(frame, dtype=np.uint8))
        size = self.image_size(*img.size)
        if img.size != size:
            img = img.resize(size, Image.Resampling.BICUBIC)
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def features(self, png: bytes) -> ImageFeatures:
        """The uint8 patches of a screenshot PNG (memoized, see ``feature_cache_bytes``).

        The PNG is resized to :meth:`image_size` first if it is not that size already (what the
        processor's own resize would do)."""
        key = hashlib.blake2b(png, digest_size=16).hexdigest()
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        img = Image.open(io.BytesIO(png)).convert("RGB")
        size = self.image_size(*img.size)
        if img.size != size:
            img = img.resize(size, Image.Resampling.BICUBIC)
        patches, grid = patchify(torch.from_numpy(np.array(img)), self.patch_size, self.merge_size)
        feats = ImageFeatures(
            pixel_values=patches,
            grid_thw=torch.tensor([grid], dtype=torch.long),
            num_tokens=grid[1] * grid[2] // self.merge_size**2,
        )
        if feats.nbytes <= self._cache_budget:
            self._cache[key] = feats
            self._cache_bytes += feats.nbytes
            while self._cache_bytes > self._cache_budget:
                _, old = self._cache.popitem(last=False)
                self._cache_bytes -= old.nbytes
        return feats

    @property
    def cache_bytes(self) -> int:
        """Bytes held by the feature cache now (never more than ``feature_cache_bytes``)."""
        return self._cache_bytes

    def model_pixels(
        self, pixels: torch.Tensor, dtype: torch.dtype = torch.float32, *, rows: int = 16384
    ) -> torch.Tensor:
        """The image processor's ``pixel_values`` for uint8 patches (:class:`ImageFeatures`):
        rescaled, normalized and repeated ``temporal_patch_size`` times, in ``dtype`` and on the
        patches' device. Computed in float32 ``rows`` patches at a time, so the only full-size
        tensor is the result (a micro-batch's, right before its forward pass).

        Float tensors are taken as already converted and only cast to ``dtype``.
        """
        if pixels.dtype != torch.uint8:
            return pixels.to(dtype)
        n, width = pixels.shape
        channels = self._scale.numel()
        area = width // channels
        t = self.temporal_patch_size
        out = torch.empty((n, width * t), dtype=dtype, device=pixels.device)
        scale = self._scale.to(pixels.device).view(1, channels, 1, 1)
        shift = self._shift.to(pixels.device).view(1, channels, 1, 1)
        for start in range(0, n, rows):
            chunk = pixels[start : start + rows].view(-1, channels, 1, area).float()
            chunk = chunk * scale + shift
            out[start : start + rows] = chunk.expand(-1, channels, t, area).reshape(-1, width * t)
        return out

    # -- whole sequences ---------------------------------------------------------------------------

    def encode(
        self,
        instruction: str,
        screenshots: list[bytes],
        actions: list[list[int]],
        action_logps: list[list[float]] | None = None,
    ) -> EncodedSequence:
        """Encode an episode: ``screenshots[k]`` is shown before ``actions[k]``.

        With ``len(screenshots) == len(actions) + 1`` the result is the context for the next
        turn (it ends in ``assistant\\n``); with equal lengths it is a finished trajectory.
        An action that does not end in ``<|im_end|>`` (cut at the token limit) is closed with
        one, which is not trained.
        """
        n_obs, n_act = len(screenshots), len(actions)
        if n_obs < 1 or n_act not in (n_obs, n_obs - 1):
            raise ValueError(
                f"need one screenshot before every action: {n_obs} screenshots, {n_act} actions"
            )
        keep_from = max(0, n_obs - self.max_history_images)
        seq = EncodedSequence(prompt_ids=self.header_ids(instruction))
        nan = float("nan")
        for k in range(n_obs):
            if k >= keep_from:
                feats = self.features(screenshots[k])
                seq.images.append(feats)
                seq.pngs.append(screenshots[k])
                obs = self.observation_ids(feats.num_tokens, first=k == 0)
            else:
                obs = self.observation_ids(None, first=k == 0)
            if k == 0:
                seq.prompt_ids += obs
            else:
                seq.completion_ids += obs
                seq.action_mask += [0] * len(obs)
                seq.sampling_logps += [nan] * len(obs)
            if k < n_act:
                ids = list(actions[k])
                logps = list(action_logps[k]) if action_logps is not None else [nan] * len(ids)
                if len(logps) != len(ids):
                    raise ValueError(f"turn {k}: {len(ids)} action ids but {len(logps)} log-probs")
                seq.completion_ids += ids
                seq.action_mask += [1] * len(ids)
                seq.sampling_logps += logps
                if not ids or ids[-1] != self.eos_token_id:
                    seq.completion_ids.append(self.eos_token_id)
                    seq.action_mask.append(0)
                    seq.sampling_logps.append(nan)
        return seq

    def decode_action(self, ids: list[int]) -> str:
        """Text of sampled action ids for the desktop (the closing ``<|im_end|>`` dropped, box
        tokens kept)."""
        if ids and ids[-1] == self.eos_token_id:
            ids = ids[:-1]
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def action_ids(self, text: str) -> list[int]:
        """Token ids of a written (not sampled) action, e.g. a demonstration, closed with
        ``<|im_end|>``."""
        return self._encode(text) + [self.eos_token_id]


def patchify(image: torch.Tensor, patch: int, merge: int) -> tuple[torch.Tensor, list[int]]:
    """An ``(H, W, C)`` image as Qwen-VL's patch rows, one temporal frame, dtype kept.

    Rows are ordered as the Qwen2-VL image processor orders them (each ``merge x merge`` block of
    patches contiguous, blocks row-major) and each row is ``C x patch x patch`` values, channel
    first. Returns ``(patches, [1, grid_h, grid_w])``.

    >>> img = torch.arange(28 * 56 * 3, dtype=torch.int32).view(28, 56, 3)
    >>> rows, grid = patchify(img, 14, 2)
    >>> tuple(rows.shape), grid
    ((8, 588), [1, 2, 4])
    """
    h, w, c = image.shape
    gh, gw = h // patch, w // patch
    if gh * patch != h or gw * patch != w or gh % merge or gw % merge:
        raise ValueError(f"a {w}x{h} image is not a whole number of {patch * merge} px cells")
    x = image.permute(2, 0, 1).reshape(c, gh // merge, merge, patch, gw // merge, merge, patch)
    # (blocks_h, blocks_w, merge_h, merge_w, channel, patch_h, patch_w)
    x = x.permute(1, 4, 2, 5, 0, 3, 6)
    return x.reshape(gh * gw, c * patch * patch).contiguous(), [1, gh, gw]


def batch_image_inputs(sequences: list[EncodedSequence]) -> dict[str, torch.Tensor]:
    """``pixel_values`` (uint8 patches, see :class:`ImageFeatures`) and ``image_grid_thw`` of every
    image of every sequence, in order (empty if none)."""
    feats = [f for s in sequences for f in s.images]
    if not feats:
        return {}
    return {
        "pixel_values": torch.cat([f.pixel_values for f in feats]),
        "image_grid_thw": torch.cat([f.grid_thw for f in feats]),
    }
