"Papermill smoke test: every stage notebook runs headless with small parameters and records its keys."
import json, math, re, shutil
import papermill as pm
import pytest
from fastcore.test import test_eq as same   # an alias: pytest would collect `test_eq` as a test
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# notebook -> (small parameters, metric keys it must record)
SMOKE = {
    '00_world.ipynb': (dict(n_per_task=64, n_bench=300), ['world.images_per_s', 'world.n_tasks', 'world.n_controls']),
    '01_zoo.ipynb': (dict(n_eval=100, n_probe_train=400), ['zoo.n_families', 'zoo.min_family_mean_gain', 'zoo.min_family_tasks_above_chance',
                                        'zoo.min_family_probe_gain', 'zoo.max_family_control_cost',
                                        'zoo.min_pairwise_disagreement', 'zoo.build_s',
                                        'zoo.min_family_mean_gain_n_cells', 'zoo.max_family_control_cost_n_cells']),
    '01a_heads.ipynb': ({}, ['heads.n_towers', 'heads.max_encode_err']),
    '01b_guards.ipynb': ({}, []),
    '01c_lora.ipynb': ({}, []),
    '02_descriptors.ipynb': (dict(n_union_zoo=32), ['descriptors.same_task_cross_model_cos', 'descriptors.diff_task_within_model_cos',
                                                              'descriptors.same_task_cross_model_cos_n_cells',
                                                              'descriptors.diff_task_within_model_cos_n_cells']),
    '03_factorization.ipynb': (dict(real_archs=[], n_eval_zoo=100, n_probe_train=400), ['factorization.linearity_rel_err', 'factorization.fold_max_rel_err',
                                                     'factorization.mean_cross_gain']),
    '04_composition.ipynb': (dict(n_eval_zoo=100, n_oracle_eval=60, n_probe_train=400, n_context_zoo=8, alphas_zoo=[0.5, 1.0], lambdas_zoo=[0, 0.5, 1], move_budgets=[0.5, 1.0],
                                  center_options=[True]),
                             ['composition.slider_update_ms_tiny', 'composition.solve_per_target', 'composition.negation_solve_per_target', 'composition.solve_rule_heldout', 'composition.slider_update_ms', 'composition.certified_share',
                                  'composition.certified_changed', 'composition.certified_records',
                                  'composition.cells_both_gain_share', 'composition.null_beaten_share',
                                  'composition.cells_both_gain_share_own', 'composition.cross_pair_gain_a05',
                                  'composition.cross_pair_control_cost_a05', 'composition.negation_removed_l05',
                                  'composition.negation_control_cost_l05', 'composition.consensus_pair_gain_a05',
                                  'composition.consensus_pair_control_cost_a05', 'composition.consensus_negation_removed_l05',
                                  'composition.consensus_negation_control_cost_l05']),
    '05_adapter.ipynb': (dict(n_eval_zoo=100, capacity_cells=1),
                         ['adapter.mean_gap_to_closed_form', 'adapter.control_gap_to_closed_form', 'adapter.s_per_edit',
                              'adapter.cpu_s_per_edit', 'adapter.n_edits', 'adapter.mean_gap_to_closed_form_n_cells',
                              'adapter.control_gap_to_closed_form_n_cells', 'adapter.median_rel_residual_n_cells', 'adapter.median_rel_residual_closed_form',
                              'adapter.median_rel_residual_neg', 'adapter.median_rel_residual_class',
                              'adapter.median_delivered_share', 'adapter.residual_own_descriptor_no_anchor',
                              'adapter.close_fit_residual', 'adapter.close_fit_heldout_cost_chosen']),
    '06_residuals.ipynb': (dict(n_eval_zoo=100, n_context_zoo=8, n_drift_zoo=16),
                           ['residuals.mean_dispersion', 'residuals.median_amplification',
                            'residuals.mean_operator_agreement', 'residuals.mean_descriptor_agreement',
                            'residuals.context_source_cross_gain', 'residuals.context_target_control_cost',
                            'residuals.drift_kept_cross_gain', 'residuals.drift_removed_cross_gain',
                            'residuals.mean_dispersion_n_cells', 'residuals.median_amplification_n_cells',
                            'residuals.mean_operator_agreement_n_cells', 'residuals.mean_descriptor_agreement_n_cells',
                            'residuals.context_source_cross_gain_n_cells', 'residuals.drift_kept_cross_gain_n_cells']),
    '07_real_models.ipynb': (dict(source_model='ViT-S-32-alt', target_model='ViT-S-16-alt', finetune_steps=2, n_probes=8),
                             ['real.source_ft_acc', 'real.target_acc_before', 'real.target_acc_after', 'real.reload_rel_err']),
    '10_experiments.ipynb': (dict(lora_steps=2, oracle_steps=2, trained_targets=1, ablation_sources=1, seed_tasks=1,
                                  seed_families=1, seed_finetune_steps=2, n_eval_zoo=50, probe_fractions=3,
                                  lambdas_zoo=[1.0], analogy_lams=[1.0], orderings=2, no_fit_related=['fields', 'grounds']),
                             ['experiments.best_baseline_cross_gain_a05', 'experiments.closed_form_cross_gain_a05',
                              'experiments.no_fit_unrelated_gain', 'experiments.no_fit_related_gain', 'experiments.cross_scale_gain_a05',
                              'experiments.no_fit_related_n_cells', 'experiments.no_fit_left_out_gain',
                              'experiments.baseline_gradient_matching_n_cells', 'experiments.baseline_distillation_n_cells',
                              'experiments.seed_descriptor_agreement', 'experiments.seed_weight_agreement',
                              'experiments.closed_form_cross_gain_a05_n_cells', 'experiments.closed_form_cross_gain_a05_ci_low',
                              'experiments.closed_form_cross_gain_a05_ci_high', 'experiments.seed_descriptor_agreement_n_cells']),
    '90_report.ipynb': ({}, []),
    '91_sweep.ipynb': ({}, []),     # its slow section runs a tiny sweep on the process pool
    '92_lab.ipynb': ({}, []),       # the browser itself runs in tests/lab (make test-lab)
}

# heavier runs, under `make test-slow`: the audio stage on the shipped audio zoo and on a micro audio zoo built from
# scratch (each a few minutes of CPU: three families' fine-tunes loaded and scored), the audio notebooks' slow cells
AUDIO_KEYS = ['audio.mean_gain_composed', 'audio.control_move', 'audio.negation_removed_l1', 'audio.negation_control_cost_l1',
              'audio.certified_changed', 'audio.solve_max_move', 'audio.negation_solve_max_move', 'audio.mean_gain_composed_n_cells',
              'audio.mean_gain_composed_ci_low', 'audio.mean_gain_composed_ci_high', 'audio.adapter_gain_n_cells',
              'audio.adapter_negation_removed_l1', 'audio.adapter_n_cells', 'audio.adapter_rule_anchor',
              'audio.heldout_control_move', 'audio.heldout_negation_control_cost_l1']
SLOW_SMOKE = {
    '08_audio.ipynb': (dict(zoo='shipped', n_probes=8, n_eval=16, adapter_steps=2, n_context=4, n_corpus=16), AUDIO_KEYS),
    '08_audio.ipynb@micro': (dict(zoo='micro', n_probes=16, n_eval=32, adapter_steps=3), AUDIO_KEYS),
    '08b_audio_world.ipynb': (dict(n_speed=200), ['audio_world.clips_per_s', 'audio_world.n_tasks', 'audio_world.n_controls']),
    '08c_audio_frontend.ipynb': ({}, []),
    '08d_audio_zoo.ipynb': (dict(probe_steps=1), ['audio_zoo.build_estimate_min', 'audio_zoo.build_cpu_min']),
}

# numbered notebooks without a papermill smoke run, and why (nbdev_test runs them in make test, slow cells skipped)
NO_SMOKE = {'00b_tasks.ipynb': 'no slow cell: nbdev_test runs every cell', '00d_toys.ipynb': 'no slow cell: nbdev_test runs every cell',
            '09_baselines.ipynb': 'no slow cell: nbdev_test runs every cell',
            '00a_scenes.ipynb': 'no slow cell: nbdev_test runs every cell',
            '00c_io.ipynb': 'no slow cell: nbdev_test runs every cell', '00e_metrics.ipynb': 'no slow cell: nbdev_test runs every cell',
            '01d_qkv.ipynb': 'no slow cell: nbdev_test runs every cell',
            '94_paper.ipynb': 'no slow cell: nbdev_test runs every cell (its check runs two tiny notebooks)',
            '95_builds.ipynb': 'no slow cell: nbdev_test runs every cell (its check runs a tiny stand-in stage)',
            '89_paper_figures.ipynb': 'no slow cell: nbdev_test runs every cell',
            '01e_families.ipynb': 'no slow cell: nbdev_test runs every cell',
            '01f_encoders.ipynb': 'no slow cell: nbdev_test runs every cell',
            '01h_checkpoints.ipynb': 'no slow cell: nbdev_test runs every cell',
            '01j_zoo_files.ipynb': 'no slow cell: nbdev_test runs every cell',
            '01g_training.ipynb': 'no slow cell: nbdev_test runs every cell',
            '02a_grids.ipynb': 'no slow cell: nbdev_test runs every cell',
            '02b_cache.ipynb': 'no slow cell: nbdev_test runs every cell',
            '04b_scoring.ipynb': 'no slow cell: nbdev_test runs every cell',
            '04c_widgets.ipynb': 'no slow cell: nbdev_test runs every cell',
            '04d_zoo_banks.ipynb': 'no slow cell: nbdev_test runs every cell', '04e_analysis.ipynb': 'no slow cell: nbdev_test runs every cell',
            '08a_audio_sounds.ipynb': 'no slow cell: nbdev_test runs every cell',
            '00f_stats.ipynb': 'no slow cell: nbdev_test runs every cell',
            '03a_edits.ipynb': 'no slow cell: nbdev_test runs every cell',
            '03b_plots.ipynb': 'no slow cell: nbdev_test runs every cell',
            '06a_ablations.ipynb': 'no slow cell: nbdev_test runs every cell',
            '92a_commands.ipynb': "the verbs run end to end in tests/test_cli.py; its slow cell builds an open_clip model",
            '93_cli.ipynb': "the command's verbs run end to end in tests/test_cli.py; its slow cells train models"}

def run_stage(nb, params, out: Path) -> Path:
    "Run stage notebook `nb` with papermill into `out`, its parameters passed as the demo passes them; its report folder."
    from platonic_ta.report import papermill_parameters
    report = out / 'report'
    out.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(str(ROOT / 'nbs' / nb), str(out / nb), parameters=papermill_parameters(dict(params, report_dir=str(report))),
                        kernel_name='python3', cwd=str(ROOT / 'nbs'), progress_bar=False)
    return report

@pytest.mark.parametrize('nb,params,keys', [pytest.param(nb, *SMOKE[nb], id=nb) for nb in sorted(SMOKE)] +
                         [pytest.param(nb.split('@')[0], *SLOW_SMOKE[nb], id=f'slow-{nb}', marks=pytest.mark.slow)
                          for nb in sorted(SLOW_SMOKE)])
def test_stage_notebook_runs(nb, params, keys, tmp_path, cache_dir):
    report = run_stage(nb, params, tmp_path)
    problems = smoke_problems(tmp_path / nb, report, keys)
    assert not problems, f'{nb}: ' + '; '.join(problems)

# The audio headline's bars, which the demo's audio stage meets on the shipped audio zoo.
AUDIO_BARS = {'audio.mean_gain_composed': ('>=', 3), 'audio.control_move': ('<=', 1),
              'audio.negation_removed_l1': ('>=', 10), 'audio.negation_control_cost_l1': ('<=', 2),
              'audio.certified_changed': ('<=', 0)}

def bar_problems(metrics: dict, bars: dict) -> list:
    "The figures of `metrics` outside their `bars` ({key: ('>=' or '<=', bound)}), or missing."
    out = []
    for k, (op, bound) in bars.items():
        v = metrics.get(k)
        if v is None: out.append(f'{k} missing')
        elif (v < bound) if op == '>=' else (v > bound): out.append(f'{k} = {v:.3g}, bar {op} {bound}')
    return out

def test_bar_problems_catch_a_figure_off_its_bar():
    same(bar_problems({'a': 3.0, 'b': 1.0}, {'a': ('>=', 3), 'b': ('<=', 1)}), [])
    same(bar_problems({'a': 2.5, 'b': 1.5}, {'a': ('>=', 3), 'b': ('<=', 1), 'c': ('<=', 0)}),
         ['a = 2.5, bar >= 3', 'b = 1.5, bar <= 1', 'c missing'])

@pytest.mark.slow
def test_a_rebuilt_audio_zoo_keeps_the_audio_headline(tmp_path, cache_dir):
    """Rebuild the audio zoo with the command its manifest records, into a folder of its own (minutes on two cores),
    and run the audio stage at the demo's size on it: the audio headline meets its bars on the rebuild too."""
    import subprocess, sys
    from platonic_ta.audio_zoo import shipped_audio_zoo_dir
    from platonic_ta.report import STAGES
    command = json.loads((shipped_audio_zoo_dir() / 'MANIFEST.json').read_text())['command']
    head = 'platonic_ta.audio_zoo.build_audio_zoo('
    assert command.startswith(head) and command.endswith(')'), f'recorded command {command!r} is not a build_audio_zoo call'
    zoo = tmp_path / 'audio-rebuilt'
    call = command[:-1] + (', ' if command[len(head):-1].strip() else '') + f'zoo={str(zoo)!r}, progress=False)'
    subprocess.run([sys.executable, '-c', f'import platonic_ta.audio_zoo\n{call}'], check=True)
    report = run_stage('08_audio.ipynb', dict(STAGES['08_audio.ipynb'], zoo=str(zoo)), tmp_path / 'run')
    metrics = json.loads((report / 'metrics.json').read_text())
    problems = bar_problems(metrics, AUDIO_BARS)
    assert not problems, f'the audio headline on a rebuild of the audio zoo ({command}): ' + '; '.join(problems)

def metric_problems(metrics: dict, keys) -> list:
    "What is wrong with a stage's recorded `metrics`: a key of `keys` missing, a value that is not a finite number."
    out = [f'did not record {k}' for k in keys if k not in metrics]
    for k, v in metrics.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)): out.append(f'{k} is {v!r}, not a number')
        elif not math.isfinite(v): out.append(f'{k} is {v}, not finite')
    return out

def smoke_problems(executed: Path, report: Path, keys) -> list:
    """What is wrong with a smoke run: a code cell of the executed notebook that did not run, a metrics file that
    is missing, unreadable or wrong (`metric_problems`), or metrics recorded by a notebook whose SMOKE entry lists none."""
    cells = json.loads(executed.read_text())['cells']
    out = [f'code cell {i} did not run' for i, c in enumerate(cells)
           if c['cell_type'] == 'code' and c.get('source') and c.get('execution_count') is None]
    path = report / 'metrics.json'
    if not keys:
        if path.exists(): out.append(f'recorded {sorted(json.loads(path.read_text()))}: list what it must record in SMOKE')
        return out
    if not path.exists(): return out + [f'recorded no metrics (no {path.name}); SMOKE expects {keys}']
    try: metrics = json.loads(path.read_text())
    except json.JSONDecodeError as e: return out + [f'{path.name} is not valid JSON ({e})']
    return out + metric_problems(metrics, keys)

def test_smoke_problems_catch_a_bad_run(tmp_path):
    "A planted run: metrics that are not numbers, a missing key, a cell that never ran, metrics nobody expects."
    nb = tmp_path / 'x.ipynb'
    cell = lambda n: dict(cell_type='code', source='x = 1', execution_count=n, metadata={}, outputs=[])
    nb.write_text(json.dumps(dict(cells=[cell(1), dict(cell_type='markdown', source='# X'), cell(2)])))
    report = tmp_path / 'report'; report.mkdir()
    same(smoke_problems(nb, report, []), [])
    same(smoke_problems(nb, report, ['x.a']), ["recorded no metrics (no metrics.json); SMOKE expects ['x.a']"])
    (report / 'metrics.json').write_text('{"x.a": 1.5, "x.b": true, "x.c": "fast", "x.d": NaN, "x.e": null}')
    same(smoke_problems(nb, report, ['x.a', 'x.f']),
            ['did not record x.f', 'x.b is True, not a number', "x.c is 'fast', not a number", 'x.d is nan, not finite',
             'x.e is None, not a number'])
    same(smoke_problems(nb, report, []), ["recorded ['x.a', 'x.b', 'x.c', 'x.d', 'x.e']: list what it must record in SMOKE"])
    (report / 'metrics.json').write_text('{"x.a": 1.5, "x.b": 2}')
    same(smoke_problems(nb, report, ['x.a', 'x.b']), [])
    nb.write_text(json.dumps(dict(cells=[cell(1), cell(None)])))
    same(smoke_problems(nb, report, ['x.a']), ['code cell 1 did not run'])
    (report / 'metrics.json').write_text('{"x.a": 1.5,')
    assert smoke_problems(nb, report, ['x.a'])[-1].startswith('metrics.json is not valid JSON')

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

def parameter_names(path: Path):
    "The names the notebook's `parameters` cell assigns (`a = 1`, `a, b = 1, 2`); None when no cell is tagged `parameters`."
    import ast
    cells = json.loads(path.read_text())['cells']
    src = next((''.join(c['source']) for c in cells if 'parameters' in c.get('metadata', {}).get('tags', [])), None)
    if src is None: return None
    names = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names

def smoke_table_problems(nbs: Path, smoke: dict, slow_smoke: dict, no_smoke: dict) -> list:
    """What is wrong with the smoke tables for the numbered notebooks of `nbs`: a notebook with no cell tagged
    `parameters`, one in no table (or in two), an entry for a notebook that does not exist, a smoke parameter its
    `parameters` cell does not define (papermill would inject it as a new variable and run the small default), a
    parameter papermill cannot read (`a, b = 1, 2`: sweeps and `platonic-ta run` would refuse to set it)."""
    import papermill as pm
    numbered = sorted(p.name for p in nbs.glob('[0-9]*.ipynb'))
    runs = [(k.split('@')[0], params) for table in (smoke, slow_smoke) for k, (params, _) in table.items()]
    out = [f'{nb}: in SMOKE or SLOW_SMOKE but not in {nbs.name}/' for nb in sorted({n for n, _ in runs} - set(numbered))]
    out += [f'{nb}: in NO_SMOKE but not in {nbs.name}/' for nb in sorted(set(no_smoke) - set(numbered))]
    for nb in numbered:
        tables = [name for name, t in (('SMOKE', smoke), ('SLOW_SMOKE', slow_smoke), ('NO_SMOKE', no_smoke))
                  if nb in {k.split('@')[0] for k in t}]
        if len(tables) != 1: out.append(f'{nb}: in {tables or "no table"}; give it one entry (SMOKE, SLOW_SMOKE or NO_SMOKE)')
        names = parameter_names(nbs / nb)
        if names is None: out.append(f'{nb}: no cell tagged parameters'); continue
        unseen = sorted(names - set(pm.inspect_notebook(str(nbs / nb))))
        if unseen: out.append(f'{nb}: papermill does not see parameters {unseen} (a sweep cannot set them): assign one name per line')
        out += [f'{nb}: smoke parameter {k!r} is not in its parameters cell' for n, params in runs if n == nb
                for k in sorted(set(params) - names)]
    return out

def test_every_stage_notebook_has_a_smoke_entry_and_parameters():
    problems = smoke_table_problems(ROOT / 'nbs', SMOKE, SLOW_SMOKE, NO_SMOKE)
    assert not problems, '\n'.join(problems)

def test_smoke_table_problems_catch_planted_notebooks(tmp_path):
    "A planted nbs/ folder: a notebook without an entry, one without parameters, a misspelt smoke parameter."
    def nb(name, params=True, source='n_eval = 10'):
        cells = [dict(id='c0', cell_type='code', source=source, metadata=dict(tags=['parameters'] if params else []),
                      outputs=[], execution_count=None)]
        (tmp_path / name).write_text(json.dumps(dict(cells=cells, metadata=dict(kernelspec=dict(name='python3', language='python',
                                     display_name='python3')), nbformat=4, nbformat_minor=5)))
    nb('00_a.ipynb'); nb('01_b.ipynb', source='n_eval, n_evals = 1, 2'); nb('02_c.ipynb', params=False); nb('index.ipynb', params=False)
    tuple_param = "01_b.ipynb: papermill does not see parameters ['n_eval', 'n_evals'] (a sweep cannot set them): assign one name per line"
    same(smoke_table_problems(tmp_path, {'00_a.ipynb': (dict(n_eval=5), [])}, {}, {'01_b.ipynb': 'why'}),
            [tuple_param, '02_c.ipynb: in no table; give it one entry (SMOKE, SLOW_SMOKE or NO_SMOKE)', '02_c.ipynb: no cell tagged parameters'])
    same(smoke_table_problems(tmp_path, {'00_a.ipynb': (dict(n_evals=5), []), '01_b.ipynb': (dict(n_evals=5), []), '09_z.ipynb': ({}, [])},
                                 {'00_a.ipynb@big': ({}, [])}, {'02_c.ipynb': 'why'}),
            ['09_z.ipynb: in SMOKE or SLOW_SMOKE but not in ' + tmp_path.name + '/',
             "00_a.ipynb: in ['SMOKE', 'SLOW_SMOKE']; give it one entry (SMOKE, SLOW_SMOKE or NO_SMOKE)",
             "00_a.ipynb: smoke parameter 'n_evals' is not in its parameters cell", tuple_param, '02_c.ipynb: no cell tagged parameters'])

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
