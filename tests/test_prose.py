"""Figures in prose come from the run: a notebook's Markdown may quote the paper's figures, never a measured one.

A measured figure in a sentence is rendered by a code cell from the run's variables (`IPython.display.Markdown`),
so a rebuild cannot leave it stale. Settings are code and sit in backticks (`0.5`), formulas in `$…$`."""
import json, re
from pathlib import Path

import pytest

from platonic_ta.paper_figures import PAPER, EXPERIMENTS, PAPER_VALUES

NBS = Path(__file__).resolve().parents[1] / 'nbs'
DECIMAL = re.compile(r'(?<![\w.])\d*\.\d+(?:\.\d+)*')
STRIP = [re.compile(p, re.S) for p in (r'```.*?```', r'`[^`]*`', r'\$[^$]*\$', r'\]\([^)]*\)', r'arXiv:\S+', r'https?://\S+')]

# The paper's figures the notebooks quote besides those of the report's tables (paper_figures.PAPER, paper_figures.EXPERIMENTS):
# its spreads, per-table cells and side results, as it prints them.
PAPER_QUOTED = {'0.066', '0.169', '47.8', '0.99', '0.77', '1.27', '1.5', '0.48', '9.8', '19.2', '1.3', '15.3', '4.8', '7.7',
                '16.13', '0.91', '0.73', '0.53', '0.39', '5.5', '0.4', '0.2', '75.69', '69.99', '35.2', '4.5', '6.7'}


def paper_figures() -> set:
    "Every decimal the paper's rows of the report quote, their numeric values, and `PAPER_QUOTED`."
    text = ' '.join(f'{w} {p}' for _, w, p in PAPER) + ' ' + ' '.join(f'{w} {p}' for _, _, rows in EXPERIMENTS for _, w, p in rows)
    return set(DECIMAL.findall(text)) | {f'{v:g}' for v in PAPER_VALUES.values()} | PAPER_QUOTED


def typed_figures(markdown: str, allowed: set) -> list:
    "The decimals of `markdown` outside code, formulas, links and version numbers that are not the paper's."
    for rx in STRIP: markdown = rx.sub(' ', markdown)
    return [m for m in DECIMAL.findall(markdown) if m.count('.') == 1 and m not in allowed and f'0{m}' not in allowed]


def test_typed_figures_are_found():
    allowed = paper_figures()
    assert typed_figures('pairs at α = 0.5 gain 10.3 points for 3.1 of the controls', allowed) == ['10.3', '3.1']
    assert typed_figures('zero-shot .42 against a probe of .70', allowed) == ['.42', '.70']
    assert typed_figures('the budget `1.25`, $\\beta = 0.3$, torch 2.14.1, arXiv:2610.00929, [x](a/1.5.png)', allowed) == []
    assert typed_figures('the paper removes 23.0 points for 1.0 (Table 2); 47.8% certified', allowed) == []


@pytest.mark.parametrize('nb', sorted(p.name for p in NBS.glob('*.ipynb')))
def test_no_measured_figure_typed_in_prose(nb):
    allowed = paper_figures()
    cells = json.loads((NBS / nb).read_text())['cells']
    bad = [(i, f) for i, c in enumerate(cells) if c['cell_type'] == 'markdown'
           for f in typed_figures(''.join(c['source']), allowed)]
    assert not bad, (f'{nb}: Markdown cells type figures the run did not produce {bad} (cell, figure): render a measured '
                     'figure from the run\'s variables (display(Markdown(f"..."))), put a setting in backticks, or quote '
                     'only the paper\'s figures')
