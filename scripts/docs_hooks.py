"""MkDocs hooks for the documentation site (mkdocs.yml names this file under `hooks:`).

Pages cite the repository's own files: tests, source modules, configs, images, the package
READMEs. MkDocs sees only `docs/`, so on its own it would report every such link as missing (or,
without --strict, build a site of dead links). Here a link from a page to a file outside `docs/`
but inside the repository is checked (the file must exist, or the strict build fails naming the
page and the link) and the file is mirrored into the site under `repository/`, keeping its path:
`../packages/arpo_trainer/configs/demo.yaml` becomes `repository/packages/arpo_trainer/configs/
demo.yaml`. A mirrored Markdown file is a page of the site (nav entries may name it, as the
package READMEs and the changelog are), its own links handled the same way, so links between
mirrored files keep working unchanged.

Links inside fenced code blocks and code spans are left alone: they are text, not links (a code
span that is a link's text, [`name`](target), is part of the link).
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.repository_links")

MIRROR = "repository"

# written on the feature branches of issues 23-26; they arrive when those branches merge

# [text](target "title") and ![alt](target); reference definitions "[id]: target"; <img src=...>
_INLINE = re.compile(r"(!?\[[^\]]*\]\()(<[^>]*>|[^)\s]+)((?:\s+\"[^\"]*\")?\))")
_REFDEF = re.compile(r"^( {0,3}\[[^\]]+\]:\s*)(<[^>]*>|\S+)", re.M)
_IMG_SRC = re.compile(r"(<img\b[^>]*?\bsrc=\")([^\"]+)(\")")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?(?<!`)\1(?!`)")
# what follows a code span inside a link's text: the rest of that text (no bracket, no line
# break), then the link's "]("
_LINK_TEXT_END = re.compile(r"[^\[\]\n`]*\]\(")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _repo_root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def _prose_parts(markdown: str) -> list[tuple[bool, str]]:
    """The text split into (is_prose, part): fenced code blocks and code spans are not prose."""
    parts: list[tuple[bool, str]] = []
    prose: list[str] = []
    fence: str | None = None
    code: list[str] = []
    for line in markdown.splitlines(keepends=True):
        m = _FENCE.match(line)
        if fence is None and m:
            parts.append((True, "".join(prose)))
            prose = []
            fence = m.group(1)
            code = [line]
        elif fence is not None:
            code.append(line)
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                parts.append((False, "".join(code)))
                fence = None
        else:
            prose.append(line)
    if fence is not None:  # an unclosed fence runs to the end, as in CommonMark
        parts.append((False, "".join(code)))
    parts.append((True, "".join(prose)))
    out: list[tuple[bool, str]] = []
    for is_prose, text in parts:
        if not is_prose:
            out.append((False, text))
            continue
        pos = 0
        for span in _CODE_SPAN.finditer(text):
            if _LINK_TEXT_END.match(text, span.end()):
                continue  # in a link's text, [`name` and more](target): the link is prose
            out.append((True, text[pos : span.start()]))
            out.append((False, span.group(0)))
            pos = span.end()
        out.append((True, text[pos:]))
    return out


def _rewrite_links(markdown: str, rewrite: Any) -> str:
    """`markdown` with each link target outside code replaced by rewrite(target) (or kept)."""

    def sub(m: re.Match[str]) -> str:
        target = m.group(2)
        bare = target[1:-1] if target.startswith("<") else target
        new = rewrite(bare)
        if new is None:
            return m.group(0)
        tail = m.group(3) if m.re is not _REFDEF else ""
        return f"{m.group(1)}{new}{tail}"

    out = []
    for is_prose, text in _prose_parts(markdown):
        if is_prose:
            for pattern in (_INLINE, _REFDEF, _IMG_SRC):
                text = pattern.sub(sub, text)
        out.append(text)
    return "".join(out)


def _outside_target(page_path: Path, target: str, docs_dir: Path, root: Path) -> Path | None:
    """The repository file a relative link points at when it lies outside docs/, else None."""
    if not target or target.startswith(("#", "/")) or _SCHEME.match(target):
        return None
    path = target.split("#", 1)[0].split("?", 1)[0]
    if not path:
        return None
    resolved = (page_path.parent / path).resolve()
    if resolved.is_relative_to(docs_dir):
        return None
    return resolved


def _mirror_uri(path: Path, root: Path) -> str:
    return posixpath.join(MIRROR, path.relative_to(root).as_posix())


def _nav_mirrored(nav: Any) -> list[str]:
    if isinstance(nav, list):
        return [uri for item in nav for uri in _nav_mirrored(item)]
    if isinstance(nav, dict):
        return [uri for value in nav.values() for uri in _nav_mirrored(value)]
    if isinstance(nav, str) and nav.startswith(MIRROR + "/"):
        return [nav]
    return []


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = _repo_root(config)
    docs_dir = Path(config.docs_dir).resolve()
    added: set[str] = {f.src_uri for f in files}

    def mirror(path: Path, in_nav: bool = False) -> None:
        uri = _mirror_uri(path, root)
        if uri in added:
            return
        added.add(uri)
        # a page reached only by a link is part of the site but needs no nav entry
        inclusion = InclusionLevel.UNDEFINED if in_nav else InclusionLevel.NOT_IN_NAV
        files.append(File.generated(config, uri, abs_src_path=str(path), inclusion=inclusion))
        if path.suffix == ".md":  # a mirrored page: its own links are followed too
            scan(path)

    def scan(page_path: Path) -> None:
        text = page_path.read_text(encoding="utf-8")
        where = page_path.relative_to(root)

        def visit(target: str) -> None:
            path = _outside_target(page_path, target, docs_dir, root)
            if path is None:
                return
            if not path.is_relative_to(root):
                log.warning("%s: link %r points outside the repository", where, target)
            elif not path.is_file():
                log.warning("%s: link %r: no such file in the repository", where, target)
            else:
                mirror(path)

        _rewrite_links(text, visit)

    for uri in _nav_mirrored(config.nav or []):
        path = root / uri.removeprefix(MIRROR + "/")
        if path.is_file():
            mirror(path, in_nav=True)
        else:
            log.warning("nav entry %r: no such file in the repository", uri)
    for f in list(files.documentation_pages()):
        if f.abs_src_path and Path(f.abs_src_path).resolve().is_relative_to(docs_dir):
            scan(Path(f.abs_src_path).resolve())
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    root = _repo_root(config)
    docs_dir = Path(config.docs_dir).resolve()
    if page.file.abs_src_path is None:
        return markdown
    page_path = Path(page.file.abs_src_path).resolve()
    mirrored = not page_path.is_relative_to(docs_dir)
    here = posixpath.dirname(page.file.src_uri) or "."

    def rewrite(target: str) -> str | None:
        anchor = target[len(target.split("#", 1)[0]) :]
        if mirrored:
            # a mirrored page's links to other repository files already match the mirror's
            # layout; only its links into docs/ need the site's path
            if not target or target.startswith(("#", "/")) or _SCHEME.match(target):
                return None
            real = (page_path.parent / target.split("#", 1)[0].split("?", 1)[0]).resolve()
            if not real.is_relative_to(docs_dir):
                return None
            return posixpath.relpath(real.relative_to(docs_dir).as_posix(), here) + anchor
        path = _outside_target(page_path, target, docs_dir, root)
        if path is None or not path.is_relative_to(root) or not path.is_file():
            return None  # not ours, or already reported by on_files (MkDocs reports it again)
        return posixpath.relpath(_mirror_uri(path, root), here) + anchor

    return _rewrite_links(markdown, rewrite)
