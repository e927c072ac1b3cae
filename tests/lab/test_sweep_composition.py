"The 2x2 composition sweep (strength x seed, micro zoo): killed halfway on the process pool, finished on a local Ray."
import csv, json, os, signal, subprocess, sys, time
import pytest
from pathlib import Path
from platonic_ta.sweep import Sweep, load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / 'sweeps' / '04_strength_seed.yaml'
CLI = 'import sys; from platonic_ta.cli import main; sys.exit(main(sys.argv[1:]))'

def running_cells(out: Path) -> dict:
    "{sweep cell: the source of the notebook cell papermill last marked running} for the sweep cells without a status."
    got = {}
    for d in sorted((out / 'cells').iterdir()):
        if (d / 'status.json').exists() or not (d / 'notebook.ipynb').exists(): continue
        cells = json.loads((d / 'notebook.ipynb').read_text())['cells']
        run = [c for c in cells if c['metadata'].get('papermill', {}).get('status') == 'running']
        got[d.name] = ''.join(run[0]['source'])[:400] if run else 'no cell running'
    return got

def test_killed_sweep_finishes_only_the_missing_cells_on_ray(tmp_path, cache_dir):
    out, rep = tmp_path / 'out', tmp_path / 'report'
    sw = Sweep(load_spec(SPEC), out)
    args = [sys.executable, '-c', CLI, 'sweep', str(SPEC), '--out', str(out), '--report-dir', str(rep), '--no-progress']
    env = dict(os.environ, PLATONIC_TA_CACHE=str(cache_dir))
    # one cell at a time on the local pool; killed (its whole process group) once two cells are done
    p = subprocess.Popen(args + ['--workers', '1'], env=env, start_new_session=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    while sw.status().count('done') < 2:
        assert p.poll() is None, f'the sweep ended before it was killed: {p.stdout.read()[-3000:]}'
        assert time.time() - t0 < 900, 'two cells did not finish within 15 minutes'
        time.sleep(1)
    os.killpg(p.pid, signal.SIGKILL); p.wait()
    first = sw.status()
    assert first.count('done') == 2 and 'failed' not in first, first
    done_before = {d.name: (d / 'status.json').stat().st_mtime_ns for d, s in zip(sw.dirs, first) if s == 'done'}
    # the same spec, rerun on a local Ray with 2 workers: only the two missing cells run
    try: r = subprocess.run(args + ['--ray', '--workers', '2'], env=env, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f'the Ray rerun did not finish in 15 minutes; stuck in: {running_cells(out)}; output: {e.stdout}{e.stderr}')
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert '4 cells: 2 done, 2 to run' in r.stdout
    assert sw.status() == ['done'] * 4
    assert {n: (out / 'cells' / n / 'status.json').stat().st_mtime_ns for n in done_before} == done_before
    rows = list(csv.DictReader((out / 'results.csv').open()))
    assert [(float(r['alpha_zoo']), int(r['seed'])) for r in rows] == [(0.25, 0), (0.25, 1), (1.0, 0), (1.0, 1)]
    assert sorted(r['executor'] for r in rows) == ['pool', 'pool', 'ray', 'ray']
    assert all(r['code_version'] and r['composition.cells_both_gain_share'] != '' for r in rows)
    # the strength reaches the notebook: its executed copy holds the injected value
    for r in rows:
        nb = json.loads((out / 'cells' / r['cell'] / 'notebook.ipynb').read_text())
        inj = [''.join(c['source']) for c in nb['cells'] if 'injected-parameters' in c['metadata'].get('tags', [])]
        assert f"alpha_zoo = {float(r['alpha_zoo'])}" in inj[0]
    assert (rep / 'sweeps' / '04_strength_seed.png').exists()
    assert '| done |' in (rep / 'sweeps' / '04_strength_seed.md').read_text()
