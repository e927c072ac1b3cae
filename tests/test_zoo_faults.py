"Zoo builds under faults, with real processes: two builders of one folder, and a build killed midway then resumed."
import json, os, signal, subprocess, sys, time
from pathlib import Path
from platonic_ta import zoo

FAMILY = 'rn_w16'                     # the cheapest family to build
TASKS = zoo.MICRO['tasks'][:2]
STEPS = dict(pretrain_steps=20, finetune_steps=5)

def _builder(folder: Path, seeds=(0,)) -> subprocess.Popen:
    code = ('import torch; torch.set_num_threads(1); from platonic_ta.zoo import build_zoo; '
            f'build_zoo([{FAMILY!r}], {list(TASKS)!r}, seeds={tuple(seeds)!r}, zoo={str(folder)!r}, '
            f'pretrain_steps={STEPS["pretrain_steps"]}, finetune_steps={STEPS["finetune_steps"]}, progress=False)')
    return subprocess.Popen([sys.executable, '-c', code], env={**os.environ, 'PYTHONWARNINGS': 'ignore'})

def _artefacts(folder: Path, seeds=(0,)) -> list:
    return [zoo.base_path(folder, FAMILY)] + [zoo.ft_path(folder, FAMILY, t, s) for t in TASKS for s in seeds]

def _no_debris(folder: Path):
    left = [p.name for p in folder.rglob('*') if p.name.endswith('.tmp') or '.bad-' in p.name]
    assert not left, f'torn or quarantined files left behind: {left}'

def test_two_processes_building_one_zoo_build_each_artefact_once(tmp_path):
    procs = [_builder(tmp_path), _builder(tmp_path)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    runs = json.loads((tmp_path / 'BUILDS.json').read_text())
    assert len(runs) == 2                                       # both calls are on record (the log itself is locked)
    built = [b for r in runs for b in r['built']]
    want = sorted(str(p.relative_to(tmp_path)) for p in _artefacts(tmp_path))
    assert sorted(built) == want, f'artefacts built {sorted(built)}; each of {want} exactly once'
    for p in _artefacts(tmp_path): zoo.load_artifact(p)        # complete and verified
    _no_debris(tmp_path)

def test_a_build_killed_midway_resumes_and_keeps_what_was_finished(tmp_path):
    seeds = (0, 1)
    proc = _builder(tmp_path, seeds)
    first_ft = zoo.ft_path(tmp_path, FAMILY, TASKS[0], 0).with_suffix('.json')
    t0 = time.time()
    while not first_ft.exists():                                # wait for the base and one fine-tune, then kill
        assert proc.poll() is None, 'the build ended before it could be killed'
        assert time.time() - t0 < 600
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL); proc.wait()
    done = {}
    for p in _artefacts(tmp_path, seeds):
        try: zoo.load_artifact(p)
        except zoo.ArtifactError: continue
        done[p] = (p.with_suffix('.safetensors').stat().st_mtime_ns, p.with_suffix('.json').read_text())
    assert zoo.base_path(tmp_path, FAMILY) in done and len(done) < len(_artefacts(tmp_path, seeds)), sorted(map(str, done))
    zoo.build_zoo([FAMILY], TASKS, seeds=seeds, zoo=tmp_path, pretrain_steps=STEPS["pretrain_steps"], finetune_steps=STEPS["finetune_steps"],
                  progress=False)
    for p, (mtime, meta) in done.items():                      # nothing finished was rebuilt or rewritten
        assert p.with_suffix('.safetensors').stat().st_mtime_ns == mtime and p.with_suffix('.json').read_text() == meta, p
    resumed = json.loads((tmp_path / 'BUILDS.json').read_text())[-1]['built']
    assert sorted(resumed) == sorted(str(p.relative_to(tmp_path)) for p in _artefacts(tmp_path, seeds) if p not in done)
    for p in _artefacts(tmp_path, seeds): zoo.load_artifact(p)
    _no_debris(tmp_path)
