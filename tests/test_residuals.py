"""Residual diagnostics (platonic_ta.residuals): identities, the idealisation, the solve's amplification, bad input, and
the micro zoo run from cached descriptors, factors and features with no forward pass."""
import math

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

from platonic_ta.scoring import Scorer
from platonic_ta.descriptors import Descriptor, GridMismatchError, descriptor_cosine
from platonic_ta.factorization import GridFactors, embedding_route_features, head_route_features, solve_operator
from platonic_ta.residuals import (AGREEMENTS, agreement_correlations, amplification, dispersion, edit_diagnostics,
                                   forfeited_gain, idealised_cosine, implied_dispersion, mean_offdiag,
                                   operator_agreement, pairwise_cosines, pearson, residuals, shared_component,
                                   shift_field, shift_field_agreement, task_residuals, task_summary)


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- shared component and residuals --------------------------------------------------------------------------------

@pytest.mark.parametrize('K', [2, 3, 7])
def test_unit_descriptor_identities(K):
    "Mean squared residual = 1 − ‖s‖², mean pairwise cosine = (K‖s‖² − 1)/(K − 1), residuals sum to zero."
    Us = [_rand(30, 6, seed=i) * (0.1 + i) + 0.5 * _rand(30, 6, seed=99) for i in range(K)]
    s, R, C = shared_component(Us), residuals(Us), pairwise_cosines(Us)
    ns2 = s.pow(2).sum()
    torch.testing.assert_close(R.pow(2).sum((1, 2)).mean(), 1 - ns2, rtol=0, atol=1e-12)
    torch.testing.assert_close(mean_offdiag(C), (K * ns2 - 1) / (K - 1), rtol=0, atol=1e-12)
    torch.testing.assert_close(R.sum(0), torch.zeros_like(s), rtol=0, atol=1e-12)
    torch.testing.assert_close(dispersion(Us), R.flatten(1).norm(dim=1) / s.norm(), rtol=0, atol=1e-12)
    # shared component of unit descriptors: rescaling a member changes nothing
    torch.testing.assert_close(dispersion([U * (i + 2.5) for i, U in enumerate(Us)]), dispersion(Us), rtol=0, atol=1e-12)


@pytest.mark.parametrize('rho, K', [(0.3, 4), (1.0, 6), (2.2, 9)])
def test_idealisation_is_exact_for_orthogonal_residuals(rho, K):
    Q, _ = torch.linalg.qr(_rand(200, K + 1, seed=int(10 * rho)))
    Us = [(Q[:, 0] + rho * Q[:, m + 1]).reshape(20, 10) for m in range(K)]
    torch.testing.assert_close(mean_offdiag(pairwise_cosines(Us)), torch.tensor(idealised_cosine(rho), dtype=torch.float64),
                               rtol=0, atol=1e-12)
    assert implied_dispersion(idealised_cosine(rho)) == pytest.approx(rho, abs=1e-12)
    # the plug-in dispersion shrinks the population ratio by the K residuals' shared estimation error
    want = rho * math.sqrt((K - 1) / K) / math.sqrt(1 + rho ** 2 / K)
    torch.testing.assert_close(dispersion(Us), torch.full((K,), want, dtype=torch.float64), rtol=0, atol=1e-12)


def test_identical_descriptors_have_no_residual():
    U = _rand(12, 5)
    assert dispersion([U, 2 * U, 0.5 * U]).abs().max() < 1e-12
    torch.testing.assert_close(shared_component([U, 3 * U]), U / U.norm(), rtol=0, atol=1e-14)


def test_dtypes_kept_and_stack_or_list():
    Us = [_rand(8, 4, seed=i, dtype=torch.float32) for i in range(3)]
    assert shared_component(Us).dtype == torch.float32
    assert dispersion([U.double() for U in Us]).dtype == torch.float64
    torch.testing.assert_close(dispersion(torch.stack(Us)), dispersion(Us))
    torch.testing.assert_close(dispersion([U.numpy() for U in Us]), dispersion(Us))


def _desc(U, task='t', n_extra=0):
    N, M = U.shape
    return Descriptor(U, task, [f'{task}{i + n_extra}' for i in range(N)], [[f'p{j}'] for j in range(M)],
                      [f'c{j}' for j in range(M)], dict(model='m', weights_hash='a'), dict(model='b', weights_hash='b'))


@pytest.mark.parametrize('bad, exc, msg', [
    (lambda U: [U], ValueError, 'at least two models'),
    (lambda U: [U, U[:-1]], ValueError, 'one grid'),
    (lambda U: [U, torch.where(U > 1, float('nan'), U)], ValueError, 'NaN/Inf'),
    (lambda U: [U, torch.zeros_like(U)], ValueError, 'all zeros'),
    (lambda U: U, ValueError, 'K×N×M stack'),
    (lambda U: [U, -U], ValueError, 'cancel'),
    (lambda U: [_desc(U), _desc(U, n_extra=1)], GridMismatchError, 'different grids'),
    (lambda U: [U, 'not a matrix'], TypeError, 'torch tensor or a numpy array'),
])
def test_residual_bad_input(bad, exc, msg):
    with pytest.raises(exc, match=msg): dispersion(bad(_rand(10, 4)))


def test_idealisation_bad_input():
    with pytest.raises(ValueError, match='>= 0'): idealised_cosine(-0.1)
    with pytest.raises(ValueError, match='>= 0'): idealised_cosine(float('nan'))
    with pytest.raises(ValueError, match=r'\(0, 1\]'): implied_dispersion(0.0)
    with pytest.raises(ValueError, match=r'\(0, 1\]'): implied_dispersion(torch.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match='K×K'): mean_offdiag(torch.ones(1, 1))


# --- where the residual reaches the edit ---------------------------------------------------------------------------

def _factors(n=50, k=10, m=7, seed=0, spread=-2):
    F = embedding_route_features(_rand(n, k, seed=seed) * torch.logspace(0, spread, k, dtype=torch.float64))
    return F, GridFactors(F, _rand(m, k, seed=seed + 1))


def test_agreements_and_amplification_from_the_solve():
    F, gf = _factors()
    rf, rt = 1e-3, 1e-2
    U_t, dU = _rand(50, 7, seed=2), 0.6 * _rand(50, 7, seed=3)
    U_s = U_t + dU
    th_s, th_t = gf.solve(U_s, rf, rt), gf.solve(U_t, rf, rt)
    a = operator_agreement(th_s, th_t)
    flat_s, flat_t = th_s.flatten(), th_t.flatten()
    assert float(a) == pytest.approx(float(flat_s @ flat_t / flat_s.norm() / flat_t.norm()), abs=1e-12)
    assert float(operator_agreement(th_t, th_s)) == pytest.approx(float(a), abs=1e-14)
    # the shift field from the cached factors is the field from the features
    torch.testing.assert_close(shift_field(gf, th_s), F @ th_s.T, rtol=0, atol=1e-10)
    sf = (F @ th_s.T).flatten(), (F @ th_t.T).flatten()
    assert float(shift_field_agreement(gf, th_s, th_t)) == pytest.approx(float(sf[0] @ sf[1] / sf[0].norm() / sf[1].norm()),
                                                                         abs=1e-10)
    # amplification by linearity: ‖Θ(dU)‖/‖Θ(U_t)‖ per ‖dU‖/‖U_t‖
    want = (gf.solve(dU, rf, rt).norm() / th_t.norm()) / (dU.norm() / U_t.norm())
    assert float(amplification(U_s, U_t, th_s, th_t)) == pytest.approx(float(want), rel=1e-10)


def test_amplification_follows_the_target_factors():
    "A residual the features cannot express is dropped; a weak feature direction is magnified, the strongest damped."
    F, gf = _factors(seed=4)
    rf, rt = 1e-4, 1e-3
    U_t = F @ _rand(10, 10, seed=5) @ gf.T_hat.T
    th_t = gf.solve(U_t, rf, rt)
    null = _rand(50, 7, seed=6); null = null - gf.Pf @ (gf.Pf.T @ null)
    assert float(amplification(U_t + null, U_t, gf.solve(U_t + null, rf, rt), th_t)) < 1e-8
    v = _rand(7, seed=7); v = v / v.norm()
    amp = {}
    for j in (0, len(gf.Sf) - 1):
        dU = 0.2 * U_t.norm() * torch.outer(gf.Pf[:, j], v)
        amp[j] = float(amplification(U_t + dU, U_t, gf.solve(U_t + dU, rf, rt), th_t))
    assert amp[len(gf.Sf) - 1] > 2 > 1 > amp[0]


def test_head_route_shift_field_shapes():
    a, z = _rand(20, 6, seed=8), _rand(20, 5, seed=9)
    Fh = head_route_features(a, z)
    th = solve_operator(Fh, _rand(4, 5, seed=10), _rand(20, 4, seed=11))
    assert th.shape == (5, 7) and shift_field(Fh, th).shape == (20, 5)
    torch.testing.assert_close(shift_field(GridFactors(Fh, _rand(4, 5, seed=10)), th), Fh @ th.T, rtol=0, atol=1e-10)


def test_edit_bad_input():
    F, gf = _factors()
    th, U = gf.solve(_rand(50, 7), 1e-2, 1e-2), _rand(50, 7)
    with pytest.raises(ValueError, match='identical'): amplification(U, U, 2 * th, th)
    with pytest.raises(ValueError, match='same shape'): amplification(U, U[:, :-1], 2 * th, th)
    with pytest.raises(ValueError, match='theta_t is all zeros'): amplification(2 * U, U, th, 0 * th)
    with pytest.raises(ValueError, match='all zeros'): operator_agreement(th, torch.zeros_like(th))
    with pytest.raises(ValueError, match='same shape'): operator_agreement(th, th[:-1])
    with pytest.raises(ValueError, match='NaN/Inf'): shift_field_agreement(gf, th, th.masked_fill(th > 1, float('inf')))
    with pytest.raises(ValueError, match='columns'): shift_field(F, th[:, :-1])
    with pytest.raises(ValueError, match="factors' features"): shift_field(gf, th[:, :-1])


# --- forfeited gain and correlations -------------------------------------------------------------------------------

def test_forfeited_gain():
    assert forfeited_gain(6.0, 8.0) == pytest.approx(0.25)
    assert forfeited_gain(-2.0, 4.0) == pytest.approx(1.5)           # a transfer that hurts forfeits more than all
    assert math.isnan(forfeited_gain(1.0, 0.9, min_own=1.0)) and math.isnan(forfeited_gain(1.0, -3.0))
    out = forfeited_gain(torch.tensor([1., 2., 3.], dtype=torch.float64), torch.tensor([2., 0., 4.], dtype=torch.float64))
    assert out.dtype == torch.float64 and out[1].isnan()
    torch.testing.assert_close(out[[0, 2]], torch.tensor([0.5, 0.25], dtype=torch.float64))
    with pytest.raises(ValueError, match='one own gain per'): forfeited_gain(torch.ones(3), torch.ones(2))
    with pytest.raises(ValueError, match='NaN/Inf'): forfeited_gain(float('nan'), 1.0)
    with pytest.raises(ValueError, match='min_own'): forfeited_gain(1.0, 2.0, min_own=float('inf'))


def test_pearson_matches_numpy_and_refuses_bad_series():
    x, y = _rand(11, seed=12), _rand(11, seed=13)
    assert float(pearson(x, y)) == pytest.approx(np.corrcoef(x.numpy(), y.numpy())[0, 1], abs=1e-12)
    assert float(pearson(x, 3 - 2 * x)) == pytest.approx(-1.0, abs=1e-12)
    with pytest.raises(ValueError, match='at least 3'): pearson([1., 2.], [2., 1.])
    with pytest.raises(ValueError, match='constant'): pearson([1., 2., 3.], [5., 5., 5.])
    with pytest.raises(ValueError, match='same shape'): pearson([1., 2., 3.], [1., 2.])


def test_summary_and_correlations():
    rows = []
    for i, t in enumerate('abcde'):
        op = 0.1 * i
        for j, go in enumerate((4.0, 6.0)):
            gc = op * go                                   # forfeit = 1 − op
            rows.append(dict(task=t, descriptor_agreement=0.5 + 0.01 * j - 0.02 * (i % 2), operator_agreement=op,
                             shift_agreement=op ** 2, amplification=1.0 + i, gain_cross=gc, gain_own=go))
    rows.append(dict(task='f', descriptor_agreement=0.1, operator_agreement=0.9, shift_agreement=0.2,
                     amplification=float('nan'), gain_cross=0.3, gain_own=0.5))   # own gain below 1 point: no forfeit
    S = task_summary(rows, min_own_gain_points=1.0)
    assert list(S) == list('abcdef') and S['c']['n_cells'] == 2
    assert S["c"]["forfeit"] == pytest.approx(0.8) and math.isnan(S['f']['forfeit'])
    assert S['c']['median_amplification'] == 3.0 and math.isnan(S['f']['median_amplification'])
    corr = agreement_correlations(S)
    assert corr['n_tasks'] == 5
    assert corr['operator_agreement'] == pytest.approx(-1.0, abs=1e-12)     # forfeit = operator agreement flipped
    assert -1 < corr['shift_agreement'] < -0.9 and abs(corr['descriptor_agreement']) < 1
    few = agreement_correlations({t: S[t] for t in 'abf'})
    assert few['n_tasks'] == 2 and all(math.isnan(few[a]) for a in AGREEMENTS)


# --- the micro zoo: no forward pass --------------------------------------------------------------------------------

def _fill(Z, cache, n_probes=64, n_eval=200):
    "What the notebook does before its diagnostics (the same sizes as its CI defaults, so the session cache is shared)."
    from platonic_ta import world
    from platonic_ta.grids import make_grid
    from platonic_ta.descriptors import zoo_descriptors
    from platonic_ta.composition import OperatorBank
    grids = {t: make_grid(t, n_probes, 0) for t in Z.tasks}
    D = {(f, t): d for (f, t, _), d in zoo_descriptors(Z, grids, cache, progress=False).items()}
    evals = {t: world.load_task(t, 'test', n_eval) for t in Z.tasks}
    banks = {f: OperatorBank.build(Z.base(f), grids, D, cache=cache) for f in Z.families}
    scorers = {f: Scorer(banks[f], evals, cache=cache) for f in Z.families}
    return grids, D, banks, scorers


def _diagnose(Z, D, banks, scorers):
    res = {t: task_residuals(D, t, Z.families) for t in Z.tasks}
    rows = [r for f in Z.families for t in Z.tasks for r in edit_diagnostics(banks[f], D, (f, t), scorer=scorers[f])]
    return res, rows


class _Forwards:
    "Counts every nn.Module forward call in the process while active."
    def __enter__(self):
        self.calls = []
        self.h = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, i: self.calls.append(type(m).__name__))
        return self
    def __exit__(self, *a): self.h.remove()


@pytest.fixture(scope='module')
def micro(cache_dir):
    from platonic_ta.zoo import get_zoo
    from platonic_ta.cache import EmbeddingCache
    Z = get_zoo('micro', progress=False)
    cache = EmbeddingCache(progress=False)
    grids, D, banks, scorers = _fill(Z, cache)
    return dict(Z=Z, cache=cache, grids=grids, D=D, banks=banks, scorers=scorers)


def test_micro_zoo_diagnostics_run_without_a_forward_pass(micro):
    Z, cache = micro['Z'], micro['cache']
    misses = cache.misses
    with _Forwards() as fw:
        res, rows = _diagnose(Z, micro['D'], micro['banks'], micro['scorers'])
        S = task_summary(rows); agreement_correlations(S)
    assert fw.calls == [], f'the diagnostics ran modules forward: {sorted(set(fw.calls))}'
    assert cache.misses == misses, 'the diagnostics computed embeddings'
    K = len(Z.families)
    assert len(rows) == K * (K - 1) * len(Z.tasks)
    for r in rows:
        assert all(-1 - 1e-9 <= r[a] <= 1 + 1e-9 for a in AGREEMENTS) and r['amplification'] > 0
        assert math.isfinite(r['gain_cross']) and math.isfinite(r['gain_own'])
    for t in Z.tasks:
        assert res[t]['dispersion'].shape == (K,) and (res[t]['dispersion'] > 0).all()
        s2 = res[t]['shared'].pow(2).sum()
        assert float(res[t]['residuals'].pow(2).sum((1, 2)).mean()) == pytest.approx(float(1 - s2), abs=1e-10)


def test_micro_zoo_rows_match_independent_recomputation(micro):
    "Descriptor cosines, bank operators, shift fields from the cached embeddings (not the bank's factors) and gains."
    from platonic_ta.cache import EmbeddingCache
    Z, D, banks, scorers = micro['Z'], micro['D'], micro['banks'], micro['scorers']
    tgt = next(f for f in Z.families if banks[f].route == 'embedding')
    t = Z.tasks[0]
    rows = edit_diagnostics(banks[tgt], D, (tgt, t), scorer=scorers[tgt])
    z = EmbeddingCache(progress=False).image_embeddings(Z.base(tgt), micro['grids'][t]).double()
    F = embedding_route_features(z)
    th_t = banks[tgt][(tgt, t)]
    for r in rows:
        key = (r['source'], t)
        assert r['descriptor_agreement'] == pytest.approx(float(descriptor_cosine(D[key], D[(tgt, t)])), abs=1e-6)  # float32 in
        assert r['operator_agreement'] == pytest.approx(float(operator_agreement(banks[tgt][key], th_t)), abs=1e-12)
        a, b = (F @ banks[tgt][key].T).flatten(), (F @ th_t.T).flatten()
        assert r['shift_agreement'] == pytest.approx(float(a @ b / a.norm() / b.norm()), abs=1e-6)
        sc = scorers[tgt]
        assert r['gain_cross'] == pytest.approx(100 * (sc.score({key: 1.0}, tasks=[t])[t] - sc.base[t]), abs=1e-12)


def test_micro_zoo_second_run_is_served_from_the_cache(micro):
    "A fresh process-level cache object on the same folder: descriptors, factors and features all come from disk."
    from platonic_ta.cache import EmbeddingCache
    Z = micro['Z']
    cache2 = EmbeddingCache(progress=False)
    _, D2, banks2, scorers2 = _fill(Z, cache2)
    assert cache2.misses == 0 and cache2.hits > 0
    _, rows1 = _diagnose(Z, micro['D'], micro['banks'], micro['scorers'])
    _, rows2 = _diagnose(Z, D2, banks2, scorers2)
    assert len(rows1) == len(rows2)
    for a, b in zip(rows1, rows2):
        assert a.keys() == b.keys()
        for k in a:   # float64 diagnostics of the same float32 inputs (in memory, then read back from disk)
            assert b[k] == (a[k] if isinstance(a[k], str) else pytest.approx(a[k], rel=1e-9, abs=1e-12, nan_ok=True)), k
