import json, os, time, warnings
from pathlib import Path
import pytest
import torch
from platonic_ta import zoo, world, encoders, checkpoints, families, training
from platonic_ta.heads import last_layer

def test_tokenizer_unknown_word_is_a_clear_error():
    tok = families.WordTokenizer(world.vocabulary(), 16)
    with pytest.raises(KeyError, match='vocabulary'): tok('a photo of a dog')
    assert tok('a red circle').argmax(1).item() == 4

def test_every_family_builds_and_exposes_features_and_last_layer():
    imgs = world.load_task('shapes', 'test', 4).images
    dims = set()
    for fam in families.FAMILIES:
        enc = encoders.family_encoder(fam)
        u, z = enc.features(imgs)
        torch.testing.assert_close(z, enc.model.encode_image(enc.preprocess(imgs)), rtol=1e-5, atol=1e-5)
        assert u.shape[1] == enc.last_layer().k and z.shape[1] == enc.last_layer().d
        dims.add(z.shape[1])
    assert len(dims) >= 3
    kinds = {encoders.family_encoder(f).last_layer().kind for f in families.FAMILIES}
    assert kinds == {'proj', 'linear', 'residual_head'}

def test_unknown_family_lists_the_zoo():
    with pytest.raises(KeyError, match='zoo families are'): encoders.family_encoder('vit_huge')

def test_build_resume_and_corrupt_file_is_rebuilt_not_used(tmp_path):
    kw = dict(zoo=tmp_path, pretrain_steps=3, finetune_steps=2, progress=False)
    zoo.build_zoo(['rn_w16'], ['tallies'], **kw)
    bp, fp = zoo.base_path(tmp_path, 'rn_w16'), zoo.ft_path(tmp_path, 'rn_w16', 'tallies')
    sha = json.loads(bp.with_suffix('.json').read_text())['sha256']
    mtime = bp.with_suffix('.safetensors').stat().st_mtime_ns
    zoo.build_zoo(['rn_w16'], ['tallies'], **kw)                      # resume: nothing rebuilt
    assert bp.with_suffix('.safetensors').stat().st_mtime_ns == mtime
    # truncate the fine-tune: detected, moved aside (not deleted), rebuilt
    st = fp.with_suffix('.safetensors'); st.write_bytes(st.read_bytes()[:100])
    with pytest.raises(zoo.ArtifactError): zoo.load_artifact(fp)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        zoo.build_zoo(['rn_w16'], ['tallies'], **kw)
    assert any('moved aside' in str(x.message) for x in w)
    assert list(fp.parent.glob('*.bad-*'))
    zoo.load_artifact(fp)                                           # valid again
    assert json.loads(bp.with_suffix('.json').read_text())['sha256'] == sha
    ft = zoo.load_finetune('rn_w16', 'tallies', zoo=tmp_path)
    base = zoo.load_base('rn_w16', tmp_path)
    assert ft.weights_hash() != base.weights_hash()
    with pytest.raises(KeyError, match=r"no fine-tune of 'rn_w16' on task 'weaves' with seed 0; it holds \['tallies_s0'\]"):
        zoo.load_finetune('rn_w16', 'weaves', zoo=tmp_path)      # an unknown task is named as such, with what exists
    with pytest.raises(KeyError, match='with seed 7'): zoo.load_finetune('rn_w16', 'tallies', seed=7, zoo=tmp_path)

def test_fine_tune_of_another_recipe_is_named_not_overwritten(tmp_path):
    kw = dict(zoo=tmp_path, pretrain_steps=2, progress=False)
    zoo.build_zoo(['rn_w16'], ['tallies'], finetune_steps=2, **kw)
    fp = zoo.ft_path(tmp_path, 'rn_w16', 'tallies')
    before = fp.with_suffix('.safetensors').read_bytes()
    with pytest.raises(ValueError, match=r'other settings \(steps: 2 -> 3\)'):
        zoo.build_zoo(['rn_w16'], ['tallies'], finetune_steps=3, **kw)
    assert fp.with_suffix('.safetensors').read_bytes() == before     # the saved fine-tune is kept as it was

def test_family_fine_tune_recipe_reaches_the_artefact(tmp_path):
    zoo.build_zoo(['siglip_map'], ['badges'], zoo=tmp_path, pretrain_steps=2, finetune_steps=2, progress=False)
    meta = json.loads(zoo.ft_path(tmp_path, 'siglip_map', 'badges').with_suffix('.json').read_text())
    assert meta['finetune'] == {**families.FINETUNE, **families.FAMILIES['siglip_map'].finetune, 'steps': 2}
    own = {k for k, v in families.FAMILIES['siglip_map'].finetune.items() if k != 'steps' and v != families.FINETUNE.get(k)}
    assert own and all(meta['finetune'][k] != families.FINETUNE.get(k) for k in own)   # the family's own settings, not the shared

def test_pretraining_is_deterministic_under_a_seed():
    a, la = training.pretrain('rn_w16', steps=3, corpus_size=256, progress=False)
    b, lb = training.pretrain('rn_w16', steps=3, corpus_size=256, progress=False)
    assert la == lb and a.weights_hash() == b.weights_hash()

def test_lora_touches_only_q_and_v_and_merges_away():
    enc = encoders.family_encoder('timm_avg')
    ft, tensors, losses = training.finetune(enc, 'badges', steps=2, n_train=64, progress=False)
    assert tensors and all(k.endswith(('lora_A.weight', 'lora_B.weight')) for k in tensors)   # peft's names: one LoRA path
    sd0, sd1 = enc.model.state_dict(), ft.model.state_dict()
    assert sd0.keys() == sd1.keys()
    changed = [k for k in sd0 if not torch.equal(sd0[k], sd1[k])]
    assert changed and all('qkv.weight' in k for k in changed)
    E = sd0[changed[0]].shape[0] // 3
    d = sd1[changed[0]] - sd0[changed[0]]
    assert d[E:2 * E].abs().max() == 0 and d[:E].abs().max() > 0

@pytest.mark.parametrize('name', ['ViT-B-32', 'RN50', 'ViT-B-16-SigLIP'])
def test_real_open_clip_architectures_random_init(name, recwarn):
    enc = checkpoints.load_open_clip(name, pretrained=None)
    if enc.tokenizer is None:   # SigLIP's tokenizer comes from the hub: offline and not cached, it is a warning, not a silent None
        assert any(issubclass(w.category, checkpoints.TokenizerMissingWarning) for w in recwarn.list)
        with pytest.raises(RuntimeError, match='tokenizer='): enc.encode_text(['a photo'])
    imgs = world.load_task('shapes', 'test', 2).images
    u, z = enc.features(imgs)
    ll = enc.last_layer()
    assert z.shape == (2, ll.d) and u.shape[1] == ll.k
    assert ll.kind == {'ViT-B-32': 'proj', 'RN50': 'linear', 'ViT-B-16-SigLIP': 'residual_head'}[name]

def test_real_checkpoint_missing_offline_says_how_to_pass_a_file(tmp_path):
    with pytest.raises(FileNotFoundError, match='local'):
        checkpoints.load_open_clip('RN50', pretrained=str(tmp_path / 'missing.safetensors'))
    with pytest.raises(KeyError, match='list_models'): checkpoints.load_open_clip('ViT-Nope')
    with pytest.raises(KeyError, match='tags'): checkpoints.load_open_clip('RN50', pretrained='no-such-tag')

def test_offline_is_a_switch_read_at_the_call(monkeypatch):
    "Explicit offline= beats HF_HUB_OFFLINE; the variable counts as it is at the call; huggingface_hub's flag follows."
    from huggingface_hub import constants as hc
    seen = []
    real = checkpoints.open_clip.create_model
    def spy(name, pretrained=None, **kw):
        seen.append(hc.HF_HUB_OFFLINE)
        return real(name, pretrained=None, **kw)
    monkeypatch.setattr(checkpoints.open_clip, 'create_model', spy)
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    checkpoints.load_open_clip('RN50', offline=False); checkpoints.load_open_clip('RN50')
    monkeypatch.delenv('HF_HUB_OFFLINE'); monkeypatch.delenv('TRANSFORMERS_OFFLINE', raising=False)
    checkpoints.load_open_clip('RN50'); checkpoints.load_open_clip('RN50', offline=True)
    assert seen == [False, True, False, True]
    monkeypatch.setattr(checkpoints.open_clip, 'create_model', real)
    t0 = time.time()   # offline and not cached: a clear error at once, no network retries
    with pytest.raises(FileNotFoundError, match='offline=False'):
        checkpoints.load_open_clip('RN50', pretrained='openai', offline=True)
    assert time.time() - t0 < 30

def test_artifact_json_that_is_not_utf8_is_named_as_invalid(tmp_path):
    "A flipped high bit in the manifest is a clear ArtifactError, not a UnicodeDecodeError from deep inside."
    from platonic_ta.zoo import save_artifact, load_artifact, ArtifactError
    p = tmp_path / 'a.safetensors'
    save_artifact(p, {'w': torch.zeros(2)}, {'kind': 'x'})
    js = p.with_suffix('.json'); b = bytearray(js.read_bytes()); b[0] ^= 0x80; js.write_bytes(bytes(b))
    with pytest.raises(ArtifactError, match='not valid JSON'): load_artifact(p)

@pytest.fixture(scope='module')
def small_vit_file(tmp_path_factory):
    "A ViT-S/32 built for 32 px, saved as safetensors: (encoder, path)."
    from safetensors.torch import save_file
    enc = checkpoints.load_open_clip('ViT-S-32-alt', image_size=32, init_seed=0)
    path = tmp_path_factory.mktemp('ckpt') / 'vit_s32_at32.safetensors'
    save_file({k: v.contiguous() for k, v in enc.model.state_dict().items()}, str(path))
    return enc, path

def test_image_size_builds_the_tower_at_that_size(small_vit_file):
    "The positional embedding is the 32 px grid's (one patch + class token), and 32 px images go through the tower as they are."
    enc, _ = small_vit_file
    assert tuple(enc.model.visual.positional_embedding.shape) == (2, 384) and enc.image_size == 32
    x = world.load_task('shapes', 'test', 3).images
    assert x.shape[-1] == 32 and enc.preprocess(x).shape[-1] == 32 and enc.encode_image(x).shape == (3, enc.embed_dim)
    assert tuple(enc.model.visual.image_size) == (32, 32)
    from platonic_ta.checkpoints import open_clip_encoder            # the command line builds the same model
    assert open_clip_encoder('ViT-S-32-alt', 'random', 32, init_seed=0).weights_hash() == enc.weights_hash()
    with pytest.raises(ValueError, match='its own input size'): checkpoints.load_open_clip('RN50', pretrained='openai', image_size=32)

def test_a_checkpoint_of_another_architecture_names_the_keys_not_a_download(small_vit_file, tmp_path):
    enc, path = small_vit_file
    again = checkpoints.load_open_clip('ViT-S-32-alt', pretrained=str(path), image_size=32)
    assert again.weights_hash() == enc.weights_hash()
    with pytest.raises(checkpoints.CheckpointError) as e:                  # another architecture: keys on both sides
        checkpoints.load_open_clip('RN50', pretrained=str(path), image_size=32)
    msg = str(e.value)
    assert all(w in msg for w in ('missing keys', 'transformer.resblocks.', 'unexpected keys', 'visual.class_embedding', 'other shapes'))
    assert 'could not load' not in msg and 'network' not in msg     # not reported as a failed download
    with pytest.raises(checkpoints.CheckpointError, match=r'other shapes .*visual\.positional_embedding.*\(2, 384\) in the file'):
        checkpoints.load_open_clip('ViT-S-32-alt', pretrained=str(path))          # the same architecture at its own size (224 px)
    (tmp_path / 'bad.safetensors').write_bytes(b'\x00' * 64)
    with pytest.raises(checkpoints.CheckpointError, match='corrupt') as e: checkpoints.load_open_clip('RN50', pretrained=str(tmp_path / 'bad.safetensors'))
    assert 'could not load' not in str(e.value) and 'network' not in str(e.value)
