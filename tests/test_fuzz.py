"""Property-based tests (hypothesis) over the public functions and file loaders of descriptors, factorization,
composition, adapter and residuals, task loading (tensors, image folders, datasets, load_task), grids, the α/λ
sliders and the zoo's files: random shapes, dtypes, NaN/Inf, empty inputs, odd numbers and names, truncated and
bit-flipped files, damaged image folders. Each call gives a correct result or a documented error raised by the library itself (never a
crash inside torch, never a silently wrong value). The number of inputs tried is printed at the end of the run."""
import copy, json, math, shutil, tempfile, warnings
from collections import Counter
from pathlib import Path

import numpy as np, pytest, torch
from hypothesis import given, settings, strategies as st, HealthCheck

torch.set_num_threads(1)

from platonic_ta.scoring import Scorer
from platonic_ta import world, zoo, encoders, families
from platonic_ta.guards import check_number, check_count, check_seed
from platonic_ta.grids import make_grid
from platonic_ta.cache import EmbeddingCache, CacheCorruptionWarning
from platonic_ta.descriptors import Descriptor, affinity, descriptor, unit, descriptor_cosine, consistency_matrix
from platonic_ta.factorization import (ridge_filter, solve_operator, GridFactors, select_ridges)
from platonic_ta.edits import fold_operator, edit_record, weights_hash_of, load_edited, save_edited
from platonic_ta.composition import OperatorBank
from platonic_ta.scoring import certificate
from platonic_ta.factorization import floored_ridge_grid
from platonic_ta.baselines import weight_space_sum
from platonic_ta.descriptors import shuffled_descriptor, consensus_descriptor
from platonic_ta.widgets import Sliders, make_sliders
from platonic_ta.adapter import load_adapter, fit_adapter
from platonic_ta.experiments import edit_cells
from platonic_ta.training import lr_factor
from platonic_ta.residuals import (shared_component, dispersion, pairwise_cosines, forfeited_gain, pearson,
                                   idealised_cosine, implied_dispersion, amplification)

DOCUMENTED = (TypeError, ValueError, KeyError, FileNotFoundError, FileExistsError, zoo.ArtifactError)
pytestmark = pytest.mark.xdist_group('fuzz')   # one worker runs the whole file, so the count below sees every property
COUNTS = Counter()                      # calls tried, per function or loader
EXAMPLES = Counter()                    # inputs generated, per property

def counted(fn):
    "Count the inputs hypothesis generates for the property `fn` (the innermost decorator, under `@given`)."
    import functools
    @functools.wraps(fn)
    def run(*a, **kw):
        EXAMPLES[fn.__name__] += 1
        return fn(*a, **kw)
    return run
BASE = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture])

def fast(n: int): return settings(BASE, max_examples=n)

def outcome(name: str, fn):
    "Run `fn`: `(True, value)`, or `(False, error)` for a documented error raised inside platonic_ta with a message."
    COUNTS[name] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', CacheCorruptionWarning)
            return True, fn()
    except DOCUMENTED as e:
        tb, where = e.__traceback__, None
        while tb is not None: where, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
        assert '/platonic_ta/' in where, f'{type(e).__name__} raised outside the library ({where}): {e}'
        assert str(e).strip(), f'{type(e).__name__} without a message'
        return False, e


# --- strategies ---------------------------------------------------------------------------------------------------
ANY_NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2 ** 70, 2 ** 70), st.booleans(),
                       st.none(), st.text(max_size=3), st.complex_numbers(max_magnitude=4),
                       st.sampled_from([torch.tensor(0.5), torch.tensor([1.0, 2.0]), np.float32(2.0), np.int64(3),
                                        torch.tensor(float('nan')), [1.0], (2,)]))
ENTRY = st.one_of(st.floats(-1e3, 1e3), st.sampled_from([0.0, float('nan'), float('inf'), -float('inf'), 1e-30]))
DTYPES = [torch.float64, torch.float32, torch.float16, torch.int64, torch.bool]

@st.composite
def tensors(draw, rows=None, cols=None, max_side=6, bad=0.05, dtypes=DTYPES):
    "A 2-D tensor: sides 0..max_side (or given), a random dtype, entries mostly finite with some NaN/Inf/zeros."
    r = draw(st.integers(0, max_side)) if rows is None else rows
    c = draw(st.integers(0, max_side)) if cols is None else cols
    seed = draw(st.integers(0, 2 ** 31))
    x = torch.randn(r, c, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    if r * c and draw(st.floats(0, 1)) < bad * 4:
        for _ in range(draw(st.integers(1, 3))):
            x[draw(st.integers(0, r - 1)), draw(st.integers(0, c - 1))] = draw(ENTRY)
    dt = draw(st.sampled_from(dtypes))
    return x.to(dt) if dt != torch.bool else x > 0

def finite_float(t): return t.is_floating_point() and bool(torch.isfinite(t).all())


# --- numbers ------------------------------------------------------------------------------------------------------
@fast(400)
@given(x=ANY_NUMBER, lo=st.none() | st.floats(-10, 10), span=st.floats(0, 20), open_=st.booleans())
@counted
def test_number_checks(x, lo, span, open_):
    hi = None if lo is None else lo + span
    ok, v = outcome('check_number', lambda: check_number(x, 'x', lo, hi, lo_open=open_))
    if ok:
        assert math.isfinite(v) and (lo is None or (v > lo if open_ else v >= lo)) and (hi is None or v <= hi)
        assert v == float(x.item() if hasattr(x, 'item') else x)
    else:
        real = not isinstance(x, (bool, str, complex, list, tuple, type(None))) and not (
            isinstance(x, torch.Tensor) and x.numel() != 1)
        assert isinstance(v, ValueError if real else TypeError), (x, v)
    ok, n = outcome('check_count', lambda: check_count(x, 'n', 1, 10 ** 6))
    if ok: assert isinstance(n, int) and 1 <= n <= 10 ** 6 and n == float(x.item() if hasattr(x, 'item') else x)
    ok, s = outcome('check_seed', lambda: check_seed(x))
    if ok: assert isinstance(s, int) and 0 <= s < 2 ** 63


@fast(150)
@given(floor=ANY_NUMBER, lo=ANY_NUMBER, per=ANY_NUMBER)
@counted
def test_floored_ridge_grid(floor, lo, per):
    ok, g = outcome('floored_ridge_grid', lambda: floored_ridge_grid(floor, lo=lo if isinstance(lo, float) else 1e-8,
                                                                      per_decade=per if isinstance(per, int) else 2))
    if ok: assert g and all(math.isfinite(r) and r >= 0 for r in g) and list(g) == sorted(g) and abs(g[-1] - 1) < 1e-9


@fast(150)
@given(alpha=ANY_NUMBER, lam=ANY_NUMBER, n_pairs=ANY_NUMBER, n_neg=st.integers(-2, 3))
@counted
def test_edit_cells(alpha, lam, n_pairs, n_neg):
    ok, cells = outcome('edit_cells', lambda: edit_cells(['f', 'g', 'h'], ['a', 'b', 'c'], alpha, lam, n_pairs, n_neg))
    if ok:
        assert len(cells) == 3 * (int(n_pairs) + n_neg)
        for c in cells: assert all(math.isfinite(v) and v != 0 for v in c['coeffs'].values())


@fast(100)
@given(sched=st.sampled_from(['constant', 'cosine', 'linear', 3]), step=ANY_NUMBER, steps=ANY_NUMBER)
@counted
def test_lr_factor(sched, step, steps):
    ok, f = outcome('lr_factor', lambda: lr_factor(sched, step, steps))
    if ok: assert 0 <= f <= 1


# --- factorization ------------------------------------------------------------------------------------------------
@fast(150)
@given(s=tensors(rows=1), rho=ANY_NUMBER)
@counted
def test_ridge_filter(s, rho):
    ok, phi = outcome('ridge_filter', lambda: ridge_filter(s[0], rho))
    if ok:
        assert phi.shape == s[0].shape and bool(torch.isfinite(phi).all())
        r, x = float(rho.item() if hasattr(rho, 'item') else rho), s[0].to(phi.dtype)
        if r > 0: assert torch.allclose(phi, x / (x * x + r), rtol=1e-3, atol=1e-6)


@fast(200)
@given(F=tensors(), T=tensors(), U=tensors(), ridge=ANY_NUMBER)
@counted
def test_solve_operator(F, T, U, ridge):
    ok, theta = outcome('solve_operator', lambda: solve_operator(F, T, U, ridge_f=ridge, ridge_t=1e-2))
    if ok:
        assert F.ndim == 2 and finite_float(theta) and theta.shape == (T.shape[1], F.shape[1])
        assert U.shape == (F.shape[0], T.shape[0]) and bool(torch.isfinite(U.double()).all())
        twice = solve_operator(F, T, 2 * U.double(), ridge_f=ridge, ridge_t=1e-2)     # linear in U
        assert torch.allclose(twice.double(), 2 * theta.double(), rtol=1e-4, atol=1e-6 * (1 + float(theta.abs().max())))


@fast(100)
@given(N=st.integers(0, 12), M=st.integers(1, 4), holdout=ANY_NUMBER, seed=ANY_NUMBER)
@counted
def test_select_ridges(N, M, holdout, seed):
    g = torch.Generator().manual_seed(N * 7 + M)
    F, T, U = torch.randn(N, 3, generator=g), torch.randn(M, 3, generator=g), torch.randn(N, M, generator=g)
    grid = (1e-6, 1e-3, 1.0)
    ok, sel = outcome('select_ridges', lambda: select_ridges(F, T, U, grid=grid, holdout=holdout, seed=seed))
    if ok:
        assert sel.ridge_f in grid and sel.ridge_t in grid and sel.scores.shape == (3, 3)
        assert float(sel.scores[grid.index(sel.ridge_f), grid.index(sel.ridge_t)]) == float(sel.scores.min())


@pytest.fixture(scope='module')
def encs():
    fams = zoo.MICRO['families']
    emb = next(f for f in fams if encoders.family_encoder(f).last_layer().kind != 'residual_head')
    return dict(emb=encoders.family_encoder(emb), other=encoders.family_encoder(emb, families.create_family_model(emb, seed=777)))

@fast(50)
@given(W=tensors(max_side=4), scale=st.floats(-2, 2), strength=ANY_NUMBER, stack=st.sampled_from([False, True, 1, None]),
       twice=st.booleans())
@counted
def test_fold_operator(encs, W, scale, strength, stack, twice):
    t = encs['emb']
    d = t.last_layer().d
    full = torch.zeros(d, d, dtype=torch.float64)
    if W.numel() and W.is_floating_point(): full[:W.shape[0], :W.shape[1]] = W.double() * 1e-2 * scale
    base = fold_operator(t, 1e-3 * torch.eye(d, dtype=torch.float64)) if twice else t
    Wuse = full if W.shape[0] % 2 == 0 else W            # half the time a full-size operator, else the raw draw
    ok, e = outcome('fold_operator', lambda: fold_operator(base, Wuse, strength, stack=stack))
    if ok:
        rec = edit_record(e)
        assert stack is True or not twice, 'folded twice without stack=True'
        assert len(rec) == 1 + twice and rec[-1]['weights_hash'] == e.weights_hash()
        assert rec[0]['base_weights_hash'] == t.weights_hash() and edit_record(t) == []
        c = float(strength.item() if hasattr(strength, 'item') else strength)
        before, after = base.last_layer().weight.double(), e.last_layer().weight.double()
        want = before @ (torch.eye(d, dtype=torch.float64) + c * Wuse.double()).T
        assert torch.allclose(after, want.to(after.dtype).double(), rtol=1e-4, atol=1e-5)


# --- descriptors --------------------------------------------------------------------------------------------------
@fast(200)
@given(a=tensors(), b=tensors(), t=tensors())
@counted
def test_affinity_and_descriptor(a, b, t):
    ok, A = outcome('affinity', lambda: affinity(a, t))
    if ok:
        assert A.shape == (a.shape[0], t.shape[0]) and finite_float(A) and float(A.abs().max()) <= 1 + 1e-3
    ok, D = outcome('descriptor', lambda: descriptor(a, b, t))
    if ok:
        assert D.shape == (a.shape[0], t.shape[0]) and finite_float(D)
        assert torch.allclose(D, affinity(a, t) - affinity(b, t))


@fast(150)
@given(U1=tensors(max_side=4), U2=tensors(max_side=4), seed=ANY_NUMBER)
@counted
def test_descriptor_algebra(U1, U2, seed):
    ok, u = outcome('unit', lambda: unit(U1))
    if ok: assert abs(float(u.double().norm()) - 1) < 1e-3
    ok, c = outcome('descriptor_cosine', lambda: descriptor_cosine(U1, U2))
    if ok: assert math.isfinite(float(c)) and abs(float(c)) <= 1 + 1e-3
    ok, C = outcome('consistency_matrix', lambda: consistency_matrix({('f', 'a'): U1, ('g', 'a'): U2}))
    ok, S = outcome('shuffled_descriptor', lambda: shuffled_descriptor(U1, seed))
    if ok: assert sorted(S.flatten().tolist()) == sorted(U1.flatten().tolist())
    ok, K = outcome('consensus_descriptor', lambda: consensus_descriptor([U1, U2]))
    if ok: assert finite_float(K) and K.shape == U1.shape


# --- files --------------------------------------------------------------------------------------------------------
MUTATION = st.one_of(st.tuples(st.just('flip'), st.sampled_from(['.json', '.safetensors']), st.floats(0, 1), st.integers(0, 7)),
                     st.tuples(st.just('truncate'), st.sampled_from(['.json', '.safetensors']), st.floats(0, 1), st.just(0)),
                     st.tuples(st.just('delete'), st.sampled_from(['.json', '.safetensors']), st.just(0.0), st.just(0)),
                     st.tuples(st.just('swap'), st.sampled_from(['.json', '.safetensors']), st.just(0.0), st.just(0)))

def mutate(src: Path, dst: Path, m, other: Path):
    "Copy the pair `src.{json,safetensors}` to `dst`, damaging one file as `m` says (`swap`: take it from `other`)."
    kind, suffix, where, bit = m
    for s in ('.json', '.safetensors'): shutil.copy(src.with_suffix(s), dst.with_suffix(s))
    p = dst.with_suffix(suffix)
    raw = bytearray(p.read_bytes())
    if kind == 'flip': raw[min(int(where * len(raw)), len(raw) - 1)] ^= 1 << bit
    elif kind == 'truncate': raw = raw[:int(where * len(raw))]
    elif kind == 'swap': raw = bytearray(other.with_suffix(suffix).read_bytes())
    if kind == 'delete': p.unlink()
    else: p.write_bytes(bytes(raw))

@pytest.fixture(scope='module')
def saved(tmp_path_factory, encs):
    "A descriptor, a bank and an adapter of the embedding-route target, saved once; mutations copy them."
    d = tmp_path_factory.mktemp('fuzz_files')
    task = world.list_tasks()[0]
    grid = make_grid(world.load_task(task, 'train', 40), 12, seed=0)
    U = 0.2 * torch.randn(grid.N, grid.M, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    D = Descriptor.from_matrix(U, grid, dict(model='s', weights_hash='1'), dict(model='b', weights_hash='2'))
    D.save(d / 'desc')
    Do = Descriptor.from_matrix(2 * U, grid, dict(model='s2', weights_hash='3'), dict(model='b', weights_hash='2'))
    Do.save(d / 'desc_other')
    bank = OperatorBank.build(encs['emb'], [grid], {('s', task): D}, ridges=(1e-2, 1e-2),
                              cache=EmbeddingCache(d / 'cache', progress=False))
    bank.save(d / 'bank')
    bank2 = OperatorBank.build(encs['emb'], [grid], {('s', task): Do}, ridges=(1e-1, 1e-1), cache=EmbeddingCache(d / 'cache', progress=False))
    bank2.save(d / 'bank_other')
    fit = fit_adapter(encs['emb'], [(grid, U.float(), 1.0)], steps=2, progress=False)
    fit.save(d / 'ad')
    fit2 = fit_adapter(encs['emb'], [(grid, U.float(), -1.0)], steps=2, progress=False)
    fit2.save(d / 'ad_other')
    return dict(d=d, D=D, bank=bank, fit=fit, target=encs['emb'], grid=grid, task=task)

@fast(200)
@given(m=MUTATION)
@counted
def test_descriptor_files(saved, m):
    with tempfile.TemporaryDirectory() as t:
        dst = Path(t) / 'x'
        mutate(saved['d'] / 'desc', dst, m, saved['d'] / ('desc_other' if m[0] == 'swap' else 'bank'))
        ok, D = outcome('Descriptor.load', lambda: Descriptor.load(dst))
        if ok:
            ref = saved['D']
            assert torch.equal(D.U, ref.U) and D.manifest() == ref.manifest(), f'{m}: loaded a different descriptor'

@fast(200)
@given(m=MUTATION)
@counted
def test_bank_files(saved, m):
    with tempfile.TemporaryDirectory() as t:
        dst = Path(t) / 'x'
        mutate(saved['d'] / 'bank', dst, m, saved['d'] / 'bank_other')
        ok, b = outcome('OperatorBank.load', lambda: OperatorBank.load(dst))
        if ok:
            ref = saved['bank']
            assert b.keys() == ref.keys() and all(torch.equal(b[k], ref[k]) for k in b.keys())
            assert b.manifest() == ref.manifest(), f'{m}: loaded a different bank'

@fast(40)
@given(m=MUTATION)
@counted
def test_adapter_files(saved, m):
    with tempfile.TemporaryDirectory() as t:
        dst = Path(t) / 'x'
        mutate(saved['d'] / 'ad', dst, m, saved['d'] / 'ad_other')
        ok, enc = outcome('load_adapter', lambda: load_adapter(saved['target'], dst))
        if ok: assert enc.weights_hash() == saved['fit'].encoder.weights_hash(), f'{m}: loaded a different adapter'

@fast(100)
@given(kind=st.sampled_from(['desc', 'bank', 'ad']), loader=st.sampled_from(['desc', 'bank', 'ad']))
@counted
def test_files_of_another_kind(saved, kind, loader):
    load = dict(desc=Descriptor.load, bank=OperatorBank.load, ad=lambda p: load_adapter(saved['target'], p))[loader]
    ok, got = outcome('loader of another kind', lambda: load(saved['d'] / kind))
    assert ok == (kind == loader)
    if not ok: assert 'not a' in str(got) and 'load it with' in str(got)

@fast(60)
@given(where=st.floats(0, 1), bit=st.integers(0, 7), truncate=st.booleans())
@counted
def test_edited_checkpoints(saved, where, bit, truncate):
    with tempfile.TemporaryDirectory() as t:
        e = saved['bank'].apply({('s', saved['task']): 1.0})
        p = save_edited(e, Path(t) / 'e')
        raw = bytearray(p.read_bytes())
        if truncate: raw = raw[:int(where * len(raw))]
        else: raw[min(int(where * len(raw)), len(raw) - 1)] ^= 1 << bit
        p.write_bytes(bytes(raw))
        ok, back = outcome('load_edited', lambda: load_edited(saved['target'], p))
        if ok: assert back.weights_hash() == e.weights_hash() and edit_record(back) == edit_record(e)

class ToyEncoder:
    name, preprocess_id, model = 'toy', 'toy', None
    def weights_hash(self): return 'toy-v1'
    def encode_inputs(self, images): return images.flatten(1)[:, :5].double() / 255 + 0.5

@fast(100)
@given(where=st.floats(0, 1), bit=st.integers(0, 7), truncate=st.booleans())
@counted
def test_cache_files(tmp_path_factory, where, bit, truncate):
    root = tmp_path_factory.mktemp('fuzz_cache')
    images = torch.arange(4 * 3 * 3 * 3).remainder(250).to(torch.uint8).view(4, 3, 3, 3)
    want = EmbeddingCache(root, progress=False).embed_images(ToyEncoder(), images)
    (p,) = (root / 'embeddings').glob('*.safetensors')
    raw = bytearray(p.read_bytes())
    if truncate: raw = raw[:int(where * len(raw))]
    else: raw[min(int(where * len(raw)), len(raw) - 1)] ^= 1 << bit
    p.write_bytes(bytes(raw))
    ok, z = outcome('EmbeddingCache', lambda: EmbeddingCache(root, progress=False).embed_images(ToyEncoder(), images))
    assert ok and torch.equal(z, want)           # a damaged entry is never used: it is recomputed


@fast(40)
@given(fam=st.sampled_from(zoo.MICRO['families']), part=st.sampled_from(['base']), where=st.floats(0, 1),
       bit=st.integers(0, 7), truncate=st.booleans())
@counted
def test_zoo_weight_files(fam, part, where, bit, truncate):
    "A damaged shipped zoo weight file is refused by its checksum (its JSON record is the zoo module's concern)."
    src = zoo.base_path(zoo.shipped_zoo_dir(), fam)
    with tempfile.TemporaryDirectory() as t:
        dst = Path(t) / fam / 'base'; dst.parent.mkdir()
        for s in ('.json', '.safetensors'): shutil.copy(src.with_suffix(s), dst.with_suffix(s))
        st_ = dst.with_suffix('.safetensors'); raw = bytearray(st_.read_bytes())
        if truncate: raw = raw[:int(where * len(raw))]
        else: raw[min(int(where * len(raw)), len(raw) - 1)] ^= 1 << bit
        st_.write_bytes(bytes(raw))
        ok, got = outcome('zoo.load_artifact', lambda: zoo.load_artifact(dst))
        assert not ok and isinstance(got, zoo.ArtifactError)


@fast(60)
@given(fam=st.sampled_from(zoo.MICRO['families']), task=st.sampled_from(zoo.MICRO['tasks'] + [None]), m=MUTATION,
       stray=st.sampled_from([None, b'{}', b'\xff\xfe', b'[1, 2]', b'']))
@counted
def test_zoo_records(fam, task, m, stray):
    "The micro zoo's fine-tunes and JSON records, damaged: refused (load_artifact) or named (stale_families), never taken."
    from safetensors.torch import load_file
    z = zoo.shipped_zoo_dir()
    others = [t for t in zoo.MICRO['tasks'] if t != task]
    src, other = (zoo.base_path(z, fam), zoo.base_path(z, next(f for f in zoo.MICRO['families'] if f != fam))) if task is None \
        else (zoo.ft_path(z, fam, task), zoo.ft_path(z, fam, others[0]))
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        (d / fam / 'ft').mkdir(parents=True)
        for p in [zoo.base_path(z, fam)] + [zoo.ft_path(z, fam, x) for x in zoo.MICRO['tasks']]:   # the records, for the scan
            shutil.copy(p.with_suffix('.json'), d / p.relative_to(z).with_suffix('.json'))
        dst = d / src.relative_to(z)
        mutate(src, dst, m, other)
        if stray is not None: (d / fam / 'ft' / 'notes.json').write_bytes(stray); (d / fam / 'ft' / 'a_sx.json').write_bytes(stray)
        same = all(p.with_suffix(x).exists() and p.with_suffix(x).read_bytes() == src.with_suffix(x).read_bytes()
                   for p in [dst] for x in ('.json', '.safetensors'))
        ok, got = outcome('zoo.load_artifact', lambda: zoo.load_artifact(dst))
        if ok:
            ref = json.loads(src.with_suffix('.json').read_text())
            tensors, meta = got
            want = load_file(str(src.with_suffix('.safetensors')))
            assert tensors.keys() == want.keys() and all(torch.equal(tensors[k], want[k]) for k in want), f'{m}: other weights taken'
            assert all(meta.get(k) == v for k, v in ref.items() if k != 'digest'), f'{m}: another record taken'
            assert same or 'digest' not in meta, f'{m}: a damaged file was taken'     # a flip in the key "digest" unseals it
        else: assert isinstance(got, zoo.ArtifactError) and not same
        ok, stale = outcome('zoo.stale_families', lambda: zoo.stale_families(d))
        assert ok, stale
        if same: assert stale == {}, stale
        js = dst.with_suffix('.json')
        if js.exists():
            try: json.loads(js.read_bytes())
            except ValueError: assert 'damaged' in stale.get(fam, '') or (task is None and m[0] == 'delete'), (m, stale)
        ok, Z = outcome('zoo.get_zoo', lambda: zoo.get_zoo(str(d)))
        if ok: assert Z.families == [fam] and set(Z.tasks) <= set(zoo.MICRO['tasks']) and Z.seeds == [0]
        else: assert task is None and m[0] == 'delete' and m[1] == '.json'


# --- composition --------------------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def scorer(saved):
    task = saved['task']
    return Scorer(saved['bank'], {task: world.load_task(task, 'test', 20)}, cache=EmbeddingCache(saved['d'] / 'cache', progress=False))

@fast(200)
@given(theta=tensors(max_side=4), full=st.booleans(), bad=ENTRY)
@counted
def test_score_theta(scorer, theta, full, bad):
    shape = scorer.bank.shape
    if full:
        th = torch.zeros(shape, dtype=theta.dtype if theta.dtype != torch.bool else torch.float64)
        th.view(-1)[0] = bad if th.is_floating_point() else 0
    else: th = theta
    ok, acc = outcome('Scorer.score_theta', lambda: scorer.score_theta(th))
    if ok:
        assert tuple(th.shape) == shape and bool(torch.isfinite(th.double()).all())
        assert all(0 <= v <= 1 for v in acc.values())

@fast(200)
@given(coeffs=st.dictionaries(st.one_of(st.tuples(st.sampled_from(['s', 'x']), st.just('TASK')),
                                        st.tuples(st.sampled_from(['s']), st.just('TASK'), st.sampled_from(['h', 'GRID'])),
                                        st.sampled_from([('s',), 's', 3, ('s', 1)])), ANY_NUMBER, max_size=3))
@counted
def test_bank_combine(saved, coeffs):
    bank, task = saved['bank'], saved['task']
    fix = lambda k: tuple(task if x == 'TASK' else bank.grid_of(('s', task)) if x == 'GRID' else x for x in k) \
        if isinstance(k, tuple) else k
    cs = {fix(k): v for k, v in coeffs.items()}
    ok, th = outcome('OperatorBank.combine', lambda: bank.combine(cs))
    if ok:
        c = sum(float(v.item() if hasattr(v, 'item') else v) for v in cs.values())
        assert torch.allclose(th, c * bank[('s', task)]) and finite_float(th)

@fast(200)
@given(z=tensors(max_side=5, dtypes=[torch.float64, torch.float32]), E=tensors(max_side=5, dtypes=[torch.float64]),
       T=tensors(max_side=5, dtypes=[torch.float64, torch.float32]), rtol=ANY_NUMBER, scale=st.floats(0, 3))
@counted
def test_certificate_is_sound(z, E, T, rtol, scale):
    Es = E * scale
    ok, mask = outcome('certificate', lambda: certificate(z, Es, T, rtol))
    if ok:
        Tn = T.double() / T.double().norm(dim=1, keepdim=True)
        before, after = (z.double() @ Tn.T).argmax(1), ((z.double() + Es.double()) @ Tn.T).argmax(1)
        gap = (z.double() @ Tn.T).sort(1, descending=True).values
        clear = gap[:, 0] - gap[:, 1] > 1e-9 if Tn.shape[0] > 1 else torch.ones(len(z), dtype=torch.bool)
        assert bool(((before == after) | ~mask | ~clear).all()), 'a certified prediction changed'

@fast(60)
@given(coeffs=st.one_of(ANY_NUMBER, st.lists(ANY_NUMBER, max_size=2)))
@counted
def test_weight_space_sum(encs, coeffs):
    ok, m = outcome('weight_space_sum', lambda: weight_space_sum(encs['emb'], [encs['other']], coeffs))
    if ok:
        assert all(torch.isfinite(p).all() for p in m.model.state_dict().values() if p.is_floating_point())
        assert edit_record(m)[0]['kind'] == 'weight_space_sum'


@pytest.fixture(scope='module')
def sliders(saved, scorer):
    return make_sliders(saved['bank'], scorer, ['s'], widget=True)

SLIDER_VALUE = st.one_of(ANY_NUMBER, st.floats(-1, 5), st.sampled_from([0.0, 2.0, 4.0, 1e300, -1e300]))

@fast(60)
@given(alpha=SLIDER_VALUE, lam=SLIDER_VALUE, source=st.sampled_from(['s', 's', 'x', None]), target=st.sampled_from(['T', 'T', 'nope']),
       negate=st.sampled_from(['TASK', None, 'nope']), via_widget=st.booleans())
@counted
def test_sliders(saved, scorer, sliders, alpha, lam, source, target, negate, via_widget):
    "The α and λ callbacks, fed any value: the plain `update` and the widget's sliders."
    import traitlets
    task, bank = saved['task'], saved['bank']
    tgt, neg = bank.target_id['name'] if target == 'T' else target, task if negate == 'TASK' else negate
    num = lambda v: float(v.item() if hasattr(v, 'item') else v)
    if via_widget:
        w = sliders._w
        for s_, v in ((w['alphas'][task], alpha), (w['lam'], lam)):
            try: s_.value = v
            except traitlets.TraitError: pass                 # the widget refuses what is no number
        st_ = sliders.state()
        a, l = st_['alphas'][task], st_['lam']
        assert all(math.isnan(v) or lo <= v <= hi for v, lo, hi in ((a, 0, 2), (l, 0, 4))), st_
        res = sliders.refresh()
        if math.isnan(a) or math.isnan(l):
            assert res is None and 'cannot score' in w['info'].value
        else:
            assert res is not None and res == sliders.update(st_) and 'ms' in w['info'].value
            assert '<table>' in w['chart'].value
        return
    state = dict(target=tgt, source=source, alphas={task: alpha}, negate=neg, lam=lam)
    ok, got = outcome('Sliders.update', lambda: sliders.update(state))
    if ok:
        a, l = num(alpha), num(lam)
        want = {(source, task): a} if a else {}
        if neg is not None and l: want[(source, neg)] = want.get((source, neg), 0.0) - l
        acc, (rows, bars) = scorer.score(want), got
        assert bars['tasks'] == scorer.tasks and bars['edited'] == [acc[t] for t in scorer.tasks] and all(0 <= v <= 1 for v in acc.values())
        c = sum(want.values())
        assert all(r['role'] == ('composed' if c > 0 else 'negated' if c < 0 else 'control') for r in rows if r['task'] == task)
    ok, sl = outcome('Sliders', lambda: Sliders({tgt: scorer}, [source], [task], [task], alpha, lam))
    if ok: assert sl.alpha == {task: num(alpha)} and sl.lam == num(lam) and math.isfinite(sl.lam + sl.alpha[task])


# --- residuals ----------------------------------------------------------------------------------------------------
@fast(200)
@given(U1=tensors(max_side=4), U2=tensors(max_side=4), U3=tensors(max_side=4), x=ANY_NUMBER, y=ANY_NUMBER, m=ANY_NUMBER)
@counted
def test_residuals(U1, U2, U3, x, y, m):
    ok, s = outcome('shared_component', lambda: shared_component([U1, U2, U3]))
    if ok: assert finite_float(s) and float(s.double().norm()) <= 1 + 1e-3
    ok, r = outcome('dispersion', lambda: dispersion([U1, U2]))
    if ok: assert finite_float(r) and bool((r >= 0).all())
    ok, C = outcome('pairwise_cosines', lambda: pairwise_cosines([U1, U2, U3]))
    if ok: assert finite_float(C) and bool((C.abs() <= 1 + 1e-3).all())
    ok, f = outcome('forfeited_gain', lambda: forfeited_gain(x, y, m))
    if ok:   # numbers give a float, tensors a tensor (broadcast): finite, or NaN where the own gain is too small
        ft = torch.as_tensor(f, dtype=torch.float64); assert bool((torch.isfinite(ft) | torch.isnan(ft)).all())
    ok, p = outcome('pearson', lambda: pearson(U1.flatten() if U1.is_floating_point() else U1, U2.flatten()))
    if ok: assert abs(float(p)) <= 1 + 1e-6
    ok, c = outcome('idealised_cosine', lambda: idealised_cosine(x))
    if ok: assert bool((torch.as_tensor(c, dtype=torch.float64) >= 0).all() and (torch.as_tensor(c, dtype=torch.float64) <= 1).all())   # 0 only by underflow
    ok, d = outcome('implied_dispersion', lambda: implied_dispersion(x))
    if ok: assert bool((torch.as_tensor(d, dtype=torch.float64) >= 0).all() and torch.isfinite(torch.as_tensor(d, dtype=torch.float64)).all())
    ok, a = outcome('amplification', lambda: amplification(U1, U2, U2, U3))
    if ok: assert math.isfinite(float(a)) and float(a) >= 0


# --- task loading -------------------------------------------------------------------------------------------------
from platonic_ta import tasks as T

@fast(80)
@given(n=st.integers(0, 3), layout=st.sampled_from(['nchw', 'nhwc', 'nhw']), c=st.sampled_from([1, 3, 4]), h=st.integers(1, 5),
       w=st.integers(1, 5), dtype=st.sampled_from([torch.uint8, torch.float32, torch.float64, torch.float16]),
       size=st.sampled_from([None, None, 1, 3, 4]), seed=st.integers(0, 2 ** 31), as_numpy=st.booleans(),
       spoil=st.sampled_from([None] * 4 + ['shape', 'dtype', 'value', 'size']), bad_layout=st.sampled_from(['hw', 'nchwx', 'zero', 'channels']),
       bad_c=st.sampled_from([2, 5, 0]), bad_dtype=st.sampled_from([torch.int64, torch.bool, torch.int8]), bad=ENTRY,
       bad_size=st.sampled_from([0, -2, 2.5, float('nan'), 'x', 5000]))
@counted
def test_as_uint8_images(n, layout, c, h, w, dtype, size, seed, as_numpy, spoil, bad_layout, bad_c, bad_dtype, bad, bad_size):
    "Images in any layout and dtype: one thing at a time spoilt (the shape, the dtype, a value or the size)."
    if spoil == 'shape':
        layout, c, h = dict(zero=(layout, c, 0), channels=('nchw', bad_c, h)).get(bad_layout, (bad_layout, c, h))
    dtype, size = bad_dtype if spoil == 'dtype' else dtype, bad_size if spoil == 'size' else size
    g = torch.Generator().manual_seed(seed)
    shape = dict(nchw=(n, c, h, w), nhwc=(n, h, w, c), nhw=(n, h, w), hw=(h, w), nchwx=(n, c, h, w, 1))[layout]
    x = torch.rand(shape, generator=g, dtype=torch.float64)
    if spoil == 'value' and x.numel() and dtype.is_floating_point: x.view(-1)[0] = bad if math.isfinite(bad) and abs(bad) > 1 else float('nan')
    x = (x * 255).to(dtype) if dtype in (torch.uint8, torch.int64) else x > 0.5 if dtype == torch.bool else x.to(dtype)
    ok, out = outcome('as_uint8_images', lambda: T.as_uint8_images(x.numpy() if as_numpy and dtype != torch.float16 else x, size))
    if not ok: return
    assert out.dtype == torch.uint8 and out.ndim == 4 and out.shape[:2] == (n, 3) and 0 not in out.shape[2:]
    assert spoil in (None, 'shape') or (spoil == 'value' and not (x.numel() and dtype.is_floating_point)), f'{spoil}: taken'
    assert spoil != 'shape' or (bad_layout == 'channels' and w in (1, 3, 4)), 'a shape without channels taken'   # (read channels last)
    if size is not None: assert tuple(out.shape[-2:]) == (size, size)
    first = x[:, None] if layout == 'nhw' else x
    if layout == 'nchw' and c == 3 and size is None:    # unambiguous: the same pixels, as uint8
        want = x if dtype == torch.uint8 else (x.double() * 255).round().to(torch.uint8)
        assert torch.equal(out, want), 'images changed on the way in'
    if layout == 'nhw' and size is None: assert torch.equal(out[:, 0], out[:, 2]) and out.shape[-2:] == first.shape[-2:]


LABEL_KIND = st.sampled_from(['ok', 'float', 'frac', 'nan', 'neg', 'high', 'short', 'long', 'str', 'bool', '2d', 'column', 'huge'])

def spoilt_labels(n: int, k: int, kind: str):
    "Labels of `n` images over `k` classes, balanced, then spoilt as `kind` says (a list, a numpy array or a tensor)."
    y = np.arange(n) % k
    if kind == 'float': return y.astype(np.float64)                    # whole floats: fine
    if kind == 'frac' and n: return y + 0.5
    if kind == 'nan' and n: return np.where(np.arange(n) == 0, np.nan, y)
    if kind == 'neg' and n: return torch.as_tensor(y - 1)
    if kind == 'high' and n: return list(y + 1)
    if kind == 'short': return y[:-1]
    if kind == 'long': return list(y) + [0]
    if kind == 'str': return [str(v) for v in y]
    if kind == 'bool': return y > 0
    if kind == '2d': return np.stack([y, y])
    if kind == 'column': return torch.as_tensor(y)[:, None]          # (n, 1): fine
    if kind == 'huge' and n: return [2 ** 70] + list(y[1:])
    return torch.as_tensor(y)

def pixel_pairs(*datas) -> Counter:
    "The (image bytes, label) pairs of task splits, as a multiset."
    return Counter((bytes(im.contiguous().numpy().tobytes()), int(y)) for d in datas for im, y in zip(d.images, d.labels))

NAMES = st.sampled_from([['cat', 'dog', 'eel', 'fox'], 'cdef', ['cat', 'cat', 'eel', 'fox'], ['cat', ' ', 'eel', 'fox'],
                         [1, 2, 3, 4], ['cat', 'dog']])
TEMPLATES = st.sampled_from([None, ['a photo of a {}.'], ['no slot'], ['{} and {}'], 'a {}', [], ['x {}', 3]])
FRACS = st.sampled_from([0.25, 0.5, 0.9, 0.0, 1.0, float('nan'), '0.3', None])
N_ASKED = st.sampled_from([None, 1, 2, 3.0, 2.5, 0, -1, 10 ** 9, True, 'x', float('nan'), np.int64(2)])

@fast(60)
@given(n=st.integers(0, 14), k=st.integers(1, 4), spoil=st.sampled_from(['none'] * 4 + ['labels', 'names', 'templates', 'frac', 'seed']),
       kind=LABEL_KIND, names=NAMES, templates=TEMPLATES, frac=FRACS, seed=st.sampled_from([-1, 1.5, 2 ** 64, 'x']),
       split=st.sampled_from(['train', 'test', 'val', None]), asked=N_ASKED, float_images=st.booleans())
@counted
def test_tensor_task(n, k, spoil, kind, names, templates, frac, seed, split, asked, float_images):
    "Images and labels in memory as a task: one input at a time spoilt (labels, names, templates, test_frac or seed)."
    g = torch.Generator().manual_seed(n * 31 + k)
    images = torch.rand(n, 4, 4, 3, generator=g) if float_images else torch.randint(0, 256, (n, 3, 4, 4), generator=g, dtype=torch.uint8)
    kind = kind if spoil == 'labels' else 'ok'
    names = names if spoil == 'names' else ['cat', 'dog', 'eel', 'fox']
    templates, frac = templates if spoil == 'templates' else None, frac if spoil == 'frac' else 0.25
    seed = seed if spoil == 'seed' else n % 3
    labels, names = spoilt_labels(n, k, kind), names if isinstance(names, str) else names[:k]
    name = 'fuzz_tensors'
    ok, loader = outcome('register_tensor_task', lambda: T.register_tensor_task(name, images, labels, names, templates, overwrite=True,
                                                                                 test_frac=frac, seed=seed))
    try:
        if not ok: return
        assert kind in ('ok', 'float', 'column') and n >= 2 * k and isinstance(names, list) and len(set(map(str, names))) == k
        assert 0 < float(frac) < 1 and spoil != 'seed' and (templates is None or all('{}' in t for t in templates))
        tr, te = world.load_task(name, 'train'), world.load_task(name, 'test')
        want = pixel_pairs(world.TaskData(name, 'all', T.as_uint8_images(images), torch.as_tensor(np.asarray(labels)).flatten().long(), [], []))
        assert pixel_pairs(tr, te) == want, 'the splits lose, add or relabel images'
        assert set(tr.labels.tolist()) == set(te.labels.tolist()) == set(range(k)), 'a class missing from a split'
        assert tr.classnames == [str(c) for c in names] and tr.templates == (templates or T.DEFAULT_TEMPLATES)
        again = T.register_tensor_task(name, images, labels, names, templates, overwrite=True, test_frac=frac, seed=seed)
        assert torch.equal(again('test').images, te.images) and torch.equal(again('test').labels, te.labels), 'split not seeded'
        ok, d = outcome('load_task', lambda: world.load_task(name, split, asked))
        if ok:
            assert split in world.SPLITS and d.split == split and d.name == name
            full = tr if split == 'train' else te
            m = len(full) if asked is None else min(int(asked), len(full))
            assert len(d) == m and torch.equal(d.images, full.images[:m]) and torch.equal(d.labels, full.labels[:m])
    finally:
        if name in world.USER_TASKS: world.unregister_task(name)


@fast(60)
@given(labels=st.lists(st.integers(0, 4), min_size=1, max_size=7).map(lambda y: y + y[::-1]), odd=st.lists(st.sampled_from([-1, 0, 1, 2.0, 0.5, float('nan')]), max_size=8),
       as_tensor=st.booleans(), frac=st.floats(0.01, 0.99), seed=st.integers(0, 2 ** 63 - 1), spoil=st.sampled_from([None] * 3 + ['labels', 'frac', 'seed']),
       bad=ANY_NUMBER)
@counted
def test_stratified_split(labels, odd, as_tensor, frac, seed, spoil, bad):
    labels, frac, seed = odd if spoil == 'labels' else labels, bad if spoil == 'frac' else frac, bad if spoil == 'seed' else seed
    y = torch.tensor(labels) if as_tensor and labels else labels
    ok, sp = outcome('stratified_split', lambda: T.stratified_split(y, frac, seed))
    if not ok: return
    lab = torch.tensor(labels).long()
    tr, te = sp['train'].tolist(), sp['test'].tolist()
    assert sorted(tr + te) == list(range(len(labels))), 'indices lost or repeated'
    for c in set(lab.tolist()):
        n_c, k = int((lab == c).sum()), int((lab[sp['test']] == c).sum())
        assert c >= 0 and k == min(max(1, round(float(frac) * n_c)), n_c - 1), (c, n_c, k)
    again = T.stratified_split(y, frac, seed)
    assert all(torch.equal(sp[s], again[s]) for s in sp), 'the split is not a function of the seed'


@pytest.fixture(scope='module')
def image_folder(tmp_path_factory):
    "A small image folder (3 classes of 4 PNGs, 6 px) and the pixels of each file, keyed by relative path."
    from PIL import Image
    root = T.make_image_folder(tmp_path_factory.mktemp('fuzz_folder') / 'f', n_per_class=4, size=6)
    pixels = {str(p.relative_to(root)): np.array(Image.open(p).convert('RGB')) for p in root.rglob('*.png')}
    return root, pixels

FOLDER_EDIT = st.sampled_from(['empty_class', 'hidden_dir', 'non_image', 'truncate', 'flip', 'empty_file', 'grey', 'odd_size',
                               'names_ok', 'names_blank_lines', 'names_count', 'names_latin1', 'names_bom', 'names_twice',
                               'templates_ok', 'templates_no_slot', 'templates_latin1', 'templates_empty', 'split_dirs'])

def edit_folder(root: Path, pixels: dict, edit: str, where: float, bit: int):
    "Apply one `edit` to the folder `root`; update `pixels` (relative path -> expected RGB array) and return what the names and templates must be."
    from PIL import Image
    files = sorted(pixels)
    f = root / files[int(where * (len(files) - 1))]
    names = templates = None
    if edit == 'empty_class': (root / 'zzz').mkdir()
    elif edit == 'hidden_dir': (root / '.thumbs').mkdir(); (root / '.thumbs' / 'a.png').write_bytes(b'x')
    elif edit == 'non_image': (f.parent / 'notes.txt').write_text('not an image'); (f.parent / 'x.json').write_text('{}')
    elif edit in ('truncate', 'flip', 'empty_file'):
        raw = bytearray(f.read_bytes())
        if edit == 'truncate': raw = raw[:int(where * len(raw))]
        elif edit == 'flip': raw[min(int(where * len(raw)), len(raw) - 1)] ^= 1 << bit
        else: raw = b''
        f.write_bytes(bytes(raw))          # the pixels stay what they were: a damaged file must not decode to others
    elif edit == 'grey':
        a = (np.arange(36).reshape(6, 6) * 7 % 256).astype(np.uint8)
        Image.fromarray(a, 'L').save(f); pixels[str(f.relative_to(root))] = np.repeat(a[:, :, None], 3, 2)
    elif edit == 'odd_size':
        a = np.full((9, 7, 3), 200, np.uint8); Image.fromarray(a).save(f.parent / 'odd.png')
        pixels[str((f.parent / 'odd.png').relative_to(root))] = a
    elif edit.startswith('names'):
        body = dict(names_ok='navy\nlime\ncrimson\n', names_blank_lines='\n# sorted\nnavy\n\n lime \ncrimson\n\n',
                    names_count='navy\nlime\n', names_twice='navy\nlime\nnavy\n')
        raw = b'r\xe9d\ngreen\nblue\n' if edit == 'names_latin1' else b'\xef\xbb\xbfnavy\nlime\ncrimson\n' if edit == 'names_bom' \
            else body[edit].encode()
        (root / 'classnames.txt').write_bytes(raw)
        names = ['navy', 'lime', 'crimson']
    elif edit.startswith('templates'):
        raw = dict(templates_ok=b'a {} square\nthe colour {}\n', templates_no_slot=b'a square\n', templates_empty=b'\n\n',
                   templates_latin1=b'une {} \xe9toile\n')[edit]
        (root / 'templates.txt').write_bytes(raw)
        templates = ['a {} square', 'the colour {}']
    elif edit == 'split_dirs':                           # train/ and test/ with the same class folders
        for cls in ('blue', 'green', 'red'):
            for i, q in enumerate(sorted((root / cls).iterdir())):      # three images to train, the rest to test
                s = 'train' if i < 3 else 'test'
                (root / s / cls).mkdir(parents=True, exist_ok=True)
                rel = str(q.relative_to(root)); shutil.move(q, root / s / rel)
                if rel in pixels: pixels[f'{s}/{rel}'] = pixels.pop(rel)
            (root / cls).rmdir()
    return names, templates

@fast(50)
@given(edits=st.lists(FOLDER_EDIT, min_size=1, max_size=2, unique=True), where=st.floats(0, 1), bit=st.integers(0, 7),
       frac=st.sampled_from([0.25, 0.5, 0.0]), seed=st.integers(0, 3), size=st.sampled_from([None, None, 5]))
@counted
def test_folder_task(image_folder, edits, where, bit, frac, seed, size):
    src, pixels0 = image_folder
    with tempfile.TemporaryDirectory() as t:
        root, pixels = Path(t) / 'f', dict(pixels0)
        shutil.copytree(src, root)
        names, templates = ['blue', 'green', 'red'], list(T.DEFAULT_TEMPLATES)
        for e in edits:
            n_, t_ = edit_folder(root, pixels, e, where, bit)
            names, templates = n_ or names, t_ or templates
        name = 'fuzz_folder'
        ok, loader = outcome('register_folder_task', lambda: T.register_folder_task(name, root, overwrite=True, test_frac=frac,
                                                                                     seed=seed, size=size, progress=False))
        try:
            if not ok: return
            broken = set(edits) - ({'empty_class'} if 'split_dirs' in edits else set())   # train/ and test/ alone are read
            assert not {'empty_class', 'names_count', 'names_latin1', 'names_twice', 'templates_no_slot', 'templates_latin1',
                        'templates_empty'} & broken, f'{edits}: a broken folder was taken'
            assert frac > 0 or 'split_dirs' in edits
            ok_tr, tr = outcome('load_task', lambda: world.load_task(name, 'train'))
            ok_te, te = outcome('load_task', lambda: world.load_task(name, 'test'))
            if not (ok_tr and ok_te): return           # a damaged file or mixed sizes: named when it is decoded
            assert tr.classnames == names and tr.templates == templates and tr.images.shape[1:] == (3,) + ((size,) * 2 if size else (6, 6))
            want = Counter((bytes(T.as_uint8_images(torch.from_numpy(a).permute(2, 0, 1)[None], size)[0].numpy().tobytes()),
                            ['blue', 'green', 'red'].index(Path(rel).parts[-2])) for rel, a in pixels.items())
            assert pixel_pairs(tr, te) == want, f'{edits}: images lost, added, changed or relabelled'
            again = T.folder_task(name, root, test_frac=frac, seed=seed, size=size, progress=False)
            assert torch.equal(again('test').images, te.images), 'the split is not a function of the seed'
        finally:
            if name in world.USER_TASKS: world.unregister_task(name)


class ListDataset:
    "A torchvision-style dataset: (image, label) items, `classes`, and `targets` when given."
    def __init__(self, items, classes=None, targets=None):
        self.items = items
        if classes is not None: self.classes = classes
        if targets is not None: self.targets = targets
    def __len__(self): return len(self.items)
    def __getitem__(self, i): return self.items[i]

@fast(40)
@given(n=st.integers(0, 10), k=st.integers(1, 3), kind=st.sampled_from(['int'] * 3 + ['tensor', 'numpy', 'frac', 'neg', 'high', 'str', 'nan']),
       form=st.sampled_from(['pil', 'hwc', 'chw', 'float', 'tensor']), classes=st.sampled_from(['attr', 'arg', 'attr', 'arg', 'none', 'string']),
       targets=st.booleans(), with_test=st.booleans(), limit=st.sampled_from([None, None, 2, 0, 'x']))
@counted
def test_dataset_task(n, k, kind, form, classes, targets, with_test, limit):
    from PIL import Image
    rng = np.random.default_rng(n * 10 + k)
    ys = [i % k for i in range(n)]
    if n and kind != 'int': ys[0] = dict(tensor=torch.tensor(ys[0]), numpy=np.int64(ys[0]), frac=0.5, neg=-1, high=k, str='a',
                                          nan=float('nan'))[kind]
    def item(i):
        a = rng.integers(0, 256, (5, 5, 3), dtype=np.uint8)
        x = dict(pil=lambda: Image.fromarray(a), hwc=lambda: a, chw=lambda: a.transpose(2, 0, 1), float=lambda: a / 255.0,
                 tensor=lambda: torch.from_numpy(a).permute(2, 0, 1))[form]()
        return x, ys[i]
    items, names = [item(i) for i in range(n)], ['c0', 'c1', 'c2'][:k]
    ds = ListDataset(items, names if classes == 'attr' else None, ys if targets else None)
    test = ListDataset([item(i) for i in range(n)], names if classes == 'attr' else None) if with_test else None
    cn = names if classes == 'arg' else 'c0c1' if classes == 'string' else None
    name = 'fuzz_dataset'
    ok, loader = outcome('register_dataset_task', lambda: T.register_dataset_task(name, ds, test, classnames=cn, overwrite=True, limit=limit))
    try:
        if not ok: return
        assert kind in ('int', 'tensor', 'numpy') and classes in ('attr', 'arg')
        tr, te = world.load_task(name, 'train'), world.load_task(name, 'test')
        assert tr.classnames == names and tr.images.dtype == torch.uint8 and tr.images.shape[1:] == (3, 5, 5)
        for d in (tr, te): assert len(d) and 0 <= int(d.labels.min()) and int(d.labels.max()) < k
        if limit is None and not with_test: assert len(tr) + len(te) == n
        if limit is not None: assert len(tr) <= limit and len(te) <= limit
    finally:
        if name in world.USER_TASKS: world.unregister_task(name)


@pytest.fixture(scope='module')
def tiny_task():
    "A registered task of 8 images (4 px), for loading it by name."
    y = torch.arange(8) % 2
    T.register_tensor_task('fuzz_tiny', torch.randint(0, 256, (8, 3, 4, 4), generator=torch.Generator().manual_seed(0),
                                                       dtype=torch.uint8), y, ['a', 'b'], overwrite=True)
    yield 'fuzz_tiny'
    world.unregister_task('fuzz_tiny')

TASK_NAME = st.one_of(st.sampled_from(world.list_tasks()[:2] + ['fuzz_tiny', 'FUZZ_TINY', ' fuzz_tiny', '', 'x/y', 'nope', None, 3,
                                                               ['fuzz_tiny'], {'a': 1}, ('fuzz_tiny',)]),
                      st.sampled_from(world.list_tasks()).map(str.upper), st.text(max_size=4))

@fast(80)
@given(name=TASK_NAME, split=st.sampled_from(['train', 'test', 'TRAIN', 'val', '', None, ['train'], 0]), n=N_ASKED)
@counted
def test_load_task(tiny_task, name, split, n):
    if name in world.list_tasks() and (n is None or n == 10 ** 9): n = 4       # the world renders what it is asked: keep it small
    ok, d = outcome('load_task', lambda: world.load_task(name, split, n))
    if not ok:
        assert isinstance(d, (KeyError, TypeError, ValueError))
        return
    assert isinstance(name, str) and (name in world.list_tasks() or name == tiny_task) and split in world.SPLITS
    assert d.name == name and d.split == split and d.images.dtype == torch.uint8 and d.images.ndim == 4
    assert len(d) == len(d.images) and 0 <= int(d.labels.min()) and int(d.labels.max()) < len(d.classnames)
    if n is not None: assert len(d) == min(int(n), 6 if name == tiny_task and split == 'train' else 2 if name == tiny_task else n)
    again = world.load_task(name, split, n)
    assert torch.equal(again.images, d.images) and torch.equal(again.labels, d.labels), 'load_task is not deterministic'


# --- grids --------------------------------------------------------------------------------------------------------
@fast(60)
@given(source=st.sampled_from(['world', 'world', 'tiny', 'name_tiny', 'test_split', 'object']), size=st.sampled_from([1, 5, 12]),
       n_probes=st.integers(1, 12), seed=st.integers(0, 2 ** 63 - 1), templates=st.sampled_from([None, ['a {} thing', 'the {}']]),
       spoil=st.sampled_from([None] * 4 + ['n_probes', 'seed', 'templates']), bad_seed=ANY_NUMBER, bad_templates=TEMPLATES,
       bad_n=st.sampled_from([0, -1, 13, 2.0, True, None, 'x', np.int64(3), float('nan'), 10 ** 6]))
@counted
def test_make_grid(tiny_task, source, size, n_probes, seed, templates, spoil, bad_seed, bad_templates, bad_n):
    seed, templates = bad_seed if spoil == 'seed' else seed, bad_templates if spoil == 'templates' else templates
    n_probes = bad_n if spoil == 'n_probes' else n_probes
    task = world.list_tasks()[-1]
    data = dict(world=lambda: world.load_task(task, 'train', size), tiny=lambda: world.load_task(tiny_task, 'train'),
                test_split=lambda: world.load_task(task, 'test', size), name_tiny=lambda: tiny_task, object=lambda: object())[source]()
    ok, grid = outcome('make_grid', lambda: make_grid(data, n_probes, seed=seed, templates=templates, context=None))
    if not ok: return
    d = world.load_task(tiny_task, 'train') if source in ('tiny', 'name_tiny') else data
    assert source in ('world', 'tiny', 'name_tiny') and isinstance(n_probes, int) and 1 <= n_probes <= len(d)
    idx = grid.probe_index
    assert grid.N == n_probes and len(set(idx.tolist())) == n_probes and int(idx.max()) < len(d) and int(idx.min()) >= 0
    assert torch.equal(grid.images, d.images[idx]) and grid.classnames == d.classnames and grid.M == len(d.classnames)
    tp = templates or d.templates
    assert grid.prompts == [[t.replace('{}', str(c)) for t in tp] for c in d.classnames]
    assert make_grid(data, n_probes, seed=seed, templates=templates, context=None).grid_hash == grid.grid_hash, 'the grid is not a function of the seed'

# --- the count ----------------------------------------------------------------------------------------------------
def test_zz_inputs_tried():
    "Runs last in this file: every property ran, and at least 2,000 inputs were tried in all."
    total = sum(COUNTS.values())
    print(f'\nhypothesis: {sum(EXAMPLES.values())} inputs generated, {total} calls tried over {len(COUNTS)} functions and loaders')
    wanted = {'check_number', 'solve_operator', 'Descriptor.load', 'OperatorBank.load', 'load_adapter',
              'Scorer.score_theta', 'certificate', 'EmbeddingCache', 'shared_component', 'fold_operator',
              'register_folder_task', 'register_tensor_task', 'load_task', 'make_grid', 'Sliders.update', 'zoo.stale_families'}
    if not wanted <= set(COUNTS): pytest.skip('part of the property suite was deselected')
    assert sum(EXAMPLES.values()) >= 2000 and total >= 2000, (EXAMPLES, COUNTS)
