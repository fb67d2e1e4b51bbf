"""Metrics on audio, video and the images inside PDFs: ``compare_audios``, ``compare_videos``,
``compare_pdf_images``.

OSWorld scores these with librosa + fastdtw (audio), OpenCV + imagehash (video) and PyMuPDF +
imagehash (PDF images). None of those is in this workspace; the same computations are done here
with numpy, ffmpeg/ffprobe (decoding) and pypdf (image extraction):

* audio: ffmpeg decodes to mono float samples at 22050 Hz (librosa.load's default); the MFCCs
  follow librosa's defaults (2048-point Hann STFT, hop 512, centred with zero padding, 128 Slaney
  mel bands, power in dB with an 80 dB floor, orthonormal DCT-II, 20 coefficients), each
  coefficient row scaled by its largest magnitude; the frames are aligned by exact DTW with
  cosine distance (OSWorld uses fastdtw, an approximation whose distance is never below the
  exact one, so a score here can be slightly higher), and the score is
  ``exp(-distance / path length)``.
* video and PDF images: the perceptual hash is imagehash's ``phash`` (grayscale, 32x32 Lanczos,
  DCT-II of rows and columns, top-left 8x8 against its median), distances in differing bits.

One deliberate deviation: OSWorld scores two unreadable audio files 1 ("perfectly similar"); here
that is 0, since an agent that can empty the expected file (a ``vm_file`` in some tasks) would
otherwise win by breaking both.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

SAMPLE_RATE = 22050
N_FFT = 2048
HOP = 512
N_MELS = 128
N_MFCC = 20
#: Seconds ffmpeg may take to decode one file.
DECODE_TIMEOUT_S = 300


# --- audio -----------------------------------------------------------------------------------


def load_audio(path: str) -> np.ndarray | None:
    """Mono float32 samples at :data:`SAMPLE_RATE`, or ``None`` if ffmpeg cannot decode any."""
    try:
        proc = subprocess.run(
            [
                "ffmpeg",
                "-v",
                "error",
                "-nostdin",
                "-i",
                path,
                "-vn",
                "-ac",
                "1",
                "-ar",
                str(SAMPLE_RATE),
                "-f",
                "f32le",
                "-",
            ],
            capture_output=True,
            timeout=DECODE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.info("cannot decode %s: %s", path, exc)
        return None
    if proc.returncode != 0:
        logger.info("cannot decode %s: %s", path, proc.stderr.decode(errors="replace")[-300:])
        return None
    samples = np.frombuffer(proc.stdout, dtype="<f4")
    return samples if samples.size else None


def _hz_to_mel(hz: np.ndarray | float) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    mel = hz / (200.0 / 3)
    log_part = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (math.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, log_part, mel)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    hz = mel * (200.0 / 3)
    log_part = 1000.0 * np.exp((math.log(6.4) / 27.0) * (mel - 15.0))
    return np.where(mel >= 15.0, log_part, hz)


def _mel_filters(sr: int) -> np.ndarray:
    """``(N_MELS, 1 + N_FFT // 2)`` triangular filters, area-normalised (Slaney)."""
    fft_hz = np.linspace(0, sr / 2, 1 + N_FFT // 2)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(sr / 2), N_MELS + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_hz[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    return weights * (2.0 / (edges[2:] - edges[:-2]))[:, None]


def _dct2_ortho(n: int, keep: int) -> np.ndarray:
    """The first ``keep`` rows of the orthonormal DCT-II matrix of size ``n``."""
    k = np.arange(keep)[:, None]
    m = np.arange(n)[None, :]
    basis = np.cos(math.pi * k * (2 * m + 1) / (2 * n)) * math.sqrt(2.0 / n)
    basis[0] /= math.sqrt(2.0)
    return basis


def mfcc(samples: np.ndarray, sr: int = SAMPLE_RATE) -> np.ndarray:
    """``(N_MFCC, frames)`` MFCCs with librosa's default parameters (module docstring)."""
    padded = np.pad(samples.astype(np.float64), N_FFT // 2)
    frames = 1 + (len(padded) - N_FFT) // HOP
    window = 0.5 - 0.5 * np.cos(2 * math.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(frames)[:, None]
    power = np.abs(np.fft.rfft(padded[idx] * window, axis=1)) ** 2  # (frames, bins)
    mel = _mel_filters(sr) @ power.T  # (mels, frames)
    db = 10.0 * np.log10(np.maximum(mel, 1e-10))
    db = np.maximum(db, db.max() - 80.0)
    return _dct2_ortho(N_MELS, N_MFCC) @ db


def _normalise_rows(features: np.ndarray) -> np.ndarray:
    """Each row divided by its largest magnitude (librosa.util.normalize, axis=1); rows that are
    all (near) zero are left as they are."""
    peak = np.abs(features).max(axis=1, keepdims=True)
    tiny = np.finfo(np.float32).tiny
    return np.where(peak > tiny, features / np.where(peak > tiny, peak, 1.0), features)


def dtw_cosine(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Exact DTW of the rows of ``a`` and ``b`` under cosine distance: ``(distance, path
    length)``. Steps are (1,0), (0,1), (1,1); computed one anti-diagonal at a time, so memory
    stays linear in the sequence lengths. A zero vector is at distance 1 from everything."""
    n, m = len(a), len(b)
    an, bn = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    au = a / np.where(an > 0, an, 1.0)[:, None]
    bu = b / np.where(bn > 0, bn, 1.0)[:, None]
    inf = np.inf
    prev2_d = np.full(n, inf)
    prev2_l = np.zeros(n, dtype=np.int64)
    prev1_d = np.full(n, inf)
    prev1_l = np.zeros(n, dtype=np.int64)
    for k in range(n + m - 1):
        lo, hi = max(0, k - m + 1), min(n - 1, k)
        i = np.arange(lo, hi + 1)
        j = k - i
        cost = 1.0 - np.einsum("ij,ij->i", au[i], bu[j])
        cost = np.where((an[i] > 0) & (bn[j] > 0), cost, 1.0)
        cur_d = np.full(n, inf)
        cur_l = np.zeros(n, dtype=np.int64)
        if k == 0:
            cur_d[0], cur_l[0] = cost[0], 1
        else:
            up_d = np.where(i > 0, prev1_d[np.maximum(i - 1, 0)], inf)  # (i-1, j)
            up_l = prev1_l[np.maximum(i - 1, 0)]
            left_d = np.where(j > 0, prev1_d[i], inf)  # (i, j-1)
            left_l = prev1_l[i]
            diag_d = np.where((i > 0) & (j > 0), prev2_d[np.maximum(i - 1, 0)], inf)
            diag_l = prev2_l[np.maximum(i - 1, 0)]
            choices = np.stack([diag_d, up_d, left_d])
            best = np.argmin(choices, axis=0)
            lengths = np.stack([diag_l, up_l, left_l])[best, np.arange(len(i))]
            cur_d[i] = cost + choices[best, np.arange(len(i))]
            cur_l[i] = lengths + 1
        prev2_d, prev2_l, prev1_d, prev1_l = prev1_d, prev1_l, cur_d, cur_l
    return float(prev1_d[n - 1]), int(prev1_l[n - 1])


def compare_audios(result: str | None, expected: str | None) -> float:
    """Similarity of two audio files in ``[0, 1]``: ``exp(-DTW distance / path length)`` of
    their normalised MFCCs (1 for the same audio). A missing or undecodable file scores 0 (see
    the module docstring for the one difference from OSWorld)."""
    if not result or not expected:
        return 0.0
    y1, y2 = load_audio(result), load_audio(expected)
    if y1 is None or y2 is None:
        logger.info(
            "compare_audios: undecodable audio (%s: %s, %s: %s)",
            result,
            y1 is not None,
            expected,
            y2 is not None,
        )
        return 0.0
    m1, m2 = _normalise_rows(mfcc(y1)), _normalise_rows(mfcc(y2))
    distance, length = dtw_cosine(m1.T, m2.T)
    logger.info("compare_audios: DTW distance %.4f over %d steps", distance, length)
    return float(math.exp(-distance / length)) if length else 0.0


# --- perceptual hash -------------------------------------------------------------------------


def phash(image: Any) -> np.ndarray:
    """imagehash's ``phash`` of a PIL image: 64 booleans."""
    from PIL import Image

    gray = image.convert("L").resize((32, 32), Image.Resampling.LANCZOS)
    pixels = np.asarray(gray, dtype=np.float64)
    k = np.arange(8)[:, None]
    n = np.arange(32)[None, :]
    basis = np.cos(math.pi * k * (2 * n + 1) / 64)  # DCT-II rows 0..7 (scale cancels out)
    low = basis @ pixels @ basis.T  # along columns, then along rows, as imagehash does
    return (low > np.median(low)).flatten()


def hash_distance(h1: np.ndarray, h2: np.ndarray) -> int:
    return int(np.count_nonzero(h1 != h2))


# --- video -----------------------------------------------------------------------------------


def _video_size(path: str) -> tuple[int, int] | None:
    try:
        proc = subprocess.run(
            [
                "ffprobe",
                "-v",
                "error",
                "-select_streams",
                "v:0",
                "-show_entries",
                "stream=width,height",
                "-of",
                "json",
                path,
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        stream = json.loads(proc.stdout or b"{}").get("streams", [])[0]
        return int(stream["width"]), int(stream["height"])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, KeyError):
        return None


def video_frames(path: str, limit: int) -> list[Any]:
    """Up to ``limit`` decoded frames of ``path`` as PIL images, every decoded frame once (no
    frame-rate conversion, as OpenCV reads them); ``[]`` if it has no readable video."""
    from PIL import Image

    size = _video_size(path)
    if size is None:
        return []
    try:
        proc = subprocess.run(
            [
                "ffmpeg",
                "-v",
                "error",
                "-nostdin",
                "-i",
                path,
                "-map",
                "0:v:0",
                "-vsync",
                "passthrough",
                "-frames:v",
                str(limit),
                "-f",
                "rawvideo",
                "-pix_fmt",
                "rgb24",
                "-",
            ],
            capture_output=True,
            timeout=DECODE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    width, height = size
    step = width * height * 3
    data = proc.stdout
    return [
        Image.frombytes("RGB", (width, height), data[o : o + step])
        for o in range(0, len(data) - step + 1, step)
    ]


def compare_videos(
    result: str | None, expected: str | None, max_frames_to_check: int = 100, threshold: int = 5
) -> float:
    """1 if the first ``max_frames_to_check`` frames match: frame pairs are compared in order,
    more than ``threshold`` pairs whose phashes differ by more than ``threshold`` bits score 0,
    and so does one video ending before the other within the checked frames (OSWorld's rule)."""
    if not result or not expected or not os.path.exists(result) or not os.path.exists(expected):
        return 0.0
    f1 = video_frames(result, max_frames_to_check)
    f2 = video_frames(expected, max_frames_to_check)
    mismatches = 0
    for a, b in zip(f1, f2, strict=False):
        if hash_distance(phash(a), phash(b)) > threshold:
            mismatches += 1
            if mismatches > threshold:
                return 0.0
    if len(f1) != len(f2):
        return 0.0  # one ended first (both capped at the limit count as "not ended")
    return 1.0


# --- PDF images ------------------------------------------------------------------------------


def pdf_images(path: str) -> list[Any]:
    """The images embedded in a PDF's pages, in page order, as PIL images."""
    from pypdf import PdfReader

    images = []
    for number, page in enumerate(PdfReader(path).pages):
        for item in page.images:
            try:
                images.append(item.image)
            except Exception as exc:  # noqa: BLE001 - one undecodable image is skipped,
                logger.info("%s page %d: skipping image %s: %s", path, number, item.name, exc)
    return images  # as OSWorld skips images PIL cannot open


def compare_pdf_images(result: str | None, expected: str | None, **_: Any) -> float:
    """Share of the PDFs' embedded images (paired in order) whose phashes differ by at most 5
    bits; 0 if a file is missing or unreadable or the counts differ, 1 if neither has images."""
    if not result or not expected or not os.path.exists(result) or not os.path.exists(expected):
        return 0.0
    try:
        images1, images2 = pdf_images(result), pdf_images(expected)
    except Exception as exc:  # noqa: BLE001 - OSWorld scores any extraction error 0
        logger.info("compare_pdf_images: cannot read images: %s", exc)
        return 0.0
    if len(images1) != len(images2):
        return 0.0
    if not images1:
        return 1.0
    close = sum(
        hash_distance(phash(a), phash(b)) <= 5 for a, b in zip(images1, images2, strict=True)
    )
    return close / len(images1)
