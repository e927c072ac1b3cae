"""Operator banks (composition), the fast scorer and the certificate (scoring), consensus/null sources (descriptors),
sweeps and zoo helpers (analysis) and the sliders (widgets), on one tiny example."""
import json, math, os
import pytest, torch

torch.set_num_threads(1)

from platonic_ta import world
from platonic_ta.encoders import family_encoder
from platonic_ta.grids import make_grid
from platonic_ta.cache import EmbeddingCache
from platonic_ta.descriptors import Descriptor, GridMismatchError
from platonic_ta.factorization import GridFactors
from platonic_ta.composition import OperatorBank, BankError, TargetMismatchError
from platonic_ta.factorization import route_of
from platonic_ta.encoders import prompt_embeddings
from platonic_ta.scoring import Scorer, certificate, certify_edit, certificate_rows
from platonic_ta.descriptors import consensus_descriptor, shuffled_descriptor
from platonic_ta.analysis import addition_sweep, retention_rows, negation_sweep, multitask_scaling
from platonic_ta.widgets import make_sliders, rows_table

TASKS = ('colours', 'tallies', 'shapes')
SOURCES = ('rn_w16', 'timm_avg')


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    "Random-init targets (embedding and head route), three small grids and eval sets, synthetic descriptors."
    cache = EmbeddingCache(tmp_path_factory.mktemp('comp_cache'), progress=False)
    grids, evals = {}, {}
    for t in TASKS:
        grids[t] = make_grid(world.load_task(t, 'train', 64), 20, seed=0, n_context=4)
        evals[t] = world.load_task(t, 'test', 32)
    encs = {f: family_encoder(f) for f in ('vit_w96', 'siglip_map')}
    g = torch.Generator().manual_seed(0)
    descs = {}
    for s in SOURCES + ('own',):
        for t in TASKS:
            U = 0.3 * torch.randn(grids[t].N, grids[t].M, generator=g, dtype=torch.float64)
            descs[(s, t)] = (Descriptor.from_matrix(U, grids[t], dict(model=s, weights_hash='x'), dict(model=s, weights_hash='y'))
                             if s == 'rn_w16' else U)
    banks = {f: OperatorBank.build(e, grids, descs, cache=cache) for f, e in encs.items()}
    scorers = {f: Scorer(banks[f], evals, cache=cache) for f in encs}
    return dict(cache=cache, grids=grids, evals=evals, encs=encs, descs=descs, banks=banks, scorers=scorers)


class Counter:
    def __init__(self, enc):
        self.n = 0
        m = enc.model
        mods = [m.visual] + [x for x in (getattr(m, 'transformer', None), getattr(m, 'text', None)) if x is not None]
        self.hooks = [x.register_forward_pre_hook(self.hit) for x in mods]
    def hit(self, *a): self.n += 1
    def remove(self): [h.remove() for h in self.hooks]


def test_routes_shapes_and_linearity(tiny):
    bv, bh = tiny['banks']['vit_w96'], tiny['banks']['siglip_map']
    assert (bv.route, bh.route) == ('embedding', 'head')
    assert route_of(tiny['encs']['siglip_map']) == 'head'
    ll = tiny['encs']['siglip_map'].last_layer()
    assert bh.shape == (ll.d, ll.k + 1) and bv.shape == (96, 96)
    assert len(bv) == 9 and set(bv.tasks) == set(TASKS) and bv.sources == list(SOURCES) + ['own']
    for b in (bv, bh):
        k1, k2 = ('rn_w16', 'colours'), ('own', 'colours')
        h = b.grid_of(k1)
        rf, rt = b.ridges[h]
        gf = b._factors[h]
        U = tiny['descs'][k1].U - 0.7 * tiny['descs'][k2]
        want = gf.solve(U, rf, rt)
        got = b.combine({k1: 1.0, k2: -0.7})
        assert got.dtype == torch.float64
        assert ((got - want).norm() / want.norm()).item() < 1e-12
        assert b.combine({}).abs().max().item() == 0


def test_bank_bad_input(tiny):
    b = tiny['banks']['vit_w96']
    with pytest.raises(KeyError, match='available keys'): b.combine({('nobody', 'colours'): 1.0})
    with pytest.raises(ValueError, match='finite number'): b.combine({('own', 'colours'): float('nan')})
    with pytest.raises(ValueError, match='finite number'): b.combine({('own', 'colours'): float('inf')})
    with pytest.raises(BankError, match='not in this bank'): b.combine({('own', 'colours', '0' * 16): 1.0})
    with pytest.raises(BankError, match='solved on grid'): b.combine({('own', 'colours', b.grid_of(('own', 'shapes'))): 1.0})
    assert torch.equal(b.combine({('own', 'colours', b.grid_of(('own', 'colours'))): 1.0}), b[('own', 'colours')])
    with pytest.raises(TargetMismatchError, match='build a bank for that target'):
        b.combine({('own', 'colours'): 1.0}, target=tiny['encs']['siglip_map'])
    with pytest.raises(TypeError, match='must be a dict'): b.combine([(('own', 'colours'), 1.0)])
    with pytest.raises(TypeError, match='pair of non-empty strings'):
        OperatorBank.build(tiny['encs']['vit_w96'], tiny['grids'], {'own': tiny['descs'][('own', 'colours')]})
    with pytest.raises(GridMismatchError, match='not among the grids'):
        OperatorBank.build(tiny['encs']['vit_w96'], [tiny['grids']['shapes']], {('a', 'b'): tiny['descs'][('rn_w16', 'colours')]})
    with pytest.raises(ValueError, match='shape'):
        OperatorBank.build(tiny['encs']['vit_w96'], tiny['grids'], {('a', 'colours'): torch.zeros(3, 3)})
    with pytest.raises(ValueError, match='residual head'):
        OperatorBank.build(tiny['encs']['siglip_map'], tiny['grids'], {('a', 'colours'): tiny['descs'][('own', 'colours')]},
                           route='embedding')
    with pytest.raises(ValueError, match='no entry for grid'):
        OperatorBank.build(tiny['encs']['vit_w96'], tiny['grids'], {('a', 'colours'): tiny['descs'][('own', 'colours')]},
                           ridges={'shapes': (1e-2, 1e-2)})
    with pytest.raises(KeyError, match='already in the bank'): b.add({('own', 'colours'): tiny['descs'][('own', 'colours')]})


def test_given_ridges_and_add(tiny):
    enc, grids, descs = tiny['encs']['vit_w96'], tiny['grids'], tiny['descs']
    b = OperatorBank.build(enc, grids, {('own', 'colours'): descs[('own', 'colours')]}, ridges=(1e-3, 1e-1), cache=tiny['cache'])
    h = b.grid_of(('own', 'colours'))
    assert b.ridges[h] == (1e-3, 1e-1) and b.grids[h]['ridges'] == 'given'
    b.add({('null', 'colours'): shuffled_descriptor(descs[('own', 'colours')], 1)})      # same grid: same ridges
    with pytest.raises(ValueError, match='already has ridges'):
        b.add({('x', 'colours'): descs[('own', 'colours')]}, ridges=(1e-2, 1e-2))
    b.add({('x', 'colours'): descs[('own', 'colours')]}, ridges={'colours': (1e-3, 1e-1)})
    assert b.ridges[h] == (1e-3, 1e-1)
    U = shuffled_descriptor(descs[('own', 'colours')], 1)
    assert torch.allclose(b[('null', 'colours')], GridFactors(*_features(b, grids['colours'], tiny['cache']), b.center).solve(U, 1e-3, 1e-1),
                          rtol=1e-9, atol=1e-12)


def _features(bank, grid, cache):
    from platonic_ta.factorization import grid_features
    return grid_features(bank.target, grid, bank.route, cache, torch.float64)


def test_save_load(tiny, tmp_path):
    b = tiny['banks']['siglip_map']
    js = b.save(tmp_path / 'bank')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['bank.json', 'bank.safetensors']   # no temp files left
    man = json.loads(js.read_text())
    assert man['target']['weights_hash'] == tiny['encs']['siglip_map'].weights_hash()
    assert set(man['grids']) == {g.grid_hash for g in tiny['grids'].values()} and man['route'] == 'head'
    b2 = OperatorBank.load(tmp_path / 'bank.json', target=tiny['encs']['siglip_map'])
    assert b2.keys() == b.keys() and all(torch.equal(b2[k], b[k]) for k in b.keys()) and b2.ridges == b.ridges
    coeffs = {('rn_w16', 'colours'): 0.5, ('own', 'tallies'): -1.0}
    assert torch.equal(b2.combine(coeffs), b.combine(coeffs))
    with pytest.raises(TargetMismatchError, match='was built for target'):
        OperatorBank.load(tmp_path / 'bank', target=tiny['encs']['vit_w96'])
    with pytest.raises(FileNotFoundError, match='no operator bank'): OperatorBank.load(tmp_path / 'other')
    b3 = OperatorBank.load(tmp_path / 'bank')
    with pytest.raises(BankError, match='pass target='): b3.apply(coeffs)
    with pytest.raises(BankError, match='no factors in memory'):
        b3.add({('new', 'colours'): tiny['descs'][('own', 'colours')]})
    b3.target = tiny['encs']['siglip_map']
    b3.add({('new', 'colours'): tiny['descs'][('own', 'colours')]}, grids=tiny['grids'], cache=tiny['cache'])
    assert torch.allclose(b3[('new', 'colours')], b[('own', 'colours')], rtol=1e-9, atol=1e-12)   # kept ridges
    # damaged / mismatched files
    other = tiny['banks']['vit_w96'].save(tmp_path / 'vit')
    os.replace(tmp_path / 'vit.safetensors', tmp_path / 'bank.safetensors')
    with pytest.raises(BankError, match='sha256'): OperatorBank.load(tmp_path / 'bank')
    with pytest.raises(FileNotFoundError, match='incomplete'): OperatorBank.load(other)
    with pytest.raises(FileExistsError, match='overwrite=True'): tiny['banks']['vit_w96'].save(tmp_path / 'vit')
    other = tiny['banks']['vit_w96'].save(tmp_path / 'vit', overwrite=True)
    other.write_text('{not json')
    with pytest.raises(BankError, match='not valid JSON'): OperatorBank.load(other)


@pytest.mark.parametrize('fam', ['vit_w96', 'siglip_map'])
def test_scorer_matches_folded_without_forward(tiny, fam):
    bank, sc, enc = tiny['banks'][fam], tiny['scorers'][fam], tiny['encs'][fam]
    coeffs = {('rn_w16', 'colours'): 2.0, ('timm_avg', 'tallies'): 2.0, ('own', 'shapes'): -3.0}
    c = Counter(enc)
    try:
        fast = sc.score(coeffs)
        preds = sc.predict(coeffs)
        for a in (0.5, 1.0, 4.0): sc.score({('own', 'colours'): a})
    finally: c.remove()
    assert c.n == 0
    folded = bank.apply(coeffs)
    assert folded.weights_hash() != enc.weights_hash() and 'edit[' in folded.name
    n_changed = 0
    for t, es in tiny['evals'].items():
        logits = folded.encode_image(es.images).double() @ sc.sets[t]['T'].T
        top2 = logits.topk(2, dim=1).values
        sure = (top2[:, 0] - top2[:, 1]) > 1e-5 * logits.abs().max()
        assert torch.equal(logits.argmax(1)[sure], preds[t][sure])
        if sure.all(): assert fast[t] == (logits.argmax(1) == es.labels).double().mean().item()
        n_changed += int((preds[t] != sc.predict({})[t]).sum())
    assert n_changed > 0                      # the edit is big enough to move predictions
    assert sc.base == sc.score({})


def test_scorer_cache_and_target_checks(tiny):
    bank = tiny['banks']['vit_w96']
    with pytest.raises(TargetMismatchError): Scorer(bank, tiny['evals'], target=tiny['encs']['siglip_map'])
    misses = tiny['cache'].misses
    sc = Scorer(bank, tiny['evals'], cache=tiny['cache'])
    assert tiny['cache'].misses == misses
    sc2 = Scorer(bank, {t: (e.images, e.labels, e.prompts()) for t, e in tiny['evals'].items()})   # no cache
    assert sc2.base == sc.base
    T = prompt_embeddings(tiny['encs']['vit_w96'], tiny['evals']['colours'].prompts())
    assert torch.allclose(T.float(), sc.sets['colours']['T'].float(), atol=1e-5)
    with pytest.raises(TypeError, match='eval set'): Scorer(bank, {'colours': 3})
    with pytest.raises(KeyError, match='no evaluation set'): sc.embeddings(bank.combine({}), 'nowhere')


def test_bank_without_cache_is_the_bank_with_one(tiny):
    "The same class embeddings and features with or without a cache, so the same operators."
    enc = tiny['encs']['vit_w96']
    keys = [('rn_w16', t) for t in TASKS]
    bare = OperatorBank.build(enc, tiny['grids'], {k: tiny['descs'][k] for k in keys})
    cached = OperatorBank.build(enc, tiny['grids'], {k: tiny['descs'][k] for k in keys}, cache=tiny['cache'])
    for k in keys:
        assert torch.equal(bare.combine({k: 1.0}), cached.combine({k: 1.0})), k


def test_consensus_and_null():
    g = torch.Generator().manual_seed(1)
    Us = [s * torch.randn(7, 5, generator=g, dtype=torch.float64) for s in (0.5, 1.0, 3.0)]
    c = consensus_descriptor(Us)
    norms = torch.stack([U.norm() for U in Us])
    assert abs(c.norm().item() - norms.mean().item()) < 1e-12
    direction = sum(U / U.norm() for U in Us)
    assert abs(torch.nn.functional.cosine_similarity(c.flatten(), direction.flatten(), dim=0).item() - 1) < 1e-12
    assert c.dtype == torch.float64
    with pytest.raises(ValueError, match='at least one'): consensus_descriptor([])
    with pytest.raises(ValueError, match='all zeros'): consensus_descriptor([Us[0], 0 * Us[1]])
    sh = shuffled_descriptor(Us[0], seed=3)
    assert torch.equal(sh, shuffled_descriptor(Us[0], seed=3)) and not torch.equal(sh, Us[0])
    assert torch.equal(sh.sort(dim=0).values, Us[0].sort(dim=0).values)          # each column: same values
    assert sorted(map(tuple, sh.tolist())) == sorted(map(tuple, Us[0].tolist()))  # rows permuted, not mixed


def test_consensus_descriptor_objects(tiny):
    gr = tiny['grids']['colours']
    ds = [Descriptor.from_matrix(torch.randn(gr.N, gr.M, dtype=torch.float64), gr, dict(model=f'm{i}'), dict(model='b'))
          for i in range(3)]
    c = consensus_descriptor(ds)
    assert isinstance(c, Descriptor) and c.grid_hash == gr.grid_hash and c.source['model'] == 'consensus'
    assert [m['model'] for m in c.source['members']] == ['m0', 'm1', 'm2']
    gs = tiny['grids']['shapes']
    with pytest.raises(GridMismatchError, match='different grids'):
        consensus_descriptor([ds[0], Descriptor.from_matrix(torch.randn(gs.N, gs.M), gs, dict(model='x'), dict(model='b'))])
    b = OperatorBank.build(tiny['encs']['vit_w96'], tiny['grids'], {('consensus', 'colours'): c}, cache=tiny['cache'])
    assert b.keys() == [('consensus', 'colours')]
    null = shuffled_descriptor(ds[0], seed=2)
    assert isinstance(null, Descriptor) and null.source['null'] == 'rows shuffled' and null.grid_hash == gr.grid_hash


def test_certificate_property():
    "Over many random records and interference sizes: no certified prediction changes; the bound covers the loss."
    g = torch.Generator().manual_seed(7)
    total = certified = 0
    for rep in range(200):
        d, M, n = int(torch.randint(2, 20, (1,), generator=g)), int(torch.randint(2, 15, (1,), generator=g)), 40
        T = torch.randn(M, d, generator=g, dtype=torch.float64)
        z = torch.randn(n, d, generator=g, dtype=torch.float64) * 10 ** (2 * torch.rand(1, generator=g).item() - 1)
        scale = 10 ** (-3 + 3.5 * torch.rand(1, generator=g).item())
        E = scale * z.norm(dim=1, keepdim=True) * torch.randn(n, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        mask = certificate(z.float() if rep % 3 == 0 else z, E, T / T.norm(dim=1, keepdim=True))
        Th = T / T.norm(dim=1, keepdim=True)
        zz = z.float().double() if rep % 3 == 0 else z
        p0, p1 = (zz @ Th.T).argmax(1), ((zz + E) @ Th.T).argmax(1)
        assert not (mask & (p0 != p1)).any()
        y = torch.randint(0, M, (n,), generator=g)
        bound = ((p0 == y) & ~mask).double().mean()
        assert (p0 == y).double().mean() - (p1 == y).double().mean() <= bound + 1e-12
        total += n; certified += int(mask.sum())
    assert 0.1 < certified / total < 0.9                 # the check reached both sides of the boundary
    z = torch.randn(4, 3, dtype=torch.float64)
    assert certificate(z, torch.zeros_like(z), torch.randn(1, 3)).all()          # one class: nothing can change
    T2 = torch.randn(1, 3).repeat(2, 1)                                          # two identical classes: a tie
    assert not certificate(z, torch.zeros_like(z), T2).any()
    with pytest.raises(ValueError, match='one shape'): certificate(z, z[:, :2], torch.randn(2, 3))
    with pytest.raises(ValueError, match='NaN'): certificate(z * float('nan'), z, torch.randn(2, 3))


@pytest.mark.parametrize('fam', ['vit_w96', 'siglip_map'])
def test_certify_edit_on_the_bank(tiny, fam):
    sc = tiny['scorers'][fam]
    coeffs = {('rn_w16', 'colours'): 1.0, ('timm_avg', 'tallies'): 3.0, ('own', 'shapes'): 3.0}
    for t in TASKS:
        r = certify_edit(sc, coeffs, t)
        assert r['certified_changed'] == 0
        assert r['observed_loss'] <= r['bound'] + 1e-12
        own = {k: c for k, c in coeffs.items() if k[1] == t}
        assert r['acc_ref'] == sc.score(own)[t] and r['acc_full'] == sc.score(coeffs)[t]
    rows = certificate_rows(sc, coeffs)
    assert [r['task'] for r in rows] == ['colours', 'tallies', 'shapes', 'all']
    assert rows[-1]['n'] == sum(r['n'] for r in rows[:-1]) and rows[-1]['certified_changed'] == 0
    assert sum(r['changed'] for r in rows[:-1]) > 0        # some records did change: the check is not vacuous


def test_term_deltas_are_reused_and_never_stale(tiny):
    sc = tiny['scorers']['vit_w96']
    k = ('rn_w16', 'colours')
    d = sc.term_delta(k, 'tallies')
    assert torch.equal(d, sc.delta(sc.bank[k], 'tallies')) and sc.term_delta(k, 'tallies') is d    # kept, not recomputed
    op = sc.bank[k]
    saved = op.clone()
    try:
        op.mul_(2.0)                                   # an operator changed in place is multiplied again, never served stale
        assert torch.allclose(sc.term_delta(k, 'tallies'), 2 * d)
    finally:
        op.copy_(saved)
    assert torch.allclose(sc.term_delta(k, 'tallies'), d)
    assert sc._memo_bytes == sum(v[2].nbytes for v in sc._memo.values())       # a replaced entry is counted once
    old = sc.memo_mb
    try:
        sc.memo_mb = 1e-9                              # the bound holds: only the latest delta stays
        for t in TASKS: sc.term_delta(k, t)
        assert len(sc._memo) == 1
        assert sc._memo_bytes == sum(v[2].nbytes for v in sc._memo.values())   # the running size is the true size
    finally:
        sc.memo_mb = old
    coeffs = {('rn_w16', 'colours'): 0.5, ('timm_avg', 'tallies'): 0.5}
    for t in ('colours', 'tallies'):
        r = certify_edit(sc, coeffs, t)                # the sum of kept deltas is the combined operator's delta
        assert r['acc_full'] == sc.score(coeffs)[t] and r['certified_changed'] == 0


def test_sweeps(tiny):
    sc = tiny['scorers']['vit_w96']
    rows = addition_sweep(sc, [('colours', 'tallies')], ['own', 'rn_w16', 'timm_avg'], alphas=(0.5, 1.0))
    assert len(rows) == 6 and {r['source'] for r in rows} == {'own', 'rn_w16', 'timm_avg'}
    r0 = rows[0]
    acc = sc.score({('own', 'colours'): 0.5, ('own', 'tallies'): 0.5})
    assert r0['gain_a'] == acc['colours'] - sc.base['colours'] and r0['control_gain'] == acc['shapes'] - sc.base['shapes']
    ret = retention_rows(rows, 'own')
    assert len(ret) == 4 and all(set(r) >= {'retention_a', 'retention_b', 'both_gain'} for r in ret)
    with pytest.raises(ValueError, match='own source'): retention_rows(rows, 'nobody')
    neg = negation_sweep(sc, 'colours', 'own')
    assert [r['lam'] for r in neg] == [0, 0.25, 0.5, 1, 2, 4] and neg[0]['drop_removed'] == 0
    assert neg[3]['acc_removed'] == sc.score({('own', 'colours'): -1.0})['colours']
    mts = multitask_scaling(sc, list(TASKS), 'rn_w16', alpha=0.6)
    assert [(r['scheme'], r['J']) for r in mts] == [(s, J) for s in ('fixed', 'scaled') for J in (1, 2, 3)]
    assert abs(mts[-1]['alpha'] - 0.2) < 1e-15 and mts[2]['alpha'] == 0.6
    assert '| scheme | J |' in rows_table(mts)
    with pytest.raises(KeyError, match='available keys'): negation_sweep(sc, 'colours', 'nobody')


def test_sliders_headless(tiny):
    bank, sc = tiny['banks']['vit_w96'], tiny['scorers']['vit_w96']
    sl = make_sliders(bank, sc, ['own', 'rn_w16'], tasks=['colours', 'tallies'], negate=['shapes'],
                      targets={'siglip_map': tiny['scorers']['siglip_map']})
    st = sl.initial_state()
    assert st == dict(target=bank.target_id['name'], source='own', alphas={'colours': 0.5, 'tallies': 0.5},
                      negate='shapes', lam=0.0)
    rows, bars = sl.update(st)
    assert [r['role'] for r in rows] == ['composed', 'composed', 'control']
    assert bars['edited'] == [sc.score({('own', 'colours'): 0.5, ('own', 'tallies'): 0.5})[t] for t in sc.tasks]
    rows, _ = sl.update({**st, 'lam': 2.0, 'source': 'rn_w16', 'target': 'siglip_map'})
    assert rows[2]['role'] == 'negated'
    assert rows[2]['edited'] == tiny['scorers']['siglip_map'].score(
        {('rn_w16', 'colours'): 0.5, ('rn_w16', 'tallies'): 0.5, ('rn_w16', 'shapes'): -2.0})['shapes']
    assert sl.time_update(st, repeat=3) < 1000
    # the widget: a slider move calls the same update and redraws
    assert sl.refresh() == sl.update(st)
    sl._w['lam'].value = 1.0
    assert sl.state()['lam'] == 1.0 and 'ms' in sl._w['info'].value and '<table>' in sl._w['chart'].value
    sl._w['source'].value = 'rn_w16'
    assert 'rn_w16' in sl._w['info'].value
    with pytest.raises(ValueError, match='not made from this bank'):
        make_sliders(tiny['banks']['siglip_map'], sc, ['own'])


def test_sliders_hold_no_output_widget(tiny):
    "The widget tree holds no ipywidgets.Output: capturing display output into one can leave papermill waiting forever."
    import ipywidgets as W
    bank, sc = tiny['banks']['vit_w96'], tiny['scorers']['vit_w96']
    for chart in ('html', 'matplotlib'):
        sl = make_sliders(bank, sc, ['own'], tasks=['colours', 'tallies'], chart=chart)
        sl.refresh()
        todo, seen = [sl.widget], []
        while todo:
            w = todo.pop(); seen.append(w); todo += list(getattr(w, 'children', ()))
        assert not [w for w in seen if isinstance(w, W.Output)], chart
        if chart == 'matplotlib': assert sl._w['image'].value[:4] == b'\x89PNG'


# --- zoo helpers -------------------------------------------------------------------------------------------------
from platonic_ta.factorization import floored_ridge_grid, SolveConfig
from platonic_ta.analysis import (cell_rows, median_retention)
from platonic_ta.zoo_banks import source_key, null_key, zoo_seeds_present, heldout_split, zoo_bank
from platonic_ta.baselines import weight_space_sum


def test_names_and_floored_grid():
    assert source_key('vit_w96') == 'vit_w96' and source_key('vit_w96', 1) == 'vit_w96@s1' and null_key('a') == 'null:a'
    for bad in ('', 'null:x', 'a@s1'):
        with pytest.raises(ValueError, match='zoo family'): source_key(bad)
    g = floored_ridge_grid(0.0)
    assert len(g) == 17 and g[0] == 1e-8 and abs(g[-1] - 1) < 1e-12
    for fl in (1e-4, 3e-3, 1e-1, 1.0):
        g = floored_ridge_grid(fl)
        assert g[0] == fl and min(g) == fl and abs(max(g) - 1) < 1e-12 and list(g) == sorted(g)
    with pytest.raises(ValueError, match='ridge floor=nan is not a finite number'): floored_ridge_grid(float('nan'))
    with pytest.raises(ValueError, match='ridge floor=2.0 is out of range'): floored_ridge_grid(2.0)


def test_heldout_split_is_disjoint_from_probes():
    from platonic_ta.grids import image_hashes
    gr = make_grid('colours', 100, seed=3, context=None)
    ho = heldout_split('colours', gr)
    assert len(ho.labels) == 2000 - 100 and ho.split == 'train-heldout'
    assert not set(image_hashes(ho.images)) & set(gr.probe_hashes)
    assert len(heldout_split('colours', gr, 10).labels) == 10
    assert len(heldout_split('shapes', None, 5).labels) == 5
    with pytest.raises(ValueError, match='given to exclude'): heldout_split('shapes', gr)


def test_zoo_seeds_present(tmp_path):
    from platonic_ta.zoo import Zoo, ft_path
    Z = Zoo(tmp_path, ['a', 'b'], ['t1', 't2'])
    def touch(f, t, s):
        p = ft_path(tmp_path, f, t, s).with_suffix('.json'); p.parent.mkdir(parents=True, exist_ok=True); p.write_text('{}')
    with pytest.raises(FileNotFoundError, match='seed-0'): zoo_seeds_present(Z)
    for f in Z.families:
        for t in Z.tasks: touch(f, t, 0); touch(f, t, 2)
    touch('a', 't1', 1)                                        # seed 1 exists for one cell only: not usable
    assert zoo_seeds_present(Z, (2, 1, 0)) == [0, 2] and zoo_seeds_present(Z, (0,)) == [0]


def test_zoo_bank_sources_ridges_and_errors(tiny):
    enc, grids, descs = tiny['encs']['vit_w96'], tiny['grids'], tiny['descs']
    fams = ['own', 'rn_w16', 'timm_avg']
    D = {(f, t, s): (descs[(f, t)].U if isinstance(descs[(f, t)], Descriptor) else descs[(f, t)]) * (1 + 0.1 * s)
         for f in fams for t in TASKS for s in (0, 1)}
    b = zoo_bank(enc, 'own', grids, D, fams, seeds=(0, 1), cache=tiny['cache'])
    want = (set(fams) | {f'{f}@s1' for f in fams} | {'consensus'} | {f'null:{x}' for x in fams + ['consensus']}
            | {f'null:{f}@s1' for f in fams})                  # every seed has its own null
    assert set(b.sources) == want and set(b.tasks) == set(TASKS)
    ref = OperatorBank.build(enc, grids, {(f, t): D[(f, t, 0)] for f in fams for t in TASKS}, cache=tiny['cache'])
    assert b.ridges == ref.ridges                             # ridges chosen on the seed-0 descriptors only
    assert torch.allclose(b[('rn_w16@s1', 'colours')], 1.1 * b[('rn_w16', 'colours')], rtol=1e-9, atol=1e-12)
    cons = consensus_descriptor([D[('rn_w16', 'colours', 0)], D[('timm_avg', 'colours', 0)]])
    h = b.grid_of(('consensus', 'colours'))
    assert torch.allclose(b[('consensus', 'colours')], b._factors[h].solve(cons, *b.ridges[h]), rtol=1e-9, atol=1e-12)
    null_s1 = shuffled_descriptor(D[('rn_w16', 'colours', 1)], 0)   # the seed's own descriptor, same permutation
    assert torch.allclose(b[('null:rn_w16@s1', 'colours')], b._factors[h].solve(null_s1, *b.ridges[h]), rtol=1e-9, atol=1e-12)
    assert not torch.allclose(b[('null:rn_w16@s1', 'colours')], b[('null:rn_w16', 'colours')])
    b2 = zoo_bank(enc, 'own', grids, D, fams, consensus=False, nulls=False, solve=SolveConfig(floor_f=1e-2, floor_t=1e-2),
                  cache=tiny['cache'])
    assert set(b2.sources) == set(fams) and all(r >= 1e-2 for v in b2.ridges.values() for r in v)
    with pytest.raises(KeyError, match='no descriptor for'): zoo_bank(enc, 'own', grids, D, fams, seeds=(0, 2))
    with pytest.raises(ValueError, match='seed 0 comes first'): zoo_bank(enc, 'own', grids, D, fams, seeds=(1, 0))
    with pytest.raises(ValueError, match='not among the families'): zoo_bank(enc, 'nobody', grids, D, fams)


def test_weight_space_sum():
    import copy
    base = family_encoder('vit_w96')
    fts = []
    for i in range(2):
        ft = copy.deepcopy(base)
        with torch.no_grad():
            for p in ft.model.visual.parameters(): p.add_(0.01 * (i + 1) * torch.randn_like(p))
        fts.append(ft)
    x = world.load_task('colours', 'test', 6).images
    assert torch.allclose(weight_space_sum(base, fts, 0.0).encode_image(x), base.encode_image(x), atol=1e-6)
    assert torch.allclose(weight_space_sum(base, fts[:1], 1.0).encode_image(x), fts[0].encode_image(x), atol=1e-4)
    ws = weight_space_sum(base, fts, [0.5, -1.0])
    k = next(n for n, _ in base.model.visual.named_parameters())
    sd, s0, s1, s2 = (m.model.state_dict() for m in (ws, base, *fts))
    key = 'visual.' + k
    assert torch.allclose(sd[key], s0[key] + 0.5 * (s1[key] - s0[key]) - (s2[key] - s0[key]), atol=1e-6)
    assert base.weights_hash() != ws.weights_hash() and '+ws[' in ws.name
    with pytest.raises(ValueError, match='coefficients'): weight_space_sum(base, fts, [1.0])
    with pytest.raises(ValueError, match='not a fine-tune of this base'): weight_space_sum(base, [family_encoder('rn_w16')])


def test_cell_rows_and_median_retention():
    rows = [dict(source=s, task_a='a', task_b='b', alpha=al, gain_a=ga, gain_b=gb, control_gain=cg)
            for al in (0.5, 1.0)
            for s, ga, gb, cg in [('own', 0.2, 0.1, 0.0), ('x', 0.1, 0.05, -0.01), ('x@s1', 0.3, 0.15, -0.03),
                                  ('null:x', 0.35, 0.0, 0.0), ('y', 0.1, -0.1, 0.0)]]
    cr = cell_rows(rows, 'own', ['x', 'y'], {'x': ['x@s1']})
    assert len(cr) == 4 and {(c['source'], c['alpha']) for c in cr} == {(s, a) for s in 'xy' for a in (0.5, 1.0)}
    x = next(c for c in cr if c['source'] == 'x')
    assert abs(x['gain_a'] - 0.2) < 1e-12 and abs(x['retention_a'] - 1.0) < 1e-12 and abs(x['retention_b'] - 1.0) < 1e-12
    assert x['n_seeds'] == 2 and abs(x['control_gain'] + 0.02) < 1e-12 and x['both_gain'] and not x['beats_null']
    y = next(c for c in cr if c['source'] == 'y')
    assert not y['both_gain'] and y['beats_null'] is None and math.isnan(y['sd_a'])
    med, n = median_retention(cr)
    assert n == 8 and abs(med - 0.75) < 1e-12                     # values 1, 1, 0.5, -1 per α
    assert math.isnan(median_retention(cr, min_own_gain_frac=0.5)[0]) and median_retention(cr, min_own_gain_frac=0.5)[1] == 0
    with pytest.raises(ValueError, match='own source'): cell_rows(rows, 'nobody', ['x'])
    with pytest.raises(ValueError, match='seed sources'): cell_rows(rows, 'own', ['x'], {'x': ['x@s9']})


def test_sliders_alpha_per_task(tiny):
    bank, sc = tiny['banks']['vit_w96'], tiny['scorers']['vit_w96']
    sl = make_sliders(bank, sc, ['own'], tasks=['colours', 'tallies'], alpha={'tallies': 1.5}, widget=False)
    assert sl.initial_state()['alphas'] == {'colours': 0.0, 'tallies': 1.5}
    rows, _ = sl.update(sl.initial_state())
    assert [r['role'] for r in rows] == ['control', 'composed', 'control']
    with pytest.raises(KeyError, match='no slider'): make_sliders(bank, sc, ['own'], tasks=['colours'], alpha={'shapes': 1.0})


def test_statistics_and_the_heldout_solve_rule():
    from platonic_ta.analysis import own_edit_gain, heldout_solve, null_retention
    from platonic_ta.stats import by_tertile
    t = by_tertile(list(range(9)), [0, 0, 0, 1, 1, 1, 5, 5, 5], 'x')
    assert [r['median_retention'] for r in t] == [0, 1, 5] and [r['n'] for r in t] == [3, 3, 3]
    assert abs(own_edit_gain([dict(gain_a=0.3, gain_b=0.1, control_gain=-0.3)])['own_gain'] - 20.0) < 1e-9
    a, b = SolveConfig(max_move=0.5), SolveConfig(max_move=2.0)
    rows = [dict(solve=a, single_cost=1.0, pair_cost=0.5, negation_cost=0.2, pair_gain=4.0),
            dict(solve=b, single_cost=2.5, pair_cost=1.0, negation_cost=0.2, pair_gain=9.0)]
    assert heldout_solve(rows) == a and heldout_solve(rows, max_cost=3.0) == b
    cells = [dict(own_gain_a=0.2, own_gain_b=0.005, null_gain_a=0.1, null_gain_b=0.0)]
    assert null_retention(cells) == (0.5, 1)


def test_sliders_keep_their_chart_state(tiny):
    "The matplotlib chart is rebuilt only when the tasks change; which tasks it shows is kept on the sliders, not the figure."
    bank, sc = tiny['banks']['vit_w96'], tiny['scorers']['vit_w96']
    sl = make_sliders(bank, sc, ['own'], tasks=['colours'], widget=False, chart='matplotlib')
    rows, bars = sl.update(sl.initial_state())
    fig = sl._redraw_matplotlib(bars, 'a')
    assert sl._redraw_matplotlib(bars, 'b') is fig and sl._fig_tasks == bars['tasks']
    assert not any(k.startswith('_pta') for k in vars(fig))
    assert sl._redraw_matplotlib(dict(bars, tasks=bars['tasks'][::-1]), 'c') is not fig


def test_text_side_ridge_search_is_floored_apart(tiny):
    "floor_t bounds only the text filter's search; the probe side keeps its own grid, and a bigger text ridge shrinks Θ."
    enc, grids, descs, cache = tiny['encs']['vit_w96'], tiny['grids'], tiny['descs'], tiny['cache']
    floored = OperatorBank.build(enc, grids, descs, SolveConfig(max_move=None, center=False, floor_t=0.1), cache=cache)
    for h, g in floored.grids.items():
        assert g['ridge_t'] >= 0.1 and g['ridges'] == 'auto'
        assert min(floored.selections[h].grid_t) == 0.1 and min(floored.selections[h].grid_f) < 0.1
    k, h = ('rn_w16', 'colours'), grids['colours'].grid_hash
    below = OperatorBank.build(enc, grids, descs, SolveConfig(center=False), ridges={t: (floored.grids[grids[t].grid_hash]['ridge_f'], 1e-3)
                                                                                      for t in TASKS}, cache=cache)
    assert floored[k].norm() < below[k].norm()               # the same probe ridge, a text ridge under the floor: a larger Θ

def test_bank_records_its_solve_and_warns_without_context(tiny, tmp_path):
    "A bank keeps its SolveConfig and each grid's held-out figures, saves and loads them; a grid with no context rows warns."
    from platonic_ta.grids import ContextWarning
    enc, grids, descs, cache = tiny['encs']['vit_w96'], tiny['grids'], tiny['descs'], tiny['cache']
    b = tiny['banks']['vit_w96']
    assert b.solve == SolveConfig()
    for h, g in b.grids.items():
        assert g['ridges'] == 'auto' and g['n_own'] == 20 and g['N'] == grids[g['task']].N and g['moved'] == 'context'
        sel = b.selections[h]
        assert g['move'] == sel.move and g['heldout_error'] == sel.score
        assert sel.move <= b.solve.max_move or sel.move == float(sel.moves.min())
    man = b.manifest()
    assert man['solve'] == SolveConfig().record() and man['solve']['labels'] is False
    b2 = OperatorBank.load(b.save(tmp_path / 'b').with_suffix(''))
    assert b2.solve == b.solve and b2.grids == b.grids
    bare = {t: make_grid(world.load_task(t, 'train', 64), 20, seed=0, context=None) for t in TASKS[:1]}
    U = torch.randn(20, bare[TASKS[0]].M, dtype=torch.float64)
    with pytest.warns(ContextWarning, match='no context rows'):
        bb = OperatorBank.build(enc, bare, {('own', TASKS[0]): U}, cache=cache)
    assert next(iter(bb.grids.values()))['moved'] == 'own'


def test_bank_keeps_other_tasks_prompts_still(tiny, tmp_path):
    "With prompt_context, each grid's operator is the solve with the bank's other tasks' prompts kept still, recorded, and reloadable."
    from platonic_ta.factorization import SolveConfig, grid_prompts
    enc, grids, descs, cache = tiny['encs']['vit_w96'], tiny['grids'], tiny['descs'], tiny['cache']
    cfg = SolveConfig(max_move=10.0, prompt_context=True)
    own = {('own', t): descs[('own', t)] for t in TASKS}
    b = OperatorBank.build(enc, grids, own, solve=cfg, cache=cache)
    plain = OperatorBank.build(enc, grids, own, solve=SolveConfig(max_move=10.0), cache=cache)
    for h, g in b.grids.items():
        others = [t for t in TASKS if t != g['task']]
        assert g['context_prompts'] == others and 'context_prompts' not in plain.grids[h]
        ctx = [grid_prompts(enc, grids[t], cache) for t in others]
        F, T = _features(b, grids[g['task']], cache)
        want = GridFactors(F, T, True, ctx).solve(own[('own', g['task'])], g['ridge_f'], g['ridge_t'])
        assert torch.allclose(b[('own', g['task'])], want, rtol=1e-9, atol=1e-12)
        assert not torch.allclose(b[('own', g['task'])], GridFactors(F, T, True).solve(own[('own', g['task'])], g['ridge_f'], g['ridge_t']))
    b2 = OperatorBank.load(b.save(tmp_path / 'b').with_suffix(''), target=enc)
    assert b2.solve == cfg and b2.grids == b.grids
    b2.add({('new', 'colours'): own[('own', 'colours')]}, grids=grids, cache=cache)     # the same grids: the same solve
    assert torch.allclose(b2[('new', 'colours')], b[('own', 'colours')], rtol=1e-9, atol=1e-12)
    b3 = OperatorBank.load(tmp_path / 'b', target=enc)
    with pytest.raises(BankError, match='pass the same grids'):
        b3.add({('new', 'colours'): own[('own', 'colours')]}, grids={'colours': grids['colours']}, cache=cache)
