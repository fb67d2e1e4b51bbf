"""compare_docx_files and compare_pdfs on generated documents (python-docx, a tiny PDF writer,
and LibreOffice conversions for real-world files)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import docx
import pytest
from osworld_gym.evaluators.metrics.docs import compare_docx_files
from osworld_gym.evaluators.metrics.pdf import compare_pdfs


def write_docx(path: Path, paragraphs: list[str]) -> str:
    doc = docx.Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    doc.save(path)
    return str(path)


def write_odt(path: Path, paragraphs: list[str]) -> str:
    """An OpenDocument text file with one ``text:p`` per entry (odfpy writes the package)."""
    from odf.opendocument import OpenDocumentText
    from odf.text import P

    doc = OpenDocumentText()
    for text in paragraphs:
        doc.text.addElement(P(text=text))
    doc.save(str(path))
    return str(path)


def write_pdf(path: Path, lines: list[str]) -> str:
    """A one-page PDF with ``lines`` in Helvetica, written by hand (no PDF library)."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    stream = "BT /F1 12 Tf 72 720 Td " + " ".join(f"({esc(t)}) Tj 0 -16 Td" for t in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    path.write_bytes(out)
    return str(path)


# -- compare_docx_files -------------------------------------------------------------------------


def test_docx_default_compares_whitespace_collapsed_text(tmp_path):
    gold = write_docx(tmp_path / "gold.docx", ["Dear team,", "The meeting is at 10."])
    spaced = write_docx(tmp_path / "spaced.docx", ["Dear  team, ", "", "The meeting is at 10."])
    other = write_docx(tmp_path / "other.docx", ["Dear team,", "The meeting is at 11."])
    assert compare_docx_files(spaced, gold) == 1.0
    assert compare_docx_files(other, gold) == 0.0


def test_docx_paragraph_mode_options(tmp_path):
    gold = write_docx(tmp_path / "gold.docx", ["Alpha", "Beta"])
    upper = write_docx(tmp_path / "upper.docx", ["ALPHA", "BETA"])
    blank = write_docx(tmp_path / "blank.docx", ["Alpha", "", "Beta"])
    reordered = write_docx(tmp_path / "reordered.docx", ["Beta", "Alpha"])
    strict = {"ignore_blanks": False}
    assert compare_docx_files(upper, gold, **strict) == 0.0
    assert compare_docx_files(upper, gold, **strict, ignore_case=True) == 1.0
    assert compare_docx_files(blank, gold, **strict) == 0.0
    assert compare_docx_files(blank, gold, **strict, delete_empty_lines=True) == 1.0
    assert compare_docx_files(reordered, gold, **strict) == 0.0
    assert compare_docx_files(reordered, gold, **strict, ignore_order=True) == 1.0


def test_docx_fuzzy_and_content_only_give_ratios(tmp_path):
    gold = write_docx(tmp_path / "gold.docx", ["colour scheme"])
    near = write_docx(tmp_path / "near.docx", ["color scheme"])
    assert compare_docx_files(near, gold) == 0.0
    assert 0.9 < compare_docx_files(near, gold, fuzzy_match=True) < 1.0
    assert 0.9 < compare_docx_files(near, gold, content_only=True) < 1.0
    assert 0.9 < compare_docx_files(near, gold, ignore_blanks=False, fuzzy_match=True) < 1.0
    assert compare_docx_files(gold, gold, content_only=True) == 1.0


def test_docx_missing_mismatched_or_broken_result_scores_zero(tmp_path):
    gold = write_docx(tmp_path / "gold.docx", ["x"])
    broken = tmp_path / "broken.docx"
    broken.write_text("not a zip")
    assert compare_docx_files(None, gold) == 0.0
    assert compare_docx_files(str(broken), gold) == 0.0
    assert compare_docx_files(write_odt(tmp_path / "x.odt", ["x"]), gold) == 0.0
    with pytest.raises(NotImplementedError, match="option 'compare_style'"):
        compare_docx_files(gold, gold, compare_style=True)


def test_odt_paragraphs(tmp_path):
    gold = write_odt(tmp_path / "gold.odt", ["One", "Two"])
    assert compare_docx_files(write_odt(tmp_path / "same.odt", ["One", "Two"]), gold) == 1.0
    assert compare_docx_files(write_odt(tmp_path / "diff.odt", ["One", "Three"]), gold) == 0.0


# -- compare_pdfs -------------------------------------------------------------------------------


def test_pdfs_same_text_score_one_and_different_text_less(tmp_path):
    gold = write_pdf(tmp_path / "gold.pdf", ["Quarterly report", "Revenue grew by 12 percent."])
    same = write_pdf(tmp_path / "same.pdf", ["Quarterly report", "Revenue grew by 12 percent."])
    other = write_pdf(tmp_path / "other.pdf", ["Shopping list", "milk, eggs"])
    assert compare_pdfs(same, gold) == 1.0
    assert compare_pdfs(other, gold) < 0.5


def test_pdfs_lists_missing_and_broken_results(tmp_path):
    a = write_pdf(tmp_path / "a.pdf", ["alpha"])
    b = write_pdf(tmp_path / "b.pdf", ["beta"])
    broken = tmp_path / "broken.pdf"
    broken.write_text("nope")
    assert compare_pdfs([a, b], [a, b]) == 1.0
    assert compare_pdfs([a, None], [a, b]) == 0.5
    assert compare_pdfs(str(broken), a) == 0.0
    assert compare_pdfs(None, a) == 0.0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice is not installed")
def test_libreoffice_exports(tmp_path):
    """Real files: LibreOffice converts .docx to .odt and .pdf; the metrics read them."""
    src = tmp_path / "src"
    src.mkdir()
    write_docx(src / "letter.docx", ["Dear Ada,", "Your order 42 has shipped.", "Regards"])
    write_docx(src / "other.docx", ["Hello Bob,", "Nothing has shipped yet."])
    out = tmp_path / "out"
    profile = f"-env:UserInstallation=file://{tmp_path}/lo-profile"
    for fmt in ("pdf", "odt"):
        subprocess.run(
            [
                "soffice",
                profile,
                "--headless",
                "--convert-to",
                fmt,
                "--outdir",
                str(out),
                str(src / "letter.docx"),
                str(src / "other.docx"),
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
    gold_pdf = write_pdf(
        tmp_path / "gold.pdf", ["Dear Ada,", "Your order 42 has shipped.", "Regards"]
    )
    assert compare_pdfs(str(out / "letter.pdf"), str(out / "letter.pdf")) == 1.0
    assert compare_pdfs(str(out / "letter.pdf"), gold_pdf) > 0.9
    assert compare_pdfs(str(out / "other.pdf"), gold_pdf) < 0.7
    gold_odt = write_odt(
        tmp_path / "gold.odt", ["Dear Ada,", "Your order 42 has shipped.", "Regards"]
    )
    assert compare_docx_files(str(out / "letter.odt"), gold_odt) == 1.0
    assert compare_docx_files(str(out / "other.odt"), gold_odt) == 0.0


# -- parity: .odt text as OSWorld's odfpy reader sees it ------------------------------------------


def test_odt_text_drops_tabs_spaces_links_and_nested_spans_like_osworld(tmp_path):
    from odf.opendocument import OpenDocumentText
    from odf.text import A, P, S, Span, Tab

    doc = OpenDocumentText()
    p = P(text="Total")
    p.addElement(Tab())
    p.addText("42")
    doc.text.addElement(p)
    q = P(text="See ")
    q.addElement(A(href="https://example.org", text="the site"))
    q.addElement(S(c=3))
    outer = Span(text="now")
    outer.addElement(Span(text=" nested"))
    q.addElement(outer)
    doc.text.addElement(q)
    doc.save(str(tmp_path / "r.odt"))
    # what OSWorld reads: "Total42" and "See now"
    assert (
        compare_docx_files(
            str(tmp_path / "r.odt"),
            write_odt(tmp_path / "g.odt", ["Total42", "See now"]),
            ignore_blanks=False,
        )
        == 1.0
    )
    assert (
        compare_docx_files(
            str(tmp_path / "r.odt"),
            write_odt(tmp_path / "g2.odt", ["Total\t42", "See the site    now nested"]),
            ignore_blanks=False,
        )
        == 0.0
    )
