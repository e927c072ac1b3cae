"Checks of platonic_ta.adapter that can fail: exact q/k/v exposure, peft targets, the fit on every zoo family, merge, files."
import copy, json, warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from platonic_ta.adapter import AdapterConfig, fit_adapter, load_adapter
from platonic_ta.qkv import SplitLinear, SplitMultiheadAttention, expose_qkv, fold_qkv, qv_targets
from platonic_ta.lora import add_adapter, merge_adapter
from platonic_ta.grids import Grid, class_prompts
from platonic_ta.cache import EmbeddingCache
from platonic_ta.descriptors import Descriptor
from platonic_ta.families import FAMILIES
from platonic_ta._io import PairError
from platonic_ta.encoders import family_encoder

torch.set_num_threads(1)

# q/v sites per family: attention blocks × (q, v); the ResNet's pool (q, v); SigLIP's latent pool (q, v of kv)
N_TARGETS = {'vit_w96': 8, 'vit_w128': 4, 'rn_w16': 2, 'timm_avg': 8, 'siglip_map': 8}


def classes(m): return [(n, type(x).__name__) for n, x in m.named_modules()]


def toy_grid(n=12, seed=0, task='toy', classes_=('striped', 'checkered', 'dotted')):
    g = torch.Generator().manual_seed(seed)
    imgs = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g)
    return Grid(task=task, images=imgs, prompts=class_prompts(list(classes_), ['a {} background']),
                classnames=list(classes_))


def toy_U(grid, scale=0.05, seed=1):
    return scale * torch.randn(grid.N, grid.M, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope='module')
def images():
    return torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize('family', list(FAMILIES))
def test_expose_is_exact_and_fold_restores(family, images):
    enc = family_encoder(family)
    v = enc.model.visual
    x = enc.preprocess(images)
    with torch.no_grad(): z0 = v(x)
    cls, sd = classes(v), {k: t.clone() for k, t in v.state_dict().items()}
    assert expose_qkv(v) is v                                   # in place
    assert classes(v) != cls
    with torch.no_grad(): err = (v(x) - z0).abs().max().item()
    assert err < 1e-5, f'{family}: exposed tower differs by {err}'
    expose_qkv(v)                                               # idempotent
    fold_qkv(v)
    assert classes(v) == cls and list(v.state_dict()) == list(sd)
    assert all(torch.equal(sd[k], t) for k, t in v.state_dict().items())


@pytest.mark.parametrize('family', list(FAMILIES))
def test_adapter_targets_only_image_q_and_v(family):
    enc = family_encoder(family)
    m = enc.model
    with pytest.raises(ValueError, match='call expose_qkv'):
        qv_targets(m)
    expose_qkv(m.visual)
    names = qv_targets(m)
    assert len(names) == N_TARGETS[family]
    assert all(n.startswith('visual.') for n in names)
    assert all(isinstance(m.get_submodule(n), nn.Linear) for n in names)
    pm = add_adapter(m, rank=4, lora_alpha=8.0, seed=0)
    trainable = [n for n, p in pm.named_parameters() if p.requires_grad]
    assert trainable and all('lora_' in n and '.visual.' in n for n in trainable)
    wrapped = {n.split('.lora_')[0].removeprefix('base_model.model.') for n in trainable}
    assert wrapped == set(names)
    assert not any('k_proj' in n for n in wrapped)


def test_resnet_pool_lora_reaches_the_output(images):
    "The ResNet pool reads its weights directly; without SplitAttentionPool2d a LoRA there would do nothing."
    enc = family_encoder('rn_w16')
    m = enc.model
    expose_qkv(m.visual, skip=['attnpool'])
    with pytest.raises(ValueError, match='call expose_qkv'):
        qv_targets(m)
    expose_qkv(m.visual)
    pm = add_adapter(m, seed=0)
    x = enc.preprocess(images)
    with torch.no_grad():
        z0 = m.visual(x)
        for n, p in pm.named_parameters():
            if 'lora_B' in n: p.fill_(0.1)
        z1 = m.visual(x)
    assert (z1 - z0).abs().max() > 1e-4
    merged = merge_adapter(pm)
    with torch.no_grad(): assert torch.allclose(merged.visual(x), z1, atol=1e-5)


def test_split_mha_matches_torch_and_checks_input():
    torch.manual_seed(0)
    for bf in (True, False):
        mha = nn.MultiheadAttention(8, 2, batch_first=bf).eval()
        sp = SplitMultiheadAttention(mha).eval()
        x = torch.randn(2, 4, 8) if bf else torch.randn(4, 2, 8)    # batch 2, length 4
        mask = torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float('-inf'))
        for kw in (dict(need_weights=False), dict(need_weights=True), dict(need_weights=False, attn_mask=mask)):
            a, b = mha(x, x, x, **kw), sp(x, x, x, **kw)
            assert torch.allclose(a[0], b[0], atol=1e-6)
            assert (a[1] is None) == (b[1] is None)
    with pytest.raises(ValueError, match='add_bias_kv'):
        SplitMultiheadAttention(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match='cannot be split into 3'):
        SplitLinear(nn.Linear(4, 7))
    sl = SplitLinear(nn.Linear(4, 12))
    sl.q_proj = nn.Identity()
    with pytest.raises(TypeError, match='merge the adapter first'):
        sl.fuse()


@pytest.mark.parametrize('family', list(FAMILIES))
def test_fit_reduces_loss_on_every_family(family):
    enc = family_encoder(family)
    grid = toy_grid(12)
    fit = fit_adapter(enc, [(grid, toy_U(grid), 1.0)], steps=6, lr=1e-3, seed=0, progress=False)
    assert len(fit.losses) == 6
    assert abs(fit.losses[0] - fit.loss_start) < 1e-6           # the adapter starts as the identity
    assert fit.loss_final < fit.loss_start, f'{family}: {fit.loss_start} -> {fit.loss_final}'
    assert min(fit.losses[1:]) < fit.losses[0]
    # the returned encoder is a plain zoo encoder again; only the image tower's attention moved
    assert classes(fit.encoder.model) == classes(enc.model)
    sd0, sd1 = enc.model.state_dict(), fit.encoder.model.state_dict()
    assert list(sd0) == list(sd1)
    changed = [k for k in sd0 if not torch.equal(sd0[k], sd1[k])]
    assert changed and all(k.startswith('visual.') for k in changed)
    assert all(p.requires_grad for p in fit.encoder.model.parameters())
    assert fit.encoder.weights_hash() != enc.weights_hash()


def test_fit_is_deterministic_and_joint():
    enc = family_encoder('vit_w96')
    g1, g2 = toy_grid(10, seed=0, task='a'), toy_grid(8, seed=5, task='b', classes_=('plain', 'grid'))
    U1, U2 = toy_U(g1), toy_U(g2, seed=2)
    terms = [(g1, U1, 0.5), (g2, U2, -1.0)]
    a = fit_adapter(enc, terms, steps=4, lr=3e-3, seed=7, progress=False)
    b = fit_adapter(enc, terms, steps=4, lr=3e-3, seed=7, progress=False)
    c = fit_adapter(enc, terms, steps=4, lr=3e-3, seed=8, progress=False)
    assert a.losses == b.losses
    assert a.losses != c.losses
    assert torch.equal(a.encoder.encode_image(g1.images), b.encoder.encode_image(g1.images))
    # at the start A_edit = A_0, so the joint objective is Σ_k c_k² mean(U_k²)
    start = 0.25 * U1.pow(2).mean().item() + U2.pow(2).mean().item()
    assert abs(a.loss_start - start) < 1e-6
    assert [t['coeff'] for t in a.meta['terms']] == [0.5, -1.0]
    # two terms on one grid share its forward pass but count separately
    d = fit_adapter(enc, [(g1, U1, 1.0), (g1, -U1, 1.0)], steps=1, seed=0, progress=False)
    assert abs(d.loss_start - 2 * U1.pow(2).mean().item()) < 1e-6


def test_minibatch_and_cache(tmp_path):
    enc = family_encoder('timm_avg')
    enc.model.logit_scale.requires_grad_(False)                 # the target's own trainable flags survive the fit
    grid = toy_grid(16)
    U = toy_U(grid)
    full = fit_adapter(enc, [(grid, U, 1.0)], steps=3, lr=1e-3, seed=0, progress=False)
    flags = lambda m: [(n, p.requires_grad) for n, p in m.named_parameters()]
    assert flags(full.encoder.model) == flags(enc.model) and not full.encoder.model.logit_scale.requires_grad
    cache = EmbeddingCache(tmp_path)
    cached = fit_adapter(enc, [(grid, U, 1.0)], steps=3, lr=1e-3, seed=0, progress=False, cache=cache)
    assert cache.misses == 2                                    # the grid's images and prompts, once each
    assert max(abs(x - y) for x, y in zip(full.losses, cached.losses)) < 1e-6
    fit_adapter(enc, [(grid, U, 1.0)], steps=1, seed=0, progress=False, cache=cache)
    assert cache.hits == 2
    mb = fit_adapter(enc, [(grid, U, 1.0)], config=AdapterConfig(steps=3, lr=1e-3, batch=5), progress=False)
    assert mb.meta['config']['batch'] == 5 and len(mb.losses) == 3
    # a Descriptor made on the grid is accepted; on another grid it is refused
    d = Descriptor.from_matrix(U, grid, dict(model='ft', weights_hash='x'), dict(model='base', weights_hash='y'))
    fit_adapter(enc, [(grid, d, 1.0)], steps=1, progress=False)
    with pytest.raises(ValueError, match='not made on grid'):
        fit_adapter(enc, [(toy_grid(16, seed=9), d, 1.0)], steps=1, progress=False)


def test_save_and_load(tmp_path):
    enc = family_encoder('siglip_map')
    grid = toy_grid(10)
    fit = fit_adapter(enc, [(grid, toy_U(grid), 1.0)], steps=3, lr=3e-3, seed=0, progress=False,
                      save_path=tmp_path / 'edit')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['edit.json', 'edit.safetensors']   # no temp files left
    meta = json.loads((tmp_path / 'edit.json').read_text())
    assert meta['kind'] == 'adapter' and meta['config']['rank'] == 4 and len(meta['losses']) == 3
    assert set(meta['targets']) == set(qv_targets(_exposed(enc.model)))
    again = load_adapter(enc, tmp_path / 'edit')
    assert torch.allclose(again.encode_image(grid.images), fit.encoder.encode_image(grid.images), atol=1e-5)
    assert classes(again.model) == classes(enc.model)
    with pytest.raises(ValueError, match='load it onto that target'):
        load_adapter(family_encoder('siglip_map', create_other(enc)), tmp_path / 'edit')
    raw = (tmp_path / 'edit.safetensors').read_bytes()
    (tmp_path / 'edit.safetensors').write_bytes(raw[:-10])
    with pytest.raises(PairError, match='sha256'):
        load_adapter(enc, tmp_path / 'edit')


def _exposed(model):
    m = copy.deepcopy(model)
    expose_qkv(m.visual)
    return m


def create_other(enc):
    m = copy.deepcopy(enc.model)
    with torch.no_grad(): next(m.visual.parameters()).add_(0.01)
    return m


def test_config_and_input_errors():
    with pytest.raises(ValueError, match='rank must be a positive int'): AdapterConfig(rank=0)
    with pytest.raises(ValueError, match='alpha must be'): AdapterConfig(alpha=-1.0)
    with pytest.raises(ValueError, match='lr must be'): AdapterConfig(lr=float('inf'))
    with pytest.raises(ValueError, match='batch must be None'): AdapterConfig(batch=2.0)
    with pytest.raises(ValueError, match='steps must be'): AdapterConfig(steps=True)
    with pytest.raises(ValueError, match='seed must be'): AdapterConfig(seed=-1)
    enc = family_encoder('rn_w16')
    grid = toy_grid(6)
    U = toy_U(grid)
    with pytest.raises(ValueError, match='non-empty list'): fit_adapter(enc, [], steps=1)
    with pytest.raises(ValueError, match='has 6 probes and 3 classes'): fit_adapter(enc, [(grid, U.T, 1.0)], steps=1)
    with pytest.raises(ValueError, match='coeff must be a finite number'): fit_adapter(enc, [(grid, U, 'x')], steps=1)
    with pytest.raises(ValueError, match='NaN or Inf'): fit_adapter(enc, [(grid, U * float('nan'), 1.0)], steps=1)
    with pytest.raises(TypeError, match='config must be an AdapterConfig'): fit_adapter(enc, [(grid, U, 1.0)], config={})
    with pytest.raises(ValueError, match='lr must be'): fit_adapter(enc, [(grid, U, 1.0)], lr=0.0)
