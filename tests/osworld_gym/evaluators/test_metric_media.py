"""compare_audios, compare_videos and compare_pdf_images on small generated files.

The files are made here with ffmpeg (tones, a test pattern) and Pillow (PDFs embedding an
image), so each case knows its right answer: the same content scores 1, and the near misses
score what OSWorld's librosa/OpenCV/PyMuPDF implementations give for them (a different tone well
below 1, a flipped or shortened video 0, a different image 0).

Checked once against OSWorld's libraries (librosa 0.11 + fastdtw, OpenCV + imagehash) on these
files: audio 1.0 / 0.998 / 0.9969 / 0.3595 there against 1.0 / 0.9985 / 0.9977 / 0.3599 here
(same tone, mp3 vs wav, 5 Hz detune, octave); the video scores were identical, and so was the
phash of :func:`picture` (``ac17c31d831f9a65``), asserted below.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from osworld_gym.evaluators import metric
from osworld_gym.evaluators.metrics.media import dtw_cosine, load_audio, mfcc, phash
from PIL import Image, ImageDraw

pytestmark = pytest.mark.skipif(
    shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None,
    reason="media metrics decode with ffmpeg (scripts/install.sh)",
)


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True, timeout=120)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("media")
    for freq in (440, 445, 880):
        ffmpeg("-f", "lavfi", "-i", f"sine=frequency={freq}:duration=3", str(d / f"tone{freq}.mp3"))
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=3", str(d / "tone440.wav"))
    ffmpeg("-f", "lavfi", "-i", "testsrc=duration=3:size=160x120:rate=10", str(d / "video.mp4"))
    ffmpeg("-i", str(d / "video.mp4"), "-vf", "vflip", str(d / "flipped.mp4"))
    ffmpeg("-i", str(d / "video.mp4"), "-t", "2", str(d / "short.mp4"))
    (d / "broken.mp3").write_bytes(b"not audio at all")
    return d


def test_compare_audios_scores_the_same_sound_1_and_a_different_pitch_low(media):
    compare = metric("compare_audios")
    assert compare(str(media / "tone440.mp3"), str(media / "tone440.mp3")) == pytest.approx(1.0)
    # the same tone in another container decodes to nearly the same samples
    assert compare(str(media / "tone440.mp3"), str(media / "tone440.wav")) > 0.99
    near = compare(str(media / "tone440.mp3"), str(media / "tone445.mp3"))
    octave = compare(str(media / "tone440.mp3"), str(media / "tone880.mp3"))
    assert 0.9 < near < 1.0  # a 5 Hz detune is close, but not the same
    assert 0.0 < octave < 0.6  # an octave apart is far
    assert 0.0 <= octave < near


def test_compare_audios_missing_or_undecodable_files_score_0(media):
    compare = metric("compare_audios")
    assert compare(None, str(media / "tone440.mp3")) == 0.0
    assert compare(str(media / "broken.mp3"), str(media / "tone440.mp3")) == 0.0
    assert compare(str(media / "nope.mp3"), str(media / "tone440.mp3")) == 0.0
    # OSWorld scores two unreadable files 1; an agent could empty both, so here it is 0
    assert compare(str(media / "broken.mp3"), str(media / "broken.mp3")) == 0.0


def test_mfcc_frames_follow_librosa_defaults(media):
    samples = load_audio(str(media / "tone440.wav"))
    assert samples is not None and len(samples) == 3 * 22050
    features = mfcc(samples)
    assert features.shape == (20, 1 + len(samples) // 512)  # centred frames, hop 512
    assert np.isfinite(features).all()


def test_dtw_cosine_on_hand_made_sequences():
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert dtw_cosine(a, a) == (0.0, 2)
    # b repeats a's first frame: the path stretches over it at no cost
    b = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    distance, length = dtw_cosine(a, b)
    assert distance == pytest.approx(0.0, abs=1e-12) and length == 3
    # orthogonal frames cost 1 each, opposite frames 2
    c = np.array([[0.0, 1.0], [-1.0, 0.0]])
    distance, length = dtw_cosine(np.array([[1.0, 0.0]]), c)
    assert (distance, length) == (pytest.approx(3.0), 2)
    assert dtw_cosine(np.zeros((1, 2)), np.array([[1.0, 0.0]])) == (1.0, 1)


def test_compare_videos_same_video_1_flipped_or_shorter_0(media):
    compare = metric("compare_videos")
    assert compare(str(media / "video.mp4"), str(media / "video.mp4")) == 1.0
    assert compare(str(media / "flipped.mp4"), str(media / "video.mp4")) == 0.0
    assert compare(str(media / "short.mp4"), str(media / "video.mp4")) == 0.0
    assert compare(str(media / "nope.mp4"), str(media / "video.mp4")) == 0.0
    # only the first frames are checked: a 20-frame prefix agrees with the 30-frame video
    assert (
        compare(str(media / "short.mp4"), str(media / "video.mp4"), max_frames_to_check=15) == 1.0
    )


def picture(seed: int) -> Image.Image:
    img = Image.new("RGB", (128, 96), (250, 250, 250))
    draw = ImageDraw.Draw(img)
    for i in range(6):
        x = (seed * 37 + i * 53) % 100
        draw.rectangle([x, i * 15, x + 20, i * 15 + 12], fill=(20, 20, 20))
    return img


def pdf(path: Path, images: list[Image.Image]) -> str:
    if images:
        images[0].save(path, "PDF", save_all=True, append_images=images[1:])
    else:  # a blank page, no image
        from pypdf import PdfWriter

        writer = PdfWriter()
        writer.add_blank_page(100, 100)
        writer.write(path)
    return str(path)


def test_compare_pdf_images(tmp_path):
    compare = metric("compare_pdf_images")
    gold = pdf(tmp_path / "gold.pdf", [picture(1), picture(2)])
    assert compare(pdf(tmp_path / "same.pdf", [picture(1), picture(2)]), gold) == 1.0
    # one of two images differs: half the pairs match
    assert compare(pdf(tmp_path / "half.pdf", [picture(1), picture(9)]), gold) == 0.5
    # a JPEG re-encoding of the same pictures still matches by perceptual hash
    jpeg = tmp_path / "jpeg.pdf"
    picture(1).save(jpeg, "PDF", save_all=True, append_images=[picture(2)], quality=60)
    assert compare(str(jpeg), gold) == 1.0
    assert compare(pdf(tmp_path / "one.pdf", [picture(1)]), gold) == 0.0  # count differs
    assert compare(pdf(tmp_path / "blank.pdf", []), gold) == 0.0
    assert compare(pdf(tmp_path / "blank.pdf", []), pdf(tmp_path / "blank2.pdf", [])) == 1.0
    assert compare(str(tmp_path / "missing.pdf"), gold) == 0.0
    (tmp_path / "junk.pdf").write_bytes(b"%PDF-1.4 junk")
    assert compare(str(tmp_path / "junk.pdf"), gold) == 0.0


def test_phash_is_stable_under_scaling_and_sees_a_flip():
    img = picture(3)
    assert (phash(img) == phash(img.resize((256, 192)))).sum() >= 60
    flipped = img.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
    assert (phash(img) != phash(flipped)).sum() > 5
    bits = "".join("1" if b else "0" for b in phash(img))
    assert f"{int(bits, 2):016x}" == "ac17c31d831f9a65"  # imagehash.phash's value
    assert phash(img).shape == (64,) and math.isclose(phash(img).mean(), 0.5, abs_tol=0.05)
