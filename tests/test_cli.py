"The command line and the public API on an image folder (ViT-B-32 -> RN50, random init, 32 px), and clear failures."
import json, os, subprocess, sys
import pytest, torch
import open_clip
from platonic_ta import world
from platonic_ta.tasks import make_image_folder, register_folder_task
from platonic_ta.cli import main
from platonic_ta.checkpoints import open_clip_encoder
from platonic_ta.families import FinetuneConfig
from platonic_ta.training import finetune
from platonic_ta.encoders import zero_shot_accuracy, digest_scope
from platonic_ta.grids import make_grid
from platonic_ta.cache import EmbeddingCache
from platonic_ta.descriptors import Descriptor
from platonic_ta.composition import OperatorBank
from platonic_ta.edits import load_edited

ROOT = __import__('pathlib').Path(__file__).resolve().parents[1]


def cli(*args, check=True):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''))
    r = subprocess.run([sys.executable, '-m', 'platonic_ta.cli', *map(str, args)], capture_output=True, text=True, env=env, cwd=ROOT)
    if check: assert r.returncode == 0, r.stderr[-3000:]
    return r


def run(capsys, *args):
    "`platonic-ta ARGS` in this process: (exit status, stderr)."
    try: rc = main([str(a) for a in args])
    except SystemExit as e: rc = e.code
    return rc, capsys.readouterr().err


PAIRS = [pytest.param('ViT-B-32', 'RN50', id='ViT-B-32->RN50'),                                            # the paper's pair
         pytest.param('ViT-S-32-alt', 'ViT-S-16-alt', marks=pytest.mark.slow, id='ViT-S-32-alt->ViT-S-16-alt')]   # two ViTs (make test-slow)


@pytest.mark.parametrize('source, target', PAIRS)
def test_an_image_folder_from_one_open_clip_model_into_another_through_the_api_and_the_cli(source, target, tmp_path, cache_dir, capsys):
    "Folder -> task -> fine-tune -> descriptor (Python) -> bank -> edited checkpoint -> zero-shot (command line) -> reload (Python)."
    folder = make_image_folder(tmp_path / 'squares', n_per_class=8, size=16)
    name = 'squares_api_cli'
    register_folder_task(name, folder, overwrite=True, progress=False)   # the command line's defaults: same split, same grid
    try:
        A = open_clip_encoder(source, 'random', image_size=32)
        A_ft = finetune(A, name, progress=False, config=FinetuneConfig(steps=2, batch=8, distill=0.0))[0]
        grid = make_grid(name, 12, seed=0)
        D = Descriptor.from_encoders(A_ft, A, grid, EmbeddingCache(progress=False))
        assert D.shape == (12, 3) and D.U.abs().max() > 0
        D.save(tmp_path / 'desc')
        tgt = ['--model', target, '--image-size', 32, '--init-seed', 1]
        rc, err = run(capsys, 'bank', *tgt, '--data', f'{name}={folder}', '--descriptor', tmp_path / 'desc.json', '--out', tmp_path / 'bank')
        assert rc == 0, err
        rc, err = run(capsys, 'edit', *tgt, '--bank', tmp_path / 'bank.json', '--strength', 1.0, '--out', tmp_path / 'edited')
        assert rc == 0, err
        rc, err = run(capsys, 'eval', *tgt, '--weights', tmp_path / 'edited.safetensors', '--data', folder, '--task', name,
                      '--json', tmp_path / 'after.json')
        assert rc == 0, err
        after = json.loads((tmp_path / 'after.json').read_text())['tasks'][0]

        B = open_clip_encoder(target, 'random', image_size=32, init_seed=1)   # the target, as the command line built it
        with digest_scope():                                                 # each model's weights are read once
            B_file = load_edited(B, tmp_path / 'edited.safetensors')         # the edited checkpoint, re-loaded
            B_mem = OperatorBank.load(tmp_path / 'bank.json', target=B).apply({(source, name): 1.0})
            assert B_file.weights_hash() == B_mem.weights_hash() != B.weights_hash()
        test = world.load_task(name, 'test')
        assert not torch.allclose(B.encode_image(test.images), B_file.encode_image(test.images))   # the edit moved the embeddings
        assert after['n'] == len(test) == 6 and after['accuracy'] == zero_shot_accuracy(B_file, test)
        assert 0 <= zero_shot_accuracy(B, test) <= 1
        rc, err = run(capsys, 'edit', *tgt, '--bank', tmp_path / 'bank.json', '--strength', 1.0, '--out', tmp_path / 'edited')
        assert rc == 2 and '--overwrite' in err          # saved work is never overwritten silently
    finally:
        world.unregister_task(name)


@pytest.mark.slow
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
    before, after = (json.loads((tmp_path / f).read_text())['tasks'][0] for f in ('before.json', 'after.json'))
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
    (['eval', '--model', 'RN50', '--task', '@world', '--device', 'cuda:7'], 'device'),
    (['eval', '--model', 'RN50', '--task', '@world', '--weights', 'openai', '--image-size', 32], 'its own input size'),
])
def test_bad_input_fails_clearly_with_a_nonzero_exit(args, says, tmp_path, capsys):
    args = [world.list_tasks()[0] if a == '@world' else tmp_path / 'empty' if a == '@empty' else a for a in args]
    rc, err = run(capsys, *args)
    assert rc != 0 and says in err, err[-2000:]


@pytest.mark.slow
def test_the_command_exits_non_zero_from_a_shell():
    "The installed entry point (`python -m platonic_ta.cli`) reports bad input on stderr with exit status 2."
    r = cli('frobnicate', check=False)
    assert r.returncode == 2 and 'invalid choice' in r.stderr, r.stderr[-2000:]


def test_unwritable_output_fails_before_any_work(tmp_path, capsys):
    ro = tmp_path / 'ro'; ro.mkdir(); ro.chmod(0o500)
    if os.access(ro, os.W_OK): pytest.skip('running as a user who can write anywhere')
    rc, err = run(capsys, 'edit', '--model', 'RN50', '--bank', 'b.json', '--strength', 1, '--out', ro / 'e')
    assert rc == 2 and 'not writable' in err
