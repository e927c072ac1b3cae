"The zoo shipped in the package: complete, verified, of today's recipe, and reproduced by a rebuild of one family (slow)."
import json, subprocess, sys, time
import pytest
import torch
from platonic_ta import zoo, world, encoders, families

CHECK_FAMILY, CHECK_TASK = 'timm_avg', 'tallies'   # the cheapest family to rebuild, and one of its fine-tunes

def test_the_package_ships_a_complete_verified_zoo_of_todays_recipe():
    d = zoo.shipped_zoo_dir()
    z = zoo._scan(d)
    assert z.families == list(families.FAMILIES), f'shipped zoo families {z.families}: run zoo.ship_zoo(<built zoo>)'
    assert z.tasks == world.list_tasks(controls=False)
    assert zoo.stale_families(d) == {}
    manifest = json.loads((d / 'MANIFEST.json').read_text())
    assert manifest['command'].startswith('platonic_ta.zoo.build_zoo')
    assert sum(p.stat().st_size for p in d.rglob('*') if p.is_file()) <= zoo.SHIP_LIMIT_MB * 1e6
    for f in z.families:
        zoo.load_artifact(zoo.base_path(d, f))                       # sha256 checked
        for t in z.tasks:
            for seed in manifest['seeds']: zoo.load_artifact(zoo.ft_path(d, f, t, seed))   # every seed the manifest names

def _rel_err(a: dict, b: dict) -> float:
    assert set(a) == set(b)
    return max(((a[k].float() - b[k].float()).norm() / a[k].float().norm().clamp_min(1e-12)).item() for k in a)

@pytest.mark.slow
def test_rebuilding_one_family_reproduces_the_shipped_zoo(tmp_path):
    "Rebuild the check family and one fine-tune with the recorded command, one thread as the build's workers use."
    code = ('import torch; torch.set_num_threads(1); from platonic_ta.zoo import build_zoo; '
            f"build_zoo([{CHECK_FAMILY!r}], [{CHECK_TASK!r}], zoo={str(tmp_path)!r}, progress=False)")
    t0 = time.time()
    subprocess.run([sys.executable, '-c', code], check=True)
    print(f'rebuilt {CHECK_FAMILY} + {CHECK_TASK} in {time.time() - t0:.0f} s')
    ship = zoo.shipped_zoo_dir()
    for path in (zoo.base_path, lambda d, f: zoo.ft_path(d, f, CHECK_TASK)):
        a, _ = zoo.load_artifact(path(ship, CHECK_FAMILY))
        b, _ = zoo.load_artifact(path(tmp_path, CHECK_FAMILY))
        assert _rel_err(a, b) < 1e-3, f'{path(ship, CHECK_FAMILY)} not reproduced (relative error {_rel_err(a, b):.2e})'
    test = world.load_task(CHECK_TASK, 'test', 500)
    accs = [encoders.zero_shot_accuracy(zoo.load_finetune(CHECK_FAMILY, CHECK_TASK, zoo=d), test) for d in (ship, tmp_path)]
    assert abs(accs[0] - accs[1]) <= 0.01, accs
