"Properties of the closed-form transfer (platonic_ta.factorization) and the last-layer handles (platonic_ta.heads)."
import numpy as np, pytest, torch
from platonic_ta.heads import TINY_ARCHS, tiny_model, last_layer, image_features, head_parts
from platonic_ta.factorization import (GridFactors, solve_operator, select_ridges, embedding_route_features,
                                       head_route_features, class_centred)
from platonic_ta.edits import fold_operator, fold_rel_err


def _grid(n=40, k=10, m=7, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    F = embedding_route_features(torch.randn(n, k, generator=g, dtype=dtype))
    T = torch.randn(m, k, generator=g, dtype=dtype)
    Us = [torch.randn(n, m, generator=g, dtype=dtype) for _ in range(3)]
    return F, T, Us


def test_linearity_float64():
    F, T, (U1, U2, U3) = _grid()
    lhs = solve_operator(F, T, U1 - 1.5 * U2 + U3)
    rhs = solve_operator(F, T, U1) - 1.5 * solve_operator(F, T, U2) + solve_operator(F, T, U3)
    assert lhs.dtype == torch.float64
    assert ((lhs - rhs).norm() / rhs.norm()).item() < 1e-12


@pytest.mark.parametrize('n, k, m, seed', [(40, 10, 7, 0), (25, 6, 3, 1), (60, 16, 10, 2)])
def test_class_centred_solve_fits_the_differences_between_classes(n, k, m, seed):
    "Centred: a shift common to a probe's classes changes no operator; the change it makes is the centred fit, linearly."
    F, T, (U1, U2, _) = _grid(n, k, m, seed)
    shift = torch.randn(n, 1, generator=torch.Generator().manual_seed(seed + 10), dtype=torch.float64)
    th = solve_operator(F, T, U1, 1e-6, 1e-6, center=True)
    torch.testing.assert_close(solve_operator(F, T, U1 + shift, 1e-6, 1e-6, center=True), th, rtol=0, atol=1e-10)
    T_hat = T / T.norm(dim=1, keepdim=True)
    dA = F @ th.T @ T_hat.T
    torch.testing.assert_close(dA - dA.mean(1, keepdim=True), F @ th.T @ class_centred(T_hat).T, rtol=0, atol=1e-10)
    both = solve_operator(F, T, U1 - 2 * U2, 1e-6, 1e-6, center=True)
    torch.testing.assert_close(both, th - 2 * solve_operator(F, T, U2, 1e-6, 1e-6, center=True), rtol=0, atol=1e-10)
    a = select_ridges(F, T, U1, grid=np.logspace(-8, 0, 5), center=True)
    b = select_ridges(F, T, U1 + shift, grid=np.logspace(-8, 0, 5), center=True)
    torch.testing.assert_close(a.scores, b.scores, rtol=0, atol=1e-10)


def test_cached_factors_and_normal_equations():
    F, T, (U1, U2, _) = _grid(seed=1)
    gf = GridFactors(F, T)
    rf, rt = 1e-3, 1e-1
    th = gf.solve(U1, rf, rt)
    torch.testing.assert_close(th, solve_operator(F, T, U1, rf, rt), rtol=0, atol=1e-12)
    torch.testing.assert_close(gf.solve(torch.stack([U1, U2]), rf, rt)[0], th, rtol=0, atol=1e-12)
    Th = T / T.norm(dim=1, keepdim=True)
    rho_f = rf * torch.linalg.matrix_norm(F, 2) ** 2
    rho_t = rt * torch.linalg.matrix_norm(Th, 2) ** 2
    ref = Th.T @ torch.linalg.solve(Th @ Th.T + rho_t * torch.eye(len(Th), dtype=F.dtype), U1.T) @ F \
        @ torch.linalg.inv(F.T @ F + rho_f * torch.eye(F.shape[1], dtype=F.dtype))
    torch.testing.assert_close(th, ref, rtol=1e-9, atol=1e-10)


def test_numpy_in_numpy_out():
    F, T, (U1, _, _) = _grid(seed=2)
    out = solve_operator(F.numpy(), T.numpy(), U1.numpy())
    assert isinstance(out, np.ndarray) and out.dtype == np.float64


@pytest.mark.parametrize('bad, msg', [
    (lambda F, T, U: (F, T, U[:-1]), 'rows but F has'),
    (lambda F, T, U: (F, T, U[:, :-1]), 'columns but T has'),
    (lambda F, T, U: (F, T, torch.where(U > 1, float('nan'), U)), 'NaN/Inf'),
    (lambda F, T, U: (F, torch.cat([T[:1] * 0, T[1:]]), U), 'zero-norm'),
])
def test_bad_input(bad, msg):
    F, T, (U1, _, _) = _grid(seed=3)
    with pytest.raises(ValueError, match=msg): solve_operator(*bad(F, T, U1))


def test_negative_ridge():
    F, T, (U1, _, _) = _grid(seed=3)
    with pytest.raises(ValueError, match='ridge_f'): solve_operator(F, T, U1, ridge_f=-1.0)
    with pytest.raises(ValueError, match='ridge_t'): solve_operator(F, T, U1, ridge_t=-1e-3)
    with pytest.raises(ValueError, match='ridge'): select_ridges(F, T, U1, grid_t=[1e-2, -1.0])


def test_select_ridges_shape_and_choice():
    F, T, (U1, _, _) = _grid(n=80, seed=4)
    sel = select_ridges(F, T, U1, grid=np.logspace(-6, 0, 4))
    assert sel.scores.shape == (4, 4) and torch.isfinite(sel.scores).all()
    assert sel.scores.min().item() == sel.scores[sel.grid_f.index(sel.ridge_f), sel.grid_t.index(sel.ridge_t)].item()


@pytest.mark.parametrize('arch', TINY_ARCHS)
def test_tiny_tower_features_and_fold(arch):
    m = tiny_model(arch)
    ll = last_layer(m)
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        u, z = image_features(m, x)
        torch.testing.assert_close(z, m.encode_image(x), rtol=0, atol=1e-5)
    shape = (ll.d, ll.k + 1) if ll.kind == 'residual_head' else (ll.d, ll.d)
    W = 0.3 * torch.randn(*shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) / shape[1] ** 0.5
    assert fold_rel_err(m, x, W, 1.0) < 1e-5
    assert fold_rel_err(m, x, W, -0.5) < 1e-5


def test_wrong_route_is_refused():
    sig, vit = tiny_model('siglip'), tiny_model('vit')
    d = last_layer(sig).d
    with pytest.raises(ValueError, match='head route'): fold_operator(sig, torch.zeros(d, d))
    with pytest.raises(ValueError, match='16×16'): fold_operator(vit, torch.zeros(16, 33))


def test_wrapper_round_trip():
    class Wrap:
        def __init__(self, m): self.model = m
    m = tiny_model('rn')
    w = fold_operator(Wrap(m), 0.1 * torch.eye(16, dtype=torch.float64))
    assert isinstance(w, Wrap) and w.model is not m
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(w.model.encode_image(x), 1.1 * m.encode_image(x), rtol=1e-5, atol=1e-6)


def test_head_route_end_to_end():
    m = tiny_model('siglip')
    x = torch.randn(12, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(): h, a, z = head_parts(m, x)
    F = head_route_features(a, z)
    assert F.shape == (12, a.shape[1] + 1)
    T = torch.randn(4, z.shape[1], generator=torch.Generator().manual_seed(1))
    U = 1e-2 * torch.randn(12, 4, generator=torch.Generator().manual_seed(2))
    th = solve_operator(F, T, U, 1e-6, 1e-6)
    assert fold_rel_err(m, x, th, 1.0) < 1e-5


@pytest.mark.parametrize('name', ['ViT-B-32', 'RN50', 'ViT-B-16-SigLIP'])
def test_fold_exact_on_real_architectures(name):
    "Random-init open_clip models built offline (pretrained=None): fold is exact to float32 rounding."
    import open_clip
    m = open_clip.create_model(name, pretrained=None).eval()
    ll = last_layer(m)
    shape = (ll.d, ll.k + 1) if ll.kind == 'residual_head' else (ll.d, ll.d)
    W = 0.3 * torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) / shape[1] ** 0.5
    size = m.visual.image_size
    size = (size, size) if isinstance(size, int) else tuple(size)
    x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(0))
    assert fold_rel_err(m, x, W, 1.0) < 1e-5
