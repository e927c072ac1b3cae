"Papermill smoke test: every stage notebook runs headless with small parameters and records its keys."
import json, re, shutil
import papermill as pm
import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# notebook -> (small parameters, metric keys it must record)
SMOKE = {
    '00_world.ipynb': (dict(n_per_task=64, n_bench=300), ['world.images_per_s', 'world.n_tasks', 'world.n_controls']),
    '01_zoo.ipynb': (dict(n_eval=100, n_probe_train=400), ['zoo.n_families', 'zoo.min_family_mean_gain', 'zoo.min_family_tasks_above_chance',
                                        'zoo.min_family_probe_gain', 'zoo.max_family_control_cost',
                                        'zoo.min_pairwise_disagreement', 'zoo.build_s']),
    '01a_heads.ipynb': ({}, ['heads.n_towers', 'heads.max_encode_err']),
    '01b_guards.ipynb': ({}, []),
    '01c_lora.ipynb': ({}, []),
    '02_descriptors.ipynb': ({}, ['descriptors.same_task_cross_model_cos', 'descriptors.diff_task_within_model_cos']),
    '03_factorization.ipynb': (dict(real_archs=[], n_eval_zoo=100, n_probe_train=400), ['factorization.linearity_rel_err', 'factorization.fold_max_rel_err',
                                                     'factorization.mean_cross_gain']),
    '04_composition.ipynb': (dict(n_eval_zoo=100, n_probe_train=400, n_context_zoo=8, alphas_zoo=[0.5, 1.0], lambdas_zoo=[0, 0.5, 1], ridge_floors=[1e-8, 1e-2]),
                             ['composition.slider_update_ms_tiny', 'composition.slider_update_ms', 'composition.certified_share',
                                  'composition.certified_changed', 'composition.certified_records',
                                  'composition.cells_both_gain_share', 'composition.null_beaten_share',
                                  'composition.cells_both_gain_share_own', 'composition.cross_pair_gain_a05',
                                  'composition.cross_pair_control_cost_a05', 'composition.negation_removed_l05',
                                  'composition.negation_control_cost_l05']),
    '05_adapter.ipynb': (dict(n_eval_zoo=100, ridge_floors=[1e-8, 1e-2]),
                         ['adapter.mean_gap_to_closed_form', 'adapter.control_gap_to_closed_form', 'adapter.s_per_edit',
                              'adapter.cpu_s_per_edit', 'adapter.n_edits']),
    '06_residuals.ipynb': (dict(ridge_floor=0.01, n_eval_zoo=100), ['residuals.mean_dispersion', 'residuals.median_amplification',
                                'residuals.mean_operator_agreement', 'residuals.mean_descriptor_agreement']),
    '07_real_models.ipynb': (dict(source_model='ViT-S-32-alt', target_model='ViT-S-16-alt', finetune_steps=2, n_probes=8),
                             ['real.source_ft_acc', 'real.target_acc_before', 'real.target_acc_after', 'real.reload_rel_err']),
    '10_experiments.ipynb': (dict(lora_steps=2, oracle_steps=2, trained_targets=1, ablation_sources=1, seed_tasks=1,
                                  seed_families=1, seed_finetune_steps=2, n_eval_zoo=50, probe_fractions=3,
                                  lambdas_zoo=[1.0], analogy_lams=[1.0], orderings=2),
                             ['experiments.best_baseline_cross_gain_a05', 'experiments.closed_form_cross_gain_a05',
                              'experiments.no_fit_gain', 'experiments.cross_scale_gain_a05',
                              'experiments.seed_descriptor_agreement', 'experiments.seed_weight_agreement']),
    '90_report.ipynb': ({}, []),
    '91_sweep.ipynb': ({}, []),     # its slow section runs a tiny sweep on the process pool
    '92_lab.ipynb': ({}, []),       # the browser itself runs in tests/lab (make test-lab)
}

# heavier runs, under `make test-slow`: the audio stage on the shipped audio zoo and on a micro audio zoo built from
# scratch (each a few minutes of CPU: three families' fine-tunes loaded and scored), the audio notebooks' slow cells
AUDIO_KEYS = ['audio.mean_gain_composed', 'audio.control_move', 'audio.negation_removed_l1', 'audio.negation_control_cost_l1',
              'audio.certified_changed']
SLOW_SMOKE = {
    '08_audio.ipynb': (dict(zoo='shipped', n_probes=8, n_eval=16, adapter_steps=2), AUDIO_KEYS),
    '08_audio.ipynb@micro': (dict(zoo='micro', n_probes=16, n_eval=32, adapter_steps=3), AUDIO_KEYS),
    '08a_audio_world.ipynb': (dict(n_speed=200), ['audio_world.clips_per_s', 'audio_world.n_tasks', 'audio_world.n_controls']),
    '08b_audio_frontend.ipynb': ({}, []),
    '08c_audio_zoo.ipynb': (dict(probe_steps=1), ['audio_zoo.build_estimate_min', 'audio_zoo.build_cpu_min']),
}

def run_stage(nb, params, out: Path) -> Path:
    "Run stage notebook `nb` with papermill into `out`; its report folder."
    report = out / 'report'
    out.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(str(ROOT / 'nbs' / nb), str(out / nb), parameters=dict(params, report_dir=str(report)),
                        kernel_name='python3', cwd=str(ROOT / 'nbs'), progress_bar=False)
    return report

@pytest.mark.parametrize('nb,params,keys', [pytest.param(nb, *SMOKE[nb], id=nb) for nb in sorted(SMOKE)] +
                         [pytest.param(nb.split('@')[0], *SLOW_SMOKE[nb], id=f'slow-{nb}', marks=pytest.mark.slow)
                          for nb in sorted(SLOW_SMOKE)])
def test_stage_notebook_runs(nb, params, keys, tmp_path, cache_dir):
    report = run_stage(nb, params, tmp_path)
    if not keys: return
    metrics = json.loads((report / 'metrics.json').read_text())
    missing = [k for k in keys if k not in metrics]
    assert not missing, f'{nb} did not record {missing}'
    assert all(isinstance(v, (int, float)) for v in metrics.values())

# The notebooks without a smoke entry above run under nbdev's own test runner (their `#| slow` cells skipped, as
# `nbdev_test` does), each in a process of its own; the smoke runs execute every cell of the others already.
NBDEV_ONLY = sorted(p.name for p in (ROOT / 'nbs').glob('*.ipynb') if p.name not in SMOKE)

def test_notebooks_without_a_smoke_run_pass_nbdev_test(cache_dir):
    import subprocess, sys
    only = '^(' + '|'.join(re.escape(nb) for nb in NBDEV_ONLY) + ')$'
    r = subprocess.run([str(Path(sys.executable).parent / 'nbdev_test'), '--file_re', only, '--n_workers', '0', '--timing'],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and 'Success' in r.stdout, f'nbdev_test failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}'
    assert len(re.findall(r'\.ipynb: \d+ secs', r.stdout)) == len(NBDEV_ONLY), f'not every notebook ran:\n{r.stdout}'

def test_every_notebook_runs_in_make_test():
    "Each notebook is executed by a smoke run or by nbdev's test runner (never neither)."
    every = {p.name for p in (ROOT / 'nbs').glob('*.ipynb')}
    assert every == set(SMOKE) | set(NBDEV_ONLY) and not set(SMOKE) - every, sorted(set(SMOKE) ^ every - set(NBDEV_ONLY))

def test_every_stage_notebook_has_a_smoke_entry_and_parameters():
    for nb in sorted(p.name for p in (ROOT / 'nbs').glob('[0-9]*.ipynb')):
        cells = json.loads((ROOT / 'nbs' / nb).read_text())['cells']
        assert any('parameters' in c.get('metadata', {}).get('tags', []) for c in cells), f'{nb}: no cell tagged parameters'

TIMING = re.compile(r'(_s|_ms|_ms_tiny|per_s|_s_per_edit|seconds|load_avg_1min)$')   # wall and CPU times, machine load

def test_a_stage_run_twice_records_the_same_metrics_but_timings(tmp_path, cache_dir, monkeypatch):
    "Determinism: every metric that is not a timing is equal, bit for bit, between two runs of a stage."
    from platonic_ta.zoo import get_zoo
    nb, runs, zoo = '06_residuals.ipynb', [], get_zoo('micro', progress=False).path   # built once, in the shared cache
    for r in ('a', 'b'):   # each run on a cache of its own holding only the micro zoo: both compute, neither reads the other's
        own = tmp_path / r / 'cache'
        shutil.copytree(zoo, own / zoo.name)
        monkeypatch.setenv('PLATONIC_TA_CACHE', str(own))
        runs.append(json.loads((run_stage(nb, SMOKE[nb][0], tmp_path / r) / 'metrics.json').read_text()))
    a, b = runs
    assert set(a) == set(b)
    kept = [k for k in a if not TIMING.search(k)]
    assert kept, 'no metric to compare'
    assert {k: a[k] for k in kept} == {k: b[k] for k in kept}
