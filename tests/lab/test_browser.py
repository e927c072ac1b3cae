"The composition sliders in a real JupyterLab page, driven by a headless Chromium: moved α and λ show the library's numbers."
import json
import pytest
from pathlib import Path
from platonic_ta.lab import slider_session, expected_rows, chromium_path

ROOT = Path(__file__).resolve().parents[2]

def test_chromium_is_installed():
    chromium_path()   # fails with the install command (apt-get install -y chromium chromium-driver) when it is missing

def test_sliders_in_the_page_show_what_the_library_computes(tmp_path, cache_dir):
    report = ROOT / '_runs' / 'report'       # the screenshots are part of the report, as after `make demo`
    r = slider_session(report, workdir=tmp_path, env={'PLATONIC_TA_CACHE': str(cache_dir)})
    before, after, exp = r['state_before'], r['state_after'], r['expected']
    moved = r['moved']
    assert moved != before['negate']          # the α moved is not the negated task's, so the two moves do not cancel
    # the moves reached the page's sliders: a click at 90% of the α track (0 to 2) and 4 steps of λ (0.25 each)
    assert after['alphas'][moved] == 1.8 and before['alphas'][moved] != 1.8, (before, after)
    assert {t: a for t, a in after['alphas'].items() if t != moved} == {t: a for t, a in before['alphas'].items() if t != moved}
    assert after['lam'] == before['lam'] + 4 * 0.25, (before, after)
    # the kernel's widgets hold the state the page shows
    assert exp['kernel_state'] == after, (exp['kernel_state'], after)
    # the page redrew: its table and chart show the library's scores for the new strengths, to the printed digits
    want = expected_rows(exp)
    got = [dict(task=x['task'], base=x['base'], edited=x['edited'], gain=format(float(x['gain']), '.3f'))
           for x in r['shown_after']['table']]
    assert got == want, (got, want)
    assert [(b['task'], b['base'], b['edited']) for b in r['shown_after']['bars']] == \
           [(w['task'], w['base'], w['edited']) for w in want]
    roles = {b['task']: b['role'] for b in r['shown_after']['bars']}
    for src, task, c in exp['coeffs']:
        assert src == after['source'] and roles[task] == ('composed' if c > 0 else 'negated'), (task, c, roles)
    # and it changed: the moves re-scored the edit (the first state's table is not the new one)
    assert r['shown_before']['table'] != r['shown_after']['table']
    for p in r['screenshots']:
        assert p.parent == report and p.stat().st_size > 5000, p
    print(f"lab: notebook in the page {r['run_s']:.0f}s, whole session {r['total_s']:.0f}s")
