"""The project speaks only of itself: no tracker references, no work-process vocabulary, no pointers to files
outside the repository, in any tracked text (code, notebooks, README, docs, tests, tools, Makefile, settings)."""
import re, subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each pattern names one kind of outside reference. They are written so that legitimate code does not match:
# tqdm `bar` variables, the sliders' `bars` data and "error bars:" in a figure title, `slider_session`, pytest's
# session scope, "an interactive session", and the audio world's musical notes all stay clean (checked below).
# The pattern texts themselves are spelt so that this file does not match them.
HOUSE = {
    'tracker reference': r'\bissues?\s*(?:#|no\.\s*)?\s*\d+\b|\bissue[ -](?:bar|tracker|number|list|board)s?\b|\bgh-\d+\b',
    'process bar': r'(?:^|[#>*"]\s*|\bthe\s+)bars?:|\b\d+[- ]?(?:minute|min|second)[- ]bars?\b'
                      r'|\b(?:speed|acceptance|quality|review|budget|test[- ]time)[- ]bars?\b',
    'work session': r'\bsessions?\s*#?\s*\d+\b|\b(?:previous|last|next|earlier|later|prior|this) sessions?\b'
                    r'|\bsession[- ](?:notes?|log|brief|report|handoff)\b',
    'working note': r'\bnotes?/|\b(?:helper|lead|design|meeting|review|handoff|hand-off)[- ]notes?\b'
                    r'|\bsee (?:the |my |our )?notes?\b|\blead engineer\b',
    'outside file': r'\bDESIGN[.]md\b|[.][.][/\\]shared\b|\bshared[/\\]paper\b|/work[/\\]',
}
_HOUSE = {k: re.compile(v, re.IGNORECASE) for k, v in HOUSE.items()}
# a line is matched against a kind's pattern only when it holds one of these words (lower case): the scan stays fast
_WORDS = {'tracker reference': ('issue', 'gh-'), 'process bar': ('bar',), 'work session': ('session',),
          'working note': ('note', 'engineer'), 'outside file': ('design', 'shared', '/work')}

TEXT = re.compile(r'(\.(py|ipynb|md|qmd|ini|cfg|toml|ya?ml|sh|json|txt)|Makefile|\.gitignore|\.ci/run)$')


def house_hits(text: str) -> list:
    "(line number, kind, matched text) for every outside reference in `text`."
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        low = line.lower()
        for kind, rx in _HOUSE.items():
            if any(w in low for w in _WORDS[kind]): out += [(n, kind, m.group(0).strip()) for m in rx.finditer(line)]
    return out


def tracked_text_files(root: Path) -> list:
    "The tracked text files of the checkout at `root` (git's index), without the shipped weights."
    r = subprocess.run(['git', 'ls-files', '-z'], cwd=root, capture_output=True, text=True)
    if r.returncode != 0: pytest.skip(f'not a git checkout ({r.stderr.strip()}): nothing to scan')
    return [root / p for p in r.stdout.split('\0') if p and TEXT.search(p) and (root / p).is_file()]


def scan(files, root: Path) -> list:
    "'path:line: kind: text' for every outside reference in `files`."
    return [f'{p.relative_to(root)}:{n}: {kind}: {hit!r}' for p in files
            for n, kind, hit in house_hits(p.read_text(encoding='utf-8', errors='replace'))]


def test_tracked_text_speaks_only_of_the_project():
    files = tracked_text_files(ROOT)
    assert len(files) > 20 and any(p.suffix == '.ipynb' for p in files), f'the scan saw only {len(files)} files'
    hits = scan(files, ROOT)
    assert not hits, 'outside references (say it in the project\'s own words, or link a page of the project):\n' + '\n'.join(hits)


# words planted one per line; each must be caught, under the kind it belongs to (written with a '|' that is taken out
# before the check, so that this file itself stays clean)
PLANTED = [(l.replace('|', ''), k) for l, k in [
    ('see iss|ue #12 for the plan', 'tracker reference'), ('fixed under the iss|ue bar', 'tracker reference'),
    ('# ba|rs: 15 minutes on CPU', 'process bar'), ('keeps the 15-minute b|ar', 'process bar'),
    ('added in sess|ion 5', 'work session'), ('as the previous sess|ion found', 'work session'),
    ('written down in no|tes/helper.md', 'working note'), ('per the lead no|te', 'working note'),
    ('the contract (DES|IGN.md)', 'outside file'), ('summarised in ../sha|red/x', 'outside file'),
    ('numbers from shared/pa|per/summary.txt', 'outside file')]]
# legitimate text of this repository that must stay clean
CLEAN = ["with tqdm(total=n, desc=desc) as bar:", "    for step in bar:", "def bars_html(bars: Mapping, width: int = 260):",
         "('error bars: seed spread)' if many else 'one seed')", "from platonic_ta.lab import slider_session",
         "@pytest.fixture(scope='session')", "an interactive session prints its figures",
         "in a trusted session')", "if L['kind'] == 'note': x = _note(L, n)", "a note is a table lookup at its phase",
         "'a beat and reedy notes'", "the composition sliders in a real JupyterLab page", "a progress bar, a loss curve"]


@pytest.mark.parametrize('line,kind', PLANTED)
def test_planted_words_are_caught(line, kind):
    assert [k for _, k, _ in house_hits(line)] == [kind], house_hits(line)


def test_legitimate_code_is_not_flagged():
    assert [(l, house_hits(l)) for l in CLEAN if house_hits(l)] == []


def test_scan_fails_on_a_planted_word_in_a_copy(tmp_path):
    "A temporary repository holding one tracked notebook with a planted reference: the scan reports that line."
    nb = tmp_path / 'nbs' / 'x.ipynb'
    nb.parent.mkdir()
    nb.write_text('{"cells": [{"cell_type": "markdown", "source": ["# X\\n", "The solve (DES|IGN.md) is exact.\\n"]}]}\n'.replace('|', ''))
    (tmp_path / 'README.md').write_text('# clean\n')
    subprocess.run(['git', 'init', '-q'], cwd=tmp_path, check=True)
    subprocess.run(['git', 'add', '.'], cwd=tmp_path, check=True)
    files = tracked_text_files(tmp_path)
    assert sorted(p.name for p in files) == ['README.md', 'x.ipynb']
    hits = scan(files, tmp_path)
    assert len(hits) == 1 and hits[0].startswith('nbs/x.ipynb:1: outside file:'), hits
