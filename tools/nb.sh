#!/usr/bin/env bash
# Notebook authoring helper (dev only). Usage:
#   tools/nb.sh build 00_world   _src/00_world.py -> nbs/00_world.ipynb, then export + clean
#   tools/nb.sh src 00_world     nbs/00_world.ipynb -> _src/00_world.py (to edit)
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=$1; name=${2%.ipynb}; name=${name%.py}; name=${name#nbs/}; name=${name#_src/}
case $cmd in
  build) upd=(); [ -f "nbs/$name.ipynb" ] && upd=(--update)   # --update keeps cell ids: no churn in the exported .py
         .venv/bin/jupytext --to ipynb "${upd[@]}" --set-kernel python3 "_src/$name.py" -o "nbs/$name.ipynb" -q
         .venv/bin/nbdev_export; .venv/bin/nbdev_clean --fname "nbs/$name.ipynb" ;;
  src)   mkdir -p _src; .venv/bin/jupytext --to py:percent "nbs/$name.ipynb" -o "_src/$name.py" -q ;;
  *) echo "usage: tools/nb.sh build|src NAME" >&2; exit 2 ;;
esac
