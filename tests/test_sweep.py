"Sweep specs: the errors a user meets, and a tiny sweep on a local Ray with 2 workers (the CLI, end to end)."
import csv, json, os
import nbformat
import pytest
from pathlib import Path
from platonic_ta.cli import main
from platonic_ta.sweep import SweepSpec, Sweep, SweepError, load_spec

ROOT = Path(__file__).resolve().parents[1]

def tiny_notebook(path):
    "Parameters x, y; records tiny.xy = x*y and fails for y == 0."
    nb = nbformat.v4.new_notebook()
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'python3', 'language': 'python'}
    nb.cells = [nbformat.v4.new_code_cell('report_dir = None\nx = 1\ny = 1', metadata={'tags': ['parameters']}),
                nbformat.v4.new_code_cell('assert y != 0, "y must not be 0"\nfrom platonic_ta.metrics import record_metrics\n'
                                          "record_metrics({'tiny.xy': x * y}, report_dir)")]
    nbformat.write(nb, path)
    return path

def test_shipped_spec_names_known_parameters(tmp_path):
    spec = load_spec(ROOT / 'sweeps' / '04_strength_seed.yaml')
    sw = Sweep(spec, tmp_path / 'out')        # checks every name against the notebook's parameters cell
    assert spec.n_cells == 4 and sw.notebook.name == '04_composition.ipynb'
    assert len({d.name for d in sw.dirs}) == 4

def test_unknown_parameter_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(SweepError, match=r"no parameter \['strength'\].*alpha_zoo"):
        Sweep(SweepSpec(notebook='04_composition', grid={'strength': [0.5]}), tmp_path / 'out')

def test_empty_grid_unknown_notebook_unwritable_output(tmp_path):
    (tmp_path / 'empty.yaml').write_text('notebook: 04_composition.ipynb\ngrid: {}\n')
    with pytest.raises(SweepError, match='grid is empty'): load_spec(tmp_path / 'empty.yaml')
    (tmp_path / 'none.yaml').write_text('notebook: 04_composition.ipynb\ngrid: {seed: []}\n')
    with pytest.raises(SweepError, match='no values'): load_spec(tmp_path / 'none.yaml')
    with pytest.raises(SweepError, match=r"not found.*04_composition\.ipynb"):
        Sweep(SweepSpec(notebook='04_compositoin', grid={'seed': [0]}), tmp_path / 'out')
    (tmp_path / 'a_file').write_text('')
    with pytest.raises(SweepError, match='not writable'):
        Sweep(SweepSpec(notebook='04_composition', grid={'seed': [0]}), tmp_path / 'a_file' / 'out')

def test_cli_reports_a_bad_spec_and_exits_2(tmp_path, capsys):
    (tmp_path / 'bad.toml').write_text('notebook = "04_composition.ipynb"\n[grid]\nsead = [0, 1]\n')
    assert main(['sweep', str(tmp_path / 'bad.toml'), '--out', str(tmp_path / 'out')]) == 2
    assert "no parameter ['sead']" in capsys.readouterr().err

def test_entry_point_parameters_are_checked(tmp_path):
    with pytest.raises(SweepError, match=r"no parameter \['nope'\]"):
        Sweep(SweepSpec(entry='platonic_ta.grids:make_grid', grid={'nope': [1]}), tmp_path / 'out')

@pytest.mark.serial
def test_tiny_sweep_on_local_ray_with_two_workers(tmp_path, cache_dir):
    nb = tiny_notebook(tmp_path / 'tiny.ipynb')
    spec = tmp_path / 'tiny.toml'
    spec.write_text(f'notebook = "{nb}"\nparameters = {{x = 2}}\n[grid]\ny = [0, 3, 5]\n')
    out, rep = tmp_path / 'out', tmp_path / 'report'
    argv = ['sweep', str(spec), '--out', str(out), '--report-dir', str(rep), '--ray', '--workers', '2', '--no-progress']
    assert main(argv) == 1                     # one cell failed: reported, and the exit status says so
    rows = list(csv.DictReader((out / 'results.csv').open()))
    assert [(r['y'], r['status'], r['executor']) for r in rows] == [('0', 'failed', 'ray'), ('3', 'done', 'ray'), ('5', 'done', 'ray')]
    assert [r['tiny.xy'] for r in rows] == ['', '6', '10'] and 'y must not be 0' in rows[0]['error']
    assert all(r['code_version'] and r['x'] == '2' for r in rows)
    assert len({json.loads((out / 'cells' / r['cell'] / 'status.json').read_text())['pid'] for r in rows[1:]}) >= 1
    assert (rep / 'sweeps' / 'tiny.png').exists() and 'y must not be 0' in (rep / 'sweeps' / 'tiny.md').read_text()
    assert '## Sweeps\n\n### tiny' in (rep / 'index.md').read_text()   # the report page has the section
    # (rerunning failed cells with retry_failed, and never the done ones, is checked in nbs/91_sweep.ipynb on the pool)

@pytest.mark.serial
def test_entry_point_sweep_records_what_the_function_returns(tmp_path, monkeypatch, cache_dir):
    (tmp_path / 'tinyentry.py').write_text("def score(a, b=2):\n    return {'tinyentry.sum': a + b}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv('PYTHONPATH', f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")   # the kernels import it too
    from platonic_ta.sweep import run_sweep
    sw = run_sweep(SweepSpec(entry='tinyentry:score', grid={'a': [1, 5]}, parameters={'b': 10}, name='entry'),
                   tmp_path / 'out', tmp_path / 'report', workers=1, progress=False)
    assert [(r['status'], r['a'], r['tinyentry.sum']) for r in sw.table()] == [('done', 1, 11), ('done', 5, 15)]


def test_ctrl_c_on_a_sweep_prints_one_line(monkeypatch, capsys):
    "An interrupted sweep says in one line that finished cells are kept, and exits 130 without a traceback."
    import platonic_ta.sweep as sweep
    def interrupted(*a, **k): raise KeyboardInterrupt
    monkeypatch.setattr(sweep, 'run_sweep', interrupted)
    assert main(['sweep', 'spec.yaml']) == 130
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'interrupted' in err and 'Traceback' not in err
