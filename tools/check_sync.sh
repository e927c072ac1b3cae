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
echo "sync: notebooks, library and cleaning agree"
