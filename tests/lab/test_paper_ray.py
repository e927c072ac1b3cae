"""The paper run on Ray: two tiny stages, the second reading what the first records; the second fails on the pool, then
finishes on a local Ray with the first kept."""
import json, subprocess, sys
from pathlib import Path

import nbformat

RUNNER = ('import sys, json; from platonic_ta.paper import run_paper; a = json.loads(sys.argv[1]); '
          'st = run_paper(a["out"], a["stages"], a["needs"], workers=2, ray=a["ray"]); print(json.dumps(st))')


def tiny(path: Path, code: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('report_dir = None\nfail = False', metadata={'tags': ['parameters']}),
                nbformat.v4.new_code_cell(code)]
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'python3', 'language': 'python'}
    nbformat.write(nb, str(path))
    return str(path)


def run(args: dict) -> dict:
    r = subprocess.run([sys.executable, '-c', RUNNER, json.dumps(args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_paper_resumes_on_ray(tmp_path):
    first = tiny(tmp_path / 'first.ipynb', "from platonic_ta.metrics import record_metrics\n"
                                           "record_metrics({'first.x': 1.5}, report_dir)")
    second = tiny(tmp_path / 'second.ipynb', "from platonic_ta.metrics import read_metrics, record_metrics\n"
                                             "assert not fail, 'asked to fail'\n"
                                             "record_metrics({'second.y': read_metrics(report_dir)['first.x'] * 2}, report_dir)")
    out = str(tmp_path / 'out')
    needs = {second: [first]}
    assert run(dict(out=out, stages={first: {}, second: {'fail': True}}, needs=needs, ray=False)) == {first: 'done', second: 'failed'}
    status = tmp_path / 'out' / 'stages' / 'first' / 'status.json'
    kept = status.stat().st_mtime_ns
    st = run(dict(out=out, stages={first: {}, second: {'fail': False}}, needs=needs, ray=True))
    assert st == {first: 'done', second: 'done'}
    assert status.stat().st_mtime_ns == kept                      # the finished stage was kept, not run again
    assert json.loads((tmp_path / 'out' / 'stages' / 'second' / 'status.json').read_text())['executor'] == 'ray'
    metrics = json.loads((tmp_path / 'out' / 'report' / 'metrics.json').read_text())
    assert metrics['second.y'] == 3.0 and metrics['paper.n_stages_done'] == 2
