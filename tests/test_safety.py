"Nothing silently wrong: edits that cannot stack by accident, saves that cannot clobber, numbers checked, files named."
import json, math, multiprocessing as mp, os, re, time
from pathlib import Path

import pytest, torch
from safetensors import safe_open
from safetensors.torch import save_file, load_file

torch.set_num_threads(1)

from platonic_ta import world, zoo, encoders, families
from platonic_ta.guards import AllocationError, WrongKindError, file_kind
from platonic_ta.grids import make_grid
from platonic_ta.cache import EmbeddingCache
from platonic_ta.descriptors import Descriptor, zoo_descriptors
from platonic_ta.factorization import (GridFactors, select_ridges)
from platonic_ta.edits import fold_operator, edit_record, base_weights_hash, weights_hash_of, save_edited, load_edited, EditStackError, EditRecordError
from platonic_ta.composition import OperatorBank, TargetMismatchError
from platonic_ta.factorization import floored_ridge_grid
from platonic_ta.zoo_banks import source_key, heldout_split
from platonic_ta.baselines import weight_space_sum
from platonic_ta.scoring import certificate
from platonic_ta.descriptors import shuffled_descriptor
from platonic_ta.widgets import Sliders
from platonic_ta.adapter import fit_adapter, load_adapter, AdapterConfig
from platonic_ta.experiments import edit_cells
from platonic_ta.training import lr_factor
from platonic_ta.lora import add_adapter
from platonic_ta.residuals import forfeited_gain, task_summary
from platonic_ta.scoring import Scorer

FAM = zoo.MICRO['families'][0]          # an embedding-route family


@pytest.fixture(scope='module')
def env(tmp_path_factory):
    "A random-init target, another model of the same family (same dims), one grid, a saved bank and descriptor."
    d = tmp_path_factory.mktemp('safety')
    task = world.list_tasks()[0]
    grid = make_grid(world.load_task(task, 'train', 48), 16, seed=0)
    target = encoders.family_encoder(FAM)
    other = encoders.family_encoder(FAM, families.create_family_model(FAM, seed=12345), name=f'{FAM}-other')
    assert target.weights_hash() != other.weights_hash()
    U = 0.3 * torch.randn(grid.N, grid.M, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    D = Descriptor.from_matrix(U, grid, dict(model='src', weights_hash='s'), dict(model='base', weights_hash='b'))
    cache = EmbeddingCache(d / 'cache', progress=False)
    bank = OperatorBank.build(target, [grid], {('src', task): D}, ridges=(1e-2, 1e-2), cache=cache)
    bank_path = bank.save(d / 'bank')
    desc_path = D.save(d / 'desc')
    evals = {task: world.load_task(task, 'test', 24)}
    return dict(d=d, task=task, grid=grid, target=target, other=other, U=U, D=D, cache=cache, bank=bank,
                bank_path=bank_path, desc_path=desc_path, evals=evals)


# --- edit provenance ---------------------------------------------------------------------------------------------
def test_fold_twice_needs_stack(env):
    t = env['target']
    W = 0.01 * torch.randn(96, 96, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    once = fold_operator(t, W)
    with pytest.raises(EditStackError, match='stack=True'): fold_operator(once, W)
    twice = fold_operator(once, W, stack=True)
    rec = edit_record(twice)
    assert [e['kind'] for e in rec] == ['fold', 'fold']
    assert rec[0]['base_weights_hash'] == rec[1]['base_weights_hash'] == t.weights_hash()
    assert rec[1]['weights_hash'] == twice.weights_hash() and edit_record(t) == []


def test_bank_target_must_be_the_unedited_target(env):
    task, t = env['task'], env['target']
    b = OperatorBank.load(env['bank_path'])
    edited = env['bank'].apply({('src', task): 1.0})
    rec = edit_record(edited)
    assert rec[0]['kind'] == 'bank' and rec[0]['bank']['checksum'] == b.manifest()['checksum']
    assert rec[0]['coeffs'] == [['src', task, env['grid'].grid_hash, 1.0]] and rec[0]['base_weights_hash'] == t.weights_hash()
    with pytest.raises(EditStackError, match='unedited'): b.target = edited          # the case the old message invited
    assert b.target is None
    with pytest.raises(EditStackError, match='stack=True'): b.apply({('src', task): 1.0}, target=edited)
    stacked = b.apply({('src', task): 1.0}, target=edited, stack=True)
    assert [e['kind'] for e in edit_record(stacked)] == ['bank', 'bank']
    with pytest.raises(EditStackError): OperatorBank.load(env['bank_path'], target=edited)
    with pytest.raises(EditStackError): Scorer(env['bank'], env['evals'], target=edited)


def test_bank_refuses_another_model_naming_both_hashes(env):
    b, other, task = OperatorBank.load(env['bank_path']), env['other'], env['task']
    for attempt in (lambda: setattr(b, 'target', other), lambda: b.apply({('src', task): 1.0}, target=other),
                    lambda: b.apply({('src', task): 1.0}, target=fold_operator(other, torch.zeros(96, 96)), stack=True)):
        with pytest.raises(TargetMismatchError) as e: attempt()
        assert env['target'].weights_hash() in str(e.value) and other.weights_hash() in str(e.value)


def test_edited_checkpoint_carries_its_record(env, tmp_path):
    task, t = env['task'], env['target']
    edited = env['bank'].apply({('src', task): 0.5})
    p = save_edited(edited, tmp_path / 'edited')
    meta = json.loads(p.with_suffix('.json').read_text())           # the record beside the open_clip state dict
    assert meta['format'] == 'platonic_ta.edited_model' and meta['edits'] == edit_record(edited)
    assert meta['base_weights_hash'] == t.weights_hash() and meta['weights_hash'] == edited.weights_hash()
    with safe_open(str(p), framework='pt') as f: assert set(f.keys()) == set(edited.model.state_dict())
    with pytest.raises(FileExistsError): save_edited(edited, p)
    back = load_edited(t, p)
    assert back.weights_hash() == edited.weights_hash() and edit_record(back) == edit_record(edited)
    with pytest.raises(EditRecordError) as e: load_edited(env['other'], p)
    assert t.weights_hash() in str(e.value) and env['other'].weights_hash() in str(e.value)
    raw = bytearray(p.read_bytes()); raw[-5] ^= 0xFF; p.write_bytes(bytes(raw))   # a flipped weight byte
    with pytest.raises(EditRecordError, match='damaged'): load_edited(t, p)


def test_weight_space_sum_refuses_nan_and_records(env):
    t = env['target']
    ft = fold_operator(t, 0.01 * torch.eye(96, dtype=torch.float64))
    plain = encoders.family_encoder(FAM); plain.model.load_state_dict(ft.model.state_dict())
    with pytest.raises(EditStackError): weight_space_sum(ft, [plain])    # an edited base is not a base
    for bad in (float('nan'), float('inf'), [float('nan')], 'x', True):
        with pytest.raises((TypeError, ValueError)): weight_space_sum(t, [plain], bad)
    ws = weight_space_sum(t, [plain], 0.5)
    assert edit_record(ws)[0]['kind'] == 'weight_space_sum' and torch.isfinite(ws.model.visual.proj).all()


# --- no clobbering, files named by kind ---------------------------------------------------------------------------
def _bytes(p): return {q.name: q.read_bytes() for q in sorted(Path(p).parent.glob(Path(p).stem + '.*'))}

def test_saves_refuse_existing_paths(env, tmp_path):
    D, bank = env['D'], env['bank']
    for save, path in ((D.save, tmp_path / 'desc'), (bank.save, tmp_path / 'bank')):
        save(path)
        before = _bytes(path.with_suffix('.json'))
        with pytest.raises(FileExistsError, match='overwrite=True'): save(path)
        assert _bytes(path.with_suffix('.json')) == before
        save(path, overwrite=True)
    fit = fit_adapter(env['target'], [(env['grid'], env['U'].float(), 1.0)], steps=2, progress=False)
    fit.save(tmp_path / 'ad')
    with pytest.raises(FileExistsError): fit.save(tmp_path / 'ad')
    with pytest.raises(FileExistsError):     # refused before the fit, not after it
        fit_adapter(env['target'], [(env['grid'], env['U'].float(), 1.0)], steps=10 ** 6, save_path=tmp_path / 'ad')
    fit.save(tmp_path / 'ad', overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['ad.json', 'ad.safetensors', 'bank.json', 'bank.safetensors',
                                                         'desc.json', 'desc.safetensors']      # no temporary file left
    with pytest.raises(WrongKindError, match='is an adapter, not an operator bank'): OperatorBank.load(tmp_path / 'ad')
    with pytest.raises(WrongKindError, match='is an adapter, not a descriptor'): Descriptor.load(tmp_path / 'ad')
    with pytest.raises(WrongKindError, match='is an operator bank, not an adapter.*OperatorBank.load'):
        load_adapter(env['target'], tmp_path / 'bank')
    with pytest.raises(WrongKindError, match='is a descriptor, not an operator bank'): OperatorBank.load(tmp_path / 'desc')
    with pytest.raises(WrongKindError, match='is an operator bank, not a descriptor'): Descriptor.load(tmp_path / 'bank')
    assert file_kind(tmp_path / 'bank.json') == 'operator bank'


# --- numbers ------------------------------------------------------------------------------------------------------
def test_scorer_refuses_nan_theta(env):
    sc = Scorer(env['bank'], env['evals'], cache=env['cache'])
    nan = torch.full(env['bank'].shape, float('nan'), dtype=torch.float64)
    for bad in (nan, torch.full(env['bank'].shape, float('inf')), torch.zeros(3, 3), torch.zeros(96, 96, dtype=torch.long)):
        with pytest.raises((TypeError, ValueError)): sc.score_theta(bad)
    assert all(0 <= v <= 1 for v in sc.score_theta(torch.zeros(env['bank'].shape, dtype=torch.float64)).values())


BAD_CALLS = {
    'make_grid seed 1.5': (lambda s: make_grid(world.load_task(s['task'], 'train', 48), 4, seed=1.5), TypeError),
    'make_grid seed -1': (lambda s: make_grid(world.load_task(s['task'], 'train', 48), 4, seed=-1), ValueError),
    'shuffled seed nan': (lambda s: shuffled_descriptor(s['U'], seed=float('nan')), ValueError),
    'certificate rtol nan': (lambda s: certificate(torch.ones(2, 3), torch.zeros(2, 3), torch.eye(3), rtol=float('nan')), ValueError),
    'certificate rtol -1': (lambda s: certificate(torch.ones(2, 3), torch.zeros(2, 3), torch.eye(3), rtol=-1), ValueError),
    'certificate 5000 classes': (lambda s: certificate(torch.ones(2, 8), torch.zeros(2, 8), torch.randn(5000, 8)),
                                 AllocationError),
    'ridge grid 10^13': (lambda s: floored_ridge_grid(0.0, per_decade=10 ** 13), ValueError),
    'ridge grid lo 0': (lambda s: floored_ridge_grid(0.0, lo=0.0), ValueError),
    'edit cells 10^15': (lambda s: edit_cells(['a', 'b'], ['x', 'y'], n_pairs=10 ** 15), AllocationError),
    'edit cells 1.5': (lambda s: edit_cells(['a', 'b'], ['x', 'y'], n_pairs=1.5), TypeError),
    'select holdout nan': (lambda s: select_ridges(torch.randn(8, 4), torch.randn(3, 4), torch.randn(8, 3),
                                                   holdout=float('nan')), ValueError),
    'select seed str': (lambda s: select_ridges(torch.randn(8, 4), torch.randn(3, 4), torch.randn(8, 3), seed='0'), TypeError),
    'select grid 10^4 x 10^4': (lambda s: select_ridges(torch.randn(10 ** 4, 4), torch.randn(3, 4),
                                                        torch.randn(10 ** 4, 3), grid_t=[1e-3] * 3 * 10 ** 4), AllocationError),
    'solve rank True': (lambda s: GridFactors(torch.randn(8, 4), torch.randn(3, 4)).solve(torch.randn(8, 3), rank=True), TypeError),
    'ridge string': (lambda s: GridFactors(torch.randn(8, 4), torch.randn(3, 4)).solve(torch.randn(8, 3), ridge_f='1'), TypeError),
    'fold strength str': (lambda s: fold_operator(s['target'], torch.zeros(96, 96), strength='1'), TypeError),
    'fold strength nan': (lambda s: fold_operator(s['target'], torch.zeros(96, 96), strength=float('nan')), ValueError),
    'fold stack 1': (lambda s: fold_operator(s['target'], torch.zeros(96, 96), stack=1), TypeError),
    'cache batch 2.5': (lambda s: EmbeddingCache(s['d'], batch_size=2.5), TypeError),
    'cache batch 0': (lambda s: EmbeddingCache(s['d'], batch_size=0), ValueError),
    'bank coeff nan': (lambda s: s['bank'].combine({('src', s['task']): float('nan')}), ValueError),
    'bank coeff str': (lambda s: s['bank'].combine({('src', s['task']): '1'}), TypeError),
    'bank coeff bool': (lambda s: s['bank'].combine({('src', s['task']): True}), TypeError),
    'source_key seed 1.5': (lambda s: source_key('f', 1.5), TypeError),
    'heldout n 0': (lambda s: heldout_split(s['task'], n=0), ValueError),
    'sliders lam nan': (lambda s: Sliders({'t': None}, ['a'], ['x'], lam=float('nan')), ValueError),
    'adapter seed 2^64': (lambda s: AdapterConfig(seed=2 ** 64), ValueError),
    'lora rank 10^9': (lambda s: add_adapter(_exposed(s['target']), rank=10 ** 9), AllocationError),
    'adapter steps 10^9': (lambda s: fit_adapter(s['target'], [(s['grid'], s['U'].float(), 1.0)], steps=10 ** 9,
                                                 progress=False), AllocationError),
    'zoo_descriptors seed 1.5': (lambda s: zoo_descriptors(None, {}, seeds=(0, 1.5)), TypeError),
    'lr_factor step > steps': (lambda s: lr_factor('cosine', 5, 3), ValueError),
    'forfeit min_own str': (lambda s: forfeited_gain(1.0, 2.0, min_own='0'), TypeError),
    'task_summary min nan': (lambda s: task_summary([], min_own_gain_points=float('nan')), ValueError),
}

def _exposed(enc):
    import copy
    from platonic_ta.qkv import expose_qkv
    e = copy.deepcopy(enc); expose_qkv(e.model.visual)
    return e.model

@pytest.mark.parametrize('case', sorted(BAD_CALLS))
def test_bad_numbers_are_refused(env, case, monkeypatch):
    "Each call is refused with the documented error, on a machine of 1 GiB (so size limits bite at small sizes)."
    monkeypatch.setenv('PLATONIC_TA_MAX_BYTES', str(2 ** 30))
    fn, exc = BAD_CALLS[case]
    with pytest.raises(exc) as e: fn(env)
    assert str(e.value), case


# --- two processes, one cache entry -------------------------------------------------------------------------------
class SlowEncoder:
    "A deterministic toy image encoder that leaves a file per forward pass (so computations can be counted)."
    name, preprocess_id, model = 'slow', 'toy', None
    def __init__(self, tally: str): self.tally = tally
    def weights_hash(self): return 'slow-encoder-v1'
    def encode_inputs(self, images):
        Path(self.tally, f'{os.getpid()}-{time.time_ns()}').touch()
        time.sleep(1.0)       # long enough that both processes ask before either has written
        return images.flatten(1)[:, :8].double() / 255 + 1

def _fill(root, tally, barrier, out):
    torch.set_num_threads(1)
    images = torch.arange(6 * 3 * 4 * 4, dtype=torch.int64).remainder(251).to(torch.uint8).view(6, 3, 4, 4)
    barrier.wait()
    z = EmbeddingCache(root, progress=False).embed_images(SlowEncoder(tally), images, key='race')
    save_file({'z': z}, out)

@pytest.mark.serial
def test_two_processes_fill_one_cache_entry(tmp_path):
    ctx = mp.get_context('spawn')
    tally = tmp_path / 'tally'; tally.mkdir()
    barrier = ctx.Barrier(2)
    ps = [ctx.Process(target=_fill, args=(str(tmp_path / 'c'), str(tally), barrier, str(tmp_path / f'z{i}.st')))
          for i in range(2)]
    for p in ps: p.start()
    for p in ps: p.join(120)
    assert [p.exitcode for p in ps] == [0, 0]
    assert len(list(tally.iterdir())) == 1              # one process computed, the other waited and read its file
    z0, z1 = (load_file(str(tmp_path / f'z{i}.st'))['z'] for i in range(2))
    assert torch.equal(z0, z1)
    files = sorted(p.name for p in (tmp_path / 'c' / 'embeddings').iterdir())
    assert len(files) == 2 and files[0].endswith('.safetensors') and files[1].endswith('.safetensors.lock'), files
    images = torch.arange(6 * 3 * 4 * 4, dtype=torch.int64).remainder(251).to(torch.uint8).view(6, 3, 4, 4)
    c = EmbeddingCache(tmp_path / 'c', progress=False)
    assert torch.equal(c.embed_images(SlowEncoder(str(tally)), images), z0) and c.hits == 1   # intact, read back
