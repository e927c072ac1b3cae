"Checks of platonic_ta.grids, platonic_ta.cache and platonic_ta.descriptors that can fail: cache hits, corrupt cache files, grid mismatches, dtypes, bad input."
import json, warnings
from pathlib import Path

import pytest
import torch

from platonic_ta.grids import Grid, make_grid, union_grid
from platonic_ta.cache import CacheCorruptionWarning, EmbeddingCache
from platonic_ta.descriptors import (Descriptor, DescriptorFileError, GridMismatchError, affinity,
                                     consistency_summary, descriptor, descriptor_cosine, unit)
from platonic_ta.toys import ToyEncoder, ToyTask


@pytest.fixture
def grid(): return make_grid(ToyTask(n=30, n_classes=3), 10, seed=0)


def test_cache_hit_runs_no_forward_pass(tmp_path, grid):
    enc, cache = ToyEncoder(), EmbeddingCache(tmp_path, batch_size=4)
    z, t, (u, z2) = cache.image_embeddings(enc, grid), cache.text_embeddings(enc, grid), cache.features(enc, grid)
    first = dict(enc.calls)
    assert first == {'image': 3 + 3, 'text': 2}          # ceil(10/4) batches, twice (image, features); 6 prompts in 2
    # a fresh cache object on the same folder (a new session) must read, not recompute
    cache2 = EmbeddingCache(tmp_path, batch_size=4)
    assert torch.equal(cache2.image_embeddings(enc, grid), z)
    assert torch.equal(cache2.text_embeddings(enc, grid), t)
    u2, z3 = cache2.features(enc, grid)
    assert torch.equal(u2, u) and torch.equal(z3, z2)
    assert dict(enc.calls) == first and cache2.hits == 3 and cache2.misses == 0
    # another model (other weights) must not hit this entry
    other = ToyEncoder(seed=1)
    cache2.image_embeddings(other, grid)
    assert other.calls['image'] == 3


def test_corrupt_cache_file_is_recomputed(tmp_path, grid):
    enc, cache = ToyEncoder(), EmbeddingCache(tmp_path, batch_size=4)
    z = cache.image_embeddings(enc, grid)
    (path,) = (tmp_path / 'embeddings').glob('image-*.safetensors')
    good = path.read_bytes()
    for bad in (good[:len(good) // 2], good[:-4] + bytes(b ^ 0xFF for b in good[-4:]), b''):
        path.write_bytes(bad)
        calls = enc.calls['image']
        with pytest.warns(CacheCorruptionWarning, match='corrupt'):
            again = cache.image_embeddings(enc, grid)
        assert enc.calls['image'] > calls, "a corrupt file must not be used"
        assert torch.equal(again, z)
        with warnings.catch_warnings():
            warnings.simplefilter('error')                 # the rewritten file is whole: read without a warning
            assert torch.equal(cache.image_embeddings(enc, grid), z)
        assert enc.calls['image'] == calls + 3
    assert not list((tmp_path / 'embeddings').glob('*.tmp'))


def test_grid_mismatch_error(tmp_path, grid):
    cache = EmbeddingCache(tmp_path)
    D = Descriptor.from_encoders(ToyEncoder(ft=0.3), ToyEncoder(), grid, cache)
    assert D.check_grid(grid) is D
    reordered = Grid(grid.task, grid.images.flip(0), grid.prompts, grid.classnames)
    with pytest.raises(GridMismatchError, match='another order'): D.check_grid(reordered)
    with pytest.raises(GridMismatchError, match='other probes'): D.check_grid(make_grid(ToyTask(n=30, n_classes=3), 10, seed=1))
    with pytest.raises(GridMismatchError, match='other prompts'):
        D.check_grid(make_grid(ToyTask(n=30, n_classes=3), 10, seed=0, templates=['{}']))
    # the check survives a save/load round trip (it works from the manifest, without pixels)
    D.save(tmp_path / 'd')
    with pytest.raises(GridMismatchError, match='another order'): Descriptor.load(tmp_path / 'd').check_grid(reordered)


def test_float64_kept(tmp_path, grid):
    g = torch.Generator().manual_seed(0)
    Zf, Zb, T = (torch.randn(n, 7, generator=g, dtype=torch.float64) for n in (5, 5, 3))
    U = descriptor(Zf, Zb, T)
    assert U.dtype == torch.float64 and U.shape == (5, 3)
    assert affinity(Zf, T.float()).dtype == torch.float64
    assert unit(U).dtype == torch.float64 and descriptor_cosine(U, U).dtype == torch.float64
    assert affinity(Zf.float(), T.float()).dtype == torch.float32
    D = Descriptor.from_matrix(torch.randn(grid.N, grid.M, dtype=torch.float64), grid, {'model': 'a'}, {'model': 'b'})
    D.save(tmp_path / 'd64')
    back = Descriptor.load(tmp_path / 'd64')
    assert back.U.dtype == torch.float64 and torch.equal(back.U, D.U)


def test_nan_and_other_bad_input_errors():
    Z, T = torch.randn(4, 3), torch.randn(2, 3)
    Zn = Z.clone(); Zn[2, 0] = float('nan')
    with pytest.raises(ValueError, match='NaN or Inf in rows 2'): affinity(Zn, T)
    Ti = T.clone(); Ti[1, 1] = float('inf')
    with pytest.raises(ValueError, match='NaN or Inf in rows 1'): descriptor(Z, Z, Ti)
    with pytest.raises(ValueError, match='NaN or Inf'): descriptor(Zn, Z, T)
    with pytest.raises(ValueError, match='width mismatch'): affinity(Z, torch.randn(2, 4))
    with pytest.raises(ValueError, match='zero-norm rows 0'): affinity(torch.zeros(1, 3), T)
    with pytest.raises(ValueError, match='2-D'): affinity(Z[None], T)


def test_descriptor_files_missing_or_corrupt(tmp_path, grid):
    D = Descriptor.from_matrix(torch.randn(grid.N, grid.M), grid, {'model': 'a'}, {'model': 'b'})
    with pytest.raises(FileNotFoundError, match='from_encoders'): Descriptor.load(tmp_path / 'none')
    D.save(tmp_path / 'd')
    man = json.loads((tmp_path / 'd.json').read_text())
    man['prompts'][0][0] = 'tampered'
    (tmp_path / 'd.json').write_text(json.dumps(man))
    with pytest.raises(DescriptorFileError, match='recompute'): Descriptor.load(tmp_path / 'd')
    (tmp_path / 'd.json').unlink()
    with pytest.raises(FileNotFoundError, match='d.json is missing'): Descriptor.load(tmp_path / 'd')


def test_make_grid_too_many_probes():
    with pytest.raises(ValueError, match='has 30 images'): make_grid(ToyTask(n=30), 31)


def test_union_grid_protocol(tmp_path):
    ga, gb = make_grid(ToyTask('a', n_classes=3, seed=1), 6), make_grid(ToyTask('b', n_classes=3, seed=2), 4)
    gu = union_grid([ga, gb])
    assert (gu.N, gu.M) == (10, 6)
    cache = EmbeddingCache(tmp_path)
    base = {f: ToyEncoder(f, seed=s) for f, s in (('f', 0), ('h', 3))}
    ft = {(f, t): ToyEncoder(f, seed=s, ft=0.2 + 0.1 * i) for f, s in (('f', 0), ('h', 3)) for i, t in enumerate('ab')}
    grids = {'a': ga, 'b': gb}
    own = {k: Descriptor.from_encoders(e, base[k[0]], grids[k[1]], cache) for k, e in ft.items()}
    on_union = {k: Descriptor.from_encoders(e, base[k[0]], gu, cache) for k, e in ft.items()}
    for k in own: assert torch.allclose(on_union[k].restrict(grids[k[1]]).U, own[k].U, atol=1e-6)
    s = consistency_summary(own, on_union)
    assert s['same_task_pairs'] == 2 and s['cross_task_pairs'] == 2
    with pytest.raises(GridMismatchError, match='union_grid'): consistency_summary(own)

def test_the_cache_misses_after_any_change_of_weights_or_tokenizer(tmp_path):
    "In-place updates, `w.data = ...`, a replaced parameter and a swapped tokenizer each give new embeddings."
    from platonic_ta.encoders import family_encoder
    from platonic_ta.families import WordTokenizer, CONTEXT_LENGTH
    from platonic_ta import world
    enc = family_encoder('rn_w16')
    g = make_grid(world.list_tasks(controls=True)[0], 8, 0)
    cache = EmbeddingCache(tmp_path, progress=False)
    fresh = lambda: (cache.image_embeddings(enc, g), cache.text_embeddings(enc, g))
    z0, t0 = fresh(); misses = cache.misses
    z, t = fresh(); assert cache.misses == misses and torch.equal(z, z0)          # nothing changed: hits
    proj = enc.model.visual.attnpool.c_proj
    for change in (lambda: proj.weight.data.mul_(2),                                  # in place
                   lambda: setattr(proj.weight, 'data', proj.weight.data * 2),        # new storage
                   lambda: setattr(proj, 'weight', torch.nn.Parameter(proj.weight.detach() * 2))):   # a new parameter
        change(); z, _ = fresh()
        assert cache.misses > misses and not torch.allclose(z, z0), 'stale image embeddings after a weight change'
        misses, z0 = cache.misses, z
    enc.tokenizer = WordTokenizer(world.vocabulary()[::-1], CONTEXT_LENGTH)          # same words, other ids
    _, t = fresh()
    assert cache.misses == misses + 1 and not torch.allclose(t, t0), 'stale text embeddings after a tokenizer swap'
