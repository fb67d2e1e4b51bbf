"""compare_pdfs with the agent's files on the ``expected`` side (official task 185f29bd puts the
PDFs the agent writes there): a missing or broken one scores its pair 0, as OSWorld does, and is
never an evaluator error."""

from __future__ import annotations

from osworld_gym.evaluators.metrics.pdf import compare_pdfs
from PIL import Image, ImageDraw


def text_pdf(path, text: str) -> str:
    img = Image.new("RGB", (400, 100), "white")
    ImageDraw.Draw(img).text((10, 40), text, fill="black")
    img.save(path, "PDF")  # an image-only PDF: no extractable text
    return str(path)


def test_compare_pdfs_scores_missing_or_broken_expected_files_0_per_pair(tmp_path):
    a = text_pdf(tmp_path / "a.pdf", "alpha")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    assert compare_pdfs([a, a], [a, None]) == 0.5
    assert compare_pdfs([a, a], [a, str(broken)]) == 0.5
    assert compare_pdfs([a, a], [a, str(tmp_path / "never-written.pdf")]) == 0.5
    assert compare_pdfs(a, str(broken)) == 0.0
    assert compare_pdfs([a], [a]) == 1.0
