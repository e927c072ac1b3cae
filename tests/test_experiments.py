"Baselines and experiment helpers on tiny seeded tensors and random-init towers (no zoo needed)."
import copy
import pytest
import torch

from platonic_ta import world
from platonic_ta.encoders import family_encoder
from platonic_ta.grids import make_grid, sub_grid
from platonic_ta.descriptors import affinity
from platonic_ta.baselines import weight_space_sum
from platonic_ta.encoders import prompt_embeddings
from platonic_ta.factorization import solve_operator
from platonic_ta.edits import edit_record
from platonic_ta.adapter import AdapterConfig
from platonic_ta.baselines import (procrustes, transport_theta, transport_operator, fit_distill, gradient_ascent,
                                   teacher_logits, lora_fit, lora_targetable)
from platonic_ta.experiments import (gram_power, whiten_descriptor, first_order_change, first_order_adjoint,
                                     exact_first_order_operator, halving_counts, task_relatedness,
                                     weight_update_cosine, model_scale, other_scale, task_orderings, edit_gains)

torch.set_num_threads(1)
D64 = torch.float64


def gen(s=0): return torch.Generator().manual_seed(s)


@pytest.fixture(scope='module')
def enc():
    return family_encoder('vit_w96')


@pytest.fixture(scope='module')
def task():
    return world.list_tasks(controls=False)[0]


def perturbed(enc, scale, seed):
    "A copy of `enc` with every floating weight moved by seeded noise of size `scale` (a stand-in fine-tune)."
    out = copy.deepcopy(enc)
    g = gen(seed)
    with torch.no_grad():
        for p in out.model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    out._hash = None
    return out


def test_weight_space_at_zero_is_the_base_bit_for_bit(enc):
    ft = perturbed(enc, 1e-2, 1)
    same = weight_space_sum(enc, [ft], 0.0)
    sd0, sd1 = enc.model.state_dict(), same.model.state_dict()
    assert all(torch.equal(sd0[k], sd1[k]) for k in sd0)
    assert same.weights_hash() == enc.weights_hash()


def test_weight_space_negation_moves_against_the_update(enc):
    ft = perturbed(enc, 1e-2, 2)
    neg = weight_space_sum(enc, [ft], -0.5)
    k = next(k for k, v in enc.model.state_dict().items() if v.is_floating_point() and v.ndim == 2)
    w0, w1, wn = enc.model.state_dict()[k], ft.model.state_dict()[k], neg.model.state_dict()[k]
    torch.testing.assert_close(wn, w0 - 0.5 * (w1 - w0), atol=1e-6, rtol=0)


def test_procrustes_recovers_a_known_rotation():
    g = gen(0)
    Q, _ = torch.linalg.qr(torch.randn(7, 7, generator=g, dtype=D64))
    X = torch.randn(50, 7, generator=g, dtype=D64)
    torch.testing.assert_close(procrustes(X, X @ Q), Q, atol=1e-10, rtol=0)
    W, _ = torch.linalg.qr(torch.randn(10, 7, generator=g, dtype=D64))       # an isometry into a wider space
    torch.testing.assert_close(procrustes(X, X @ W.T), W.T, atol=1e-10, rtol=0)
    R = procrustes(X, torch.randn(50, 4, generator=g, dtype=D64))
    torch.testing.assert_close(R.T @ R, torch.eye(4, dtype=D64), atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match='same inputs'): procrustes(X, X[:-2])


def test_transported_operator_acts_the_same_after_a_rotation():
    g = gen(1)
    Q, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=D64))
    Ws = 0.1 * torch.randn(6, 6, generator=g, dtype=D64)
    z = torch.randn(9, 6, generator=g, dtype=D64)
    I = torch.eye(6, dtype=D64)
    torch.testing.assert_close((z @ Q) @ (I + transport_theta(Ws, Q)).T, (z @ (I + Ws).T) @ Q, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match='d_s × d_s'): transport_theta(Ws, torch.randn(5, 6, dtype=D64))


def test_transport_operator_fits_a_linear_shift_field():
    g = gen(2)
    F = torch.nn.functional.normalize(torch.randn(40, 5, generator=g, dtype=D64), dim=1)
    W = 0.2 * torch.randn(5, 5, generator=g, dtype=D64)
    Q, _ = torch.linalg.qr(torch.randn(5, 5, generator=g, dtype=D64))
    torch.testing.assert_close(transport_operator(F, F @ W.T @ Q.T, Q, ridge=1e-12), W, atol=1e-8, rtol=0)
    # a large ridge shrinks the fit towards zero
    assert transport_operator(F, F @ W.T @ Q.T, Q, ridge=10.0).norm() < 0.5 * W.norm()


def test_first_order_change_is_the_derivative_and_its_adjoint_is_exact():
    g = gen(3)
    Z = torch.randn(15, 4, generator=g, dtype=D64); Zh = Z / Z.norm(dim=1, keepdim=True)
    T = torch.randn(3, 4, generator=g, dtype=D64); Th = T / T.norm(dim=1, keepdim=True)
    th = torch.randn(4, 4, generator=g, dtype=D64)
    eps = 1e-6
    z1 = Z + eps * Z @ th.T
    fd = ((z1 / z1.norm(dim=1, keepdim=True)) @ Th.T - Zh @ Th.T) / eps
    torch.testing.assert_close(first_order_change(Zh, Zh, Th, th), fd, atol=1e-4, rtol=0)
    R = torch.randn(15, 3, generator=g, dtype=D64)
    lhs = (first_order_change(Zh, Zh, Th, th) * R).sum()
    rhs = (th * first_order_adjoint(Zh, Zh, Th, R)).sum()
    torch.testing.assert_close(lhs, rhs, atol=1e-10, rtol=0)


def test_exact_first_order_solve_matches_a_dense_solve_and_beats_the_factorised_fit():
    g = gen(4)
    N, d, M = 18, 4, 3
    Z = torch.randn(N, d, generator=g, dtype=D64); Zh = Z / Z.norm(dim=1, keepdim=True)
    T = torch.randn(M, d, generator=g, dtype=D64); Th = T / T.norm(dim=1, keepdim=True)
    U = 0.1 * torch.randn(N, M, generator=g, dtype=D64)
    X = torch.stack([first_order_change(Zh, Zh, Th, e.view(d, d)).flatten() for e in torch.eye(d * d, dtype=D64)], 1)
    rho = 1e-3 * float(torch.linalg.matrix_norm(Zh, 2)) ** 2 * float(torch.linalg.matrix_norm(Th, 2)) ** 2
    dense = torch.linalg.solve(X.T @ X + rho * torch.eye(d * d, dtype=D64), X.T @ U.flatten()).view(d, d)
    torch.testing.assert_close(exact_first_order_operator(Zh, Zh, Th, U, ridge=1e-3, iters=400), dense, atol=1e-7, rtol=0)
    res = lambda th: float((first_order_change(Zh, Zh, Th, th) - U).norm())
    assert res(exact_first_order_operator(Zh, Zh, Th, U, ridge=1e-9, iters=400)) < res(solve_operator(Zh, T, U, 1e-9, 1e-9))
    with pytest.raises(ValueError, match='shapes do not fit'): exact_first_order_operator(Zh, Zh, Th, U[:, :2])


def test_whitening_undoes_the_prompt_frame():
    g = gen(5)
    T = torch.randn(4, 8, generator=g, dtype=D64)
    Th = T / T.norm(dim=1, keepdim=True)
    W = gram_power(T, -0.5)
    torch.testing.assert_close(W @ (Th @ Th.T) @ W, torch.eye(4, dtype=D64), atol=1e-8, rtol=0)
    U = torch.randn(6, 4, generator=g, dtype=D64)
    torch.testing.assert_close(whiten_descriptor(U, T, T), U, atol=1e-8, rtol=0)
    Q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=D64))      # a rotated model: same prompt angles
    torch.testing.assert_close(whiten_descriptor(U, T), whiten_descriptor(U, T @ Q), atol=1e-8, rtol=0)
    assert not torch.allclose(whiten_descriptor(U, T), U)


def test_distillation_towards_its_own_posterior_starts_at_zero_and_learns_a_teacher(enc, task):
    grid = make_grid(task, 8, 0)
    cfg = AdapterConfig(steps=3, lr=1e-2, seed=0)
    with torch.no_grad():
        A0 = affinity(enc.encode_image(grid.images), prompt_embeddings(enc, grid.prompts))
    before = enc.weights_hash()
    student, losses = fit_distill(enc, [(grid, A0)], cfg)
    assert abs(losses[0]) < 1e-6
    assert enc.weights_hash() == before and edit_record(enc) == []
    assert edit_record(student)[-1]['kind'] == 'distill'
    U = torch.randn(grid.N, grid.M, generator=gen(6))
    _, losses = fit_distill(enc, [(grid, teacher_logits(A0, U, -1.0))], cfg)
    assert losses[-1] < losses[0]
    with pytest.raises(ValueError, match='grid is'): fit_distill(enc, [(grid, A0[:-1])], cfg)


def test_teacher_logits_are_the_base_plus_the_scaled_descriptor():
    g = gen(9)
    A0, U = torch.randn(6, 3, generator=g, dtype=D64), torch.randn(6, 3, generator=g, dtype=D64)
    assert torch.equal(teacher_logits(A0, U, 0.0), A0)                 # coefficient 0: the base's own posterior
    torch.testing.assert_close(teacher_logits(A0, U, 1.0), A0 + U, atol=0, rtol=0)          # the fine-tuned teacher
    torch.testing.assert_close(teacher_logits(A0, U, -0.5), A0 - 0.5 * U, atol=1e-15, rtol=0)   # the negated teacher
    with pytest.raises(ValueError, match='one grid'): teacher_logits(A0, U[:5], 1.0)


def test_gradient_ascent_raises_the_cross_entropy(enc, task):
    data = world.load_task(task, 'train', 16)
    ga, losses = gradient_ascent(enc, data, AdapterConfig(steps=3, lr=1e-2, seed=0))
    assert losses[-1] < losses[0]                      # the loss is −CE
    assert edit_record(ga)[-1]['kind'] == 'gradient_ascent'
    assert lora_targetable(enc)
    with pytest.raises(TypeError, match='callable'): lora_fit(enc, 'not a loss')


def test_probe_subgrids_and_halving(task):
    grid = make_grid(task, 16, 3, context=None)
    assert sub_grid(grid, 4).grid_hash == make_grid(task, 4, 3, context=None).grid_hash
    assert halving_counts(64, 5) == [64, 32, 16, 8, 4]
    assert halving_counts(3, 4) == [3, 1, 1, 1]
    with pytest.raises(ValueError, match='between 1'): sub_grid(grid, 17)


def test_relatedness_weights_scale_and_orderings(enc):
    rel = task_relatedness({'near': torch.tensor([[1., 0.1]]), 'far': torch.tensor([[-1., 0.]])}, torch.tensor([[3., 0.]]))
    assert list(rel) == ['near', 'far'] and rel['near'] > 0 > rel['far']
    a, b = perturbed(enc, 1e-3, 7), perturbed(enc, 1e-3, 8)
    assert weight_update_cosine(enc, a, a) == pytest.approx(1.0, abs=1e-9)
    assert abs(weight_update_cosine(enc, a, b)) < 0.05          # independent noise: nearly orthogonal updates
    s96, s128 = model_scale(enc), model_scale(family_encoder('vit_w128'))
    assert s96 == (96, 96, 4) and s128 == (128, 128, 2) and other_scale(s96, s128) and not other_scale(s96, s96)
    orders = task_orderings(['a', 'b', 'c', 'd'], 3, seed=1)
    assert orders[0] == ['a', 'b', 'c', 'd'] and len({tuple(o) for o in orders}) == 3
    assert all(sorted(o) == ['a', 'b', 'c', 'd'] for o in orders)
    g = edit_gains({'t': 0.7, 'c': 0.45}, {'t': 0.5, 'c': 0.5}, ['t'], ['c'])
    assert g['task_gain'] == pytest.approx(20.0) and g['control_change'] == pytest.approx(-5.0)
    with pytest.raises(KeyError, match='no accuracy'): edit_gains({'t': 0.7}, {'t': 0.5}, ['t'], ['c'])
