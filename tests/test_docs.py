"""The documentation: its Python snippets run as written, and its link checks catch what they claim.

Every ```python block in docs/**/*.md and in the package READMEs (each wheel's PyPI page) runs in
a fresh interpreter in an empty directory and must exit 0; a snippet states what it shows with
`assert`. An HTML comment on the line just before a block changes that, invisibly on the site and
on PyPI:

    <!-- snippet: desktop -->          needs a real desktop (marked `desktop`)
    <!-- snippet: slow -->             takes more than a few seconds (marked `slow`)
    <!-- snippet: skip: <reason> -->   not run here, for the reason given (a GPU, a served model)
    <!-- snippet: continued -->        runs after the page's previous block, in the same process

The README's own notebook example runs in tests/test_readme.py (and from the built wheel in
scripts/check_wheels.py); the osworld-gym README repeats it, which the last test here checks.

`bash scripts/docs.sh` builds the site with `mkdocs build --strict` (scripts/lint.sh runs it); the
tests below build small sites with the same hooks to show that a broken link or anchor, to a page
or to a repository file, fails that build.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md")) + sorted(ROOT.glob("packages/*/README.md"))

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\w*)")
_DIRECTIVE = re.compile(r"^<!--\s*snippet:\s*(.*?)\s*-->\s*$")
DIRECTIVES = ("desktop", "slow", "skip", "continued")


@dataclass
class Snippet:
    page: Path
    line: int
    code: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def snippets(page: Path) -> list[Snippet]:
    """The page's ```python blocks, each with the page's earlier blocks it continues."""
    out: list[Snippet] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.groups()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        if lang in ("python", "py"):
            directives: dict[str, str] = {}
            d = _DIRECTIVE.match(lines[i - 1]) if i else None
            rest = d.group(1) if d else ""
            while rest:  # "a, b, skip: a reason, which may hold commas"
                item, _, rest = rest.partition(",")
                name, colon, arg = item.strip().partition(":")
                if name not in DIRECTIVES:
                    raise ValueError(f"{page}:{i}: unknown snippet directive {name!r}")
                if colon:  # an argument runs to the end of the comment
                    arg, rest = f"{arg},{rest}" if rest else arg, ""
                directives[name] = arg.strip()
            code = "\n".join(lines[i + 1 : end]) + "\n"
            if "continued" in directives:
                if not out:
                    raise ValueError(f"{page}:{i + 1}: 'continued' snippet with no block before")
                code = out[-1].code + code
            out.append(Snippet(page, i + 1, code, directives))
        i = end + 1
    return out


def _params() -> list:
    params = []
    for page in PAGES:
        for s in snippets(page):
            marks = [getattr(pytest.mark, m) for m in ("desktop", "slow") if m in s.directives]
            if "skip" in s.directives:
                marks.append(pytest.mark.skip(reason=s.directives["skip"] or "marked skip"))
            params.append(pytest.param(s, id=s.id, marks=marks))
    return params


@pytest.mark.parametrize("snippet", _params())
def test_snippet_runs(snippet: Snippet, tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", snippet.code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, f"{snippet.id} failed:\n{out.stderr[-4000:]}"


def test_the_collector_reads_directives_and_continuations(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        textwrap.dedent(
            """\
            text
            ```python
            x = 1
            ```
            <!-- snippet: continued, slow -->
            ```python
            assert x == 1
            ```
            ```bash
            echo not python
            ```
            <!-- snippet: desktop, skip: needs a GPU, and a model -->
            ````python
            import torch
            ```
            ````
            """
        )
    )
    got = snippets(page)
    assert [(s.line, s.directives) for s in got] == [
        (2, {}),
        (6, {"continued": "", "slow": ""}),
        (13, {"desktop": "", "skip": "needs a GPU, and a model"}),
    ]
    assert got[1].code == "x = 1\nassert x == 1\n"
    assert got[2].code == "import torch\n```\n"
    page.write_text("<!-- snippet: dektop -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="unknown snippet directive 'dektop'"):
        snippets(page)


def test_a_failing_snippet_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nassert 1 + 1 == 3\n```\n")
    (s,) = snippets(page)
    out = subprocess.run([sys.executable, "-c", s.code], capture_output=True, text=True)
    assert out.returncode != 0 and "AssertionError" in out.stderr


def test_the_package_readme_repeats_the_notebook_example():
    """osworld-gym's PyPI page shows the README's notebook example, and that one runs in CI."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## In a notebook") :]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    ours = (ROOT / "packages/osworld_gym/README.md").read_text()
    assert example in ours


# --- the site's link checks ----------------------------------------------------------------------


def site_project(tmp_path: Path, pages: dict[str, str], nav: list[str] | None = None) -> Path:
    """A small repository whose site uses the project's hooks and strict checks; its mkdocs.yml."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / "src" / "mod.py").write_text("x = 1\n")
    (repo / "notes.md").write_text("# Notes\n\n## A section\n\nSee [the module](src/mod.py).\n")
    for name, text in pages.items():
        (repo / "docs" / name).write_text(text)
    config = textwrap.dedent(
        f"""\
        site_name: t
        strict: true
        hooks: [{ROOT / "scripts" / "docs_hooks.py"}]
        validation:
          nav: {{omitted_files: warn, not_found: warn, absolute_links: warn}}
          links: {{not_found: warn, absolute_links: warn, unrecognized_links: warn, anchors: warn}}
        """
    )
    if nav is not None:
        config += "nav:\n" + "".join(f"  - {entry}\n" for entry in nav)
    (repo / "mkdocs.yml").write_text(config)
    return repo / "mkdocs.yml"


def build_site(tmp_path: Path, pages: dict[str, str], nav: list[str] | None = None) -> str:
    """Build `site_project`'s site into tmp_path/site; return its log, or raise with it."""
    config = site_project(tmp_path, pages, nav)
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(tmp_path / "site")],
        cwd=config.parent,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    return out.stderr


def test_links_into_the_repository_are_checked_and_mirrored(tmp_path):
    log = build_site(
        tmp_path,
        {
            "index.md": "# Home\n\nThe [module](../src/mod.py), the [notes](../notes.md#a-section),"
            " [other](other.md#there), [`mod.py`](../src/mod.py),"
            " [the `x = 1` module](../src/mod.py).\n\n"
            "`[not a link](../missing.py)`\n\n"
            "```\n[nor this](../missing.py)\n```\n",
            "other.md": "# Other\n\n## There\n",
        },
    )
    assert "WARNING" not in log
    site = tmp_path / "site"
    assert (site / "repository" / "src" / "mod.py").read_text() == "x = 1\n"
    html = (site / "index.html").read_text()
    assert 'href="repository/src/mod.py"' in html
    # a code span as the link's text: still a link, rewritten like the others
    assert '<a href="repository/src/mod.py"><code>mod.py</code></a>' in html
    # a code span inside a longer link text too (it was left unrewritten: a broken link)
    assert '<a href="repository/src/mod.py">the <code>x = 1</code> module</a>' in html
    assert 'href="repository/notes/#a-section"' in html
    # the mirrored page's own link to a repository file works in the mirror too
    assert 'href="../src/mod.py"' in (site / "repository" / "notes" / "index.html").read_text()


@pytest.mark.parametrize(
    ("link", "message"),
    [
        ("../missing.py", "docs/index.md: link '../missing.py': no such file in the repository"),
        ("../../outside.md", "link '../../outside.md' points outside the repository"),
        ("../notes.md#no-such-section", "does not contain an anchor"),
        ("other.md#nowhere", "does not contain an anchor"),
        ("gone.md", "the target is not found among documentation files"),
    ],
)
def test_a_broken_link_fails_the_build_naming_it(tmp_path, link, message):
    (tmp_path / "outside.md").write_text("# Outside\n")
    with pytest.raises(AssertionError, match=re.escape(message)):
        build_site(
            tmp_path,
            {"index.md": f"# Home\n\n[broken]({link})\n", "other.md": "# Other\n"},
        )


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path):
    with pytest.raises(AssertionError, match='not included in the "nav" configuration'):
        build_site(tmp_path, {"index.md": "# Home\n", "other.md": "# Other\n"}, nav=["index.md"])


def test_the_ci_script_fails_on_a_broken_link(tmp_path):
    """scripts/docs.sh (run by scripts/lint.sh) exits non-zero and names the link.

    (`mkdocs build --strict --quiet` exits 0 with broken links: the script must not be quiet.)
    """
    config = site_project(tmp_path, {"index.md": "# Home\n\n[broken](../missing.py)\n"})
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "docs.sh"), "-f", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "link '../missing.py': no such file in the repository" in out.stdout
    assert "the documentation site does not build" in out.stderr
