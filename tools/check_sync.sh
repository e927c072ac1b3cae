#!/usr/bin/env bash
# Fail when the library is not what the notebooks export, or when a notebook is not clean.
# Compares git's view of the tree before and after export+clean, so it works with local edits too.
set -euo pipefail
cd "$(dirname "$0")/.."
snap() { git status --porcelain -- platonic_ta nbs | sort; git diff -- platonic_ta nbs | sha1sum; }
before=$(snap)
.venv/bin/nbdev_export
.venv/bin/nbdev_clean
after=$(snap)
if [ "$before" != "$after" ]; then
  echo "notebooks and library are out of sync (or a notebook was not cleaned):" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  echo "fix: run .venv/bin/nbdev_export && .venv/bin/nbdev_clean, then commit the result" >&2
  exit 1
fi
tmp=$(mktemp -d)
.venv/bin/jupyter nbconvert --to markdown nbs/index.ipynb --output-dir "$tmp" --output README >/dev/null 2>&1
if ! diff -q "$tmp/README.md" README.md >/dev/null; then
  echo "README.md is not what nbs/index.ipynb renders to; fix: .venv/bin/jupyter nbconvert --to markdown nbs/index.ipynb --output-dir . --output README" >&2
  rm -rf "$tmp"; exit 1
fi
rm -rf "$tmp"
echo "sync: notebooks, library, cleaning and README agree"
