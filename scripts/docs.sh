#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/) with every MkDocs check an error: missing pages,
# files and anchors, absolute links, pages left out of the nav, and links from pages to repository
# files (scripts/docs_hooks.py). No internet needed: external links are not fetched. A few
# seconds; scripts/lint.sh runs it. The pages' Python snippets run in tests/test_docs.py.
#
#   bash scripts/docs.sh                  check only (the site goes to a temporary directory)
#   bash scripts/docs.sh --site-dir site  keep the built site (open site/index.html)
#   bash scripts/docs.sh -f other.yml     any other `mkdocs build` option
set -uo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Not --quiet: with it, mkdocs 1.6 --strict does not count warnings and exits 0 on broken links.
# Its INFO lines are left out here instead. Material for MkDocs' end-of-life banner (May 2027) is
# switched off; mkdocs.yml records the choice and the way on.
NO_MKDOCS_2_WARNING=1 uv run --frozen mkdocs build --strict --site-dir "$tmp/site" "$@" \
  >"$tmp/log" 2>&1
rc=$?
grep -v '^INFO ' "$tmp/log"
if [ "$rc" != 0 ]; then
  echo "docs.sh: the documentation site does not build (above)" >&2
fi
exit "$rc"
