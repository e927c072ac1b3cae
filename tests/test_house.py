"""Checks that protect a user of the checkout: nothing reads a pickle (a saved file can never run code), and no tracked
text points at a path that exists only on one machine or outside the repository (a user would find nothing there)."""
import json, re, subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# --- no pickle ----------------------------------------------------------------------------------------------------
PK = 'pic' 'kle'     # spelt in two pieces so that this file does not match its own patterns

def pickle_reads(text: str) -> list:
    "Every place in `text` that imports a pickle module or reads a pickle (torch.load without weights_only=True)."
    bad = [m.group(0) for m in re.finditer(rf'^\s*(import|from)\s+(c?{PK}|dill|joblib|shelve)\b', text, re.M)]
    bad += [m.group(0) for m in re.finditer(rf'{PK}\.loads?\(|np\.load\([^)]*allow_{PK}\s*=\s*True|read_{PK}\(|from_{PK}\(', text)]
    bad += [m.group(0) for m in re.finditer(r'torch\.load\(([^()]|\([^()]*\))*\)', text)
            if not re.search(r'weights_only\s*=\s*True', m.group(0))]
    return bad

def test_no_pickle_is_read_anywhere():
    "No module, test, tool, benchmark or notebook reads a pickle."
    files = [p for d in ('platonic_ta', 'tests', 'tools', 'bench') for p in (ROOT / d).rglob('*.py')]
    files += list((ROOT / 'nbs').glob('*.ipynb'))
    assert len(files) > 10
    bad = []
    for p in files:
        text = p.read_text()
        if p.suffix == '.ipynb': text = '\n'.join(''.join(c['source']) for c in json.loads(text)['cells'])
        bad += [(p.name, b) for b in pickle_reads(text)]
    assert not bad, f'pickle reads: {bad}'

@pytest.mark.parametrize('line', [f'import {PK}', f'x = {PK}.load(f)', "torch.lo" "ad('w.pt')",
                                  "torch.lo" "ad(p, map_location='cpu')", f'np.load(p, allow_{PK}=True)'])
def test_a_planted_pickle_read_is_caught(line):
    assert pickle_reads(line), line

def test_safe_reads_are_not_flagged():
    assert pickle_reads("torch.load(p, map_location='cpu', weights_only=True)\nload_file(str(p))") == []


# --- paths --------------------------------------------------------------------------------------------------------
# A path of one machine (a home folder, this project's build machine) or one that climbs out of the checkout.
# The patterns are spelt so that this file does not match them.
PATHS = re.compile(r'(?<![\w.])(?:/home/\w+|/Users/\w+|[A-Z]:\\Users\\|/wo' r'rk/|/ro' r'ot/)|(?<![\w.])\.\./(?:\.\./)*sha' r'red\b')

TEXT = re.compile(r'(\.(py|ipynb|md|qmd|ini|cfg|toml|ya?ml|sh|json|txt)|Makefile|\.gitignore|\.ci/run)$')

def tracked_text_files(root: Path) -> list:
    "The tracked text files of the checkout at `root` (git's index)."
    r = subprocess.run(['git', 'ls-files', '-z'], cwd=root, capture_output=True, text=True)
    if r.returncode != 0: pytest.skip(f'not a git checkout ({r.stderr.strip()}): nothing to scan')
    return [root / p for p in r.stdout.split('\0') if p and TEXT.search(p) and (root / p).is_file()]

def path_hits(files, root: Path) -> list:
    "'path:line: text' for every machine-specific or outside path in `files`."
    return [f'{p.relative_to(root)}:{n}: {m.group(0)!r}' for p in files
            for n, line in enumerate(p.read_text(encoding='utf-8', errors='replace').splitlines(), 1)
            for m in PATHS.finditer(line)]

def test_no_tracked_text_points_outside_the_checkout():
    files = tracked_text_files(ROOT)
    assert len(files) > 20 and any(p.suffix == '.ipynb' for p in files), f'the scan saw only {len(files)} files'
    hits = path_hits(files, ROOT)
    assert not hits, 'paths a user would not have (use a path inside the repository, or a parameter):\n' + '\n'.join(hits)

def test_a_planted_path_is_caught(tmp_path):
    "A temporary repository holding one tracked notebook with a machine path: the scan reports that line only."
    nb = tmp_path / 'nbs' / 'x.ipynb'
    nb.parent.mkdir()
    nb.write_text('{"cells": [{"cell_type": "markdown", "source": ["# X\\n", "read /ho' 'me/alice/data.csv\\n"]}]}\n')
    (tmp_path / 'README.md').write_text('# clean: tmp_path / "x", ~/.cache/platonic_ta, nbs/../README.md\n')
    subprocess.run(['git', 'init', '-q'], cwd=tmp_path, check=True)
    subprocess.run(['git', 'add', '.'], cwd=tmp_path, check=True)
    files = tracked_text_files(tmp_path)
    assert sorted(p.name for p in files) == ['README.md', 'x.ipynb']
    hits = path_hits(files, tmp_path)
    assert len(hits) == 1 and hits[0].startswith('nbs/x.ipynb:1:'), hits
