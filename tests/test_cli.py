"The command line: the whole real path in subprocesses (ViT-B-32 -> RN50, random init, 32 px), and clear failures."
import json, os, subprocess, sys
import pytest, torch
import open_clip
from platonic_ta import world
from platonic_ta.tasks import make_image_folder

ROOT = __import__('pathlib').Path(__file__).resolve().parents[1]


def cli(*args, check=True):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''))
    r = subprocess.run([sys.executable, '-m', 'platonic_ta.cli', *map(str, args)], capture_output=True, text=True, env=env, cwd=ROOT)
    if check: assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_the_whole_path_on_the_command_line(tmp_path, cache_dir):
    folder = make_image_folder(tmp_path / 'squares', n_per_class=8, size=16)
    data = ['--data', folder, '--task', 'squares']
    src = ['--model', 'ViT-B-32', '--image-size', 32]
    tgt = ['--model', 'RN50', '--image-size', 32, '--init-seed', 1]
    cli('finetune', *src, *data, '--steps', 3, '--batch', 8, '--distill', 0, '--out', tmp_path / 'ft')
    assert (tmp_path / 'ft.safetensors').exists()
    cli('descriptor', *src, *data, '--finetuned', tmp_path / 'ft.safetensors', '--probes', 12, '--out', tmp_path / 'desc')
    assert json.loads((tmp_path / 'desc.json').read_text())['shape'] == [12, 3]
    cli('bank', *tgt, '--data', f'squares={folder}', '--descriptor', tmp_path / 'desc.json', '--out', tmp_path / 'bank')
    keys = json.loads((tmp_path / 'bank.json').read_text())['keys']
    assert [k[:2] for k in keys] == [['ViT-B-32', 'squares']]
    cli('edit', *tgt, '--bank', tmp_path / 'bank.json', '--strength', 1.0, '--out', tmp_path / 'edited')
    model = open_clip.create_model('RN50', pretrained=str(tmp_path / 'edited.safetensors'), force_image_size=32)   # open_clip loads it
    assert model.visual.attnpool.c_proj.weight.shape == (1024, 2048)
    for weights, out in (('random', 'before.json'), (tmp_path / 'edited.safetensors', 'after.json')):
        cli('eval', '--model', 'RN50', '--image-size', 32, '--init-seed', 1, '--weights', weights, *data, '--json', tmp_path / out)
    before, after = (json.loads((tmp_path / f).read_text()) for f in ('before.json', 'after.json'))
    assert before['n'] == after['n'] == 6 and 0 <= before['accuracy'] <= 1 and 0 <= after['accuracy'] <= 1
    r = cli('edit', *tgt, '--bank', tmp_path / 'bank.json', '--strength', 1.0, '--out', tmp_path / 'edited', check=False)
    assert r.returncode == 2 and '--overwrite' in r.stderr          # saved work is never overwritten silently


@pytest.mark.parametrize('args, says', [
    (['frobnicate'], 'invalid choice'),
    (['eval', '--model', 'ViT-Q-99', '--task', 'x'], 'unknown task'),
    (['eval', '--model', 'ViT-Q-99', '--task', '@world'], 'unknown open_clip model'),
    (['eval', '--model', 'RN50', '--task', 'no_such_task'], 'unknown task'),
    (['edit', '--model', 'RN50', '--bank', 'b.json', '--strength', 1, '--out', '/no/such/folder/e'], 'does not exist'),
    (['report', '--out', '@empty'], 'no runs in'),
])
def test_bad_input_fails_clearly_with_a_nonzero_exit(args, says, tmp_path):
    args = [world.list_tasks()[0] if a == '@world' else tmp_path / 'empty' if a == '@empty' else a for a in args]
    r = cli(*args, check=False)
    assert r.returncode != 0 and says in r.stderr, r.stderr[-2000:]


def test_unwritable_output_fails_before_any_work(tmp_path):
    ro = tmp_path / 'ro'; ro.mkdir(); ro.chmod(0o500)
    if os.access(ro, os.W_OK): pytest.skip('running as a user who can write anywhere')
    r = cli('edit', '--model', 'RN50', '--bank', 'b.json', '--strength', 1, '--out', ro / 'e', check=False)
    assert r.returncode == 2 and 'not writable' in r.stderr
