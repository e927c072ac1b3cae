"The audio world, its front end and audio encoders (open_clip spectrogram towers, a real CLAP architecture) on the shared API."
import copy, json, math
import pytest, torch
from platonic_ta import audio_world, audio_sounds
from platonic_ta.audio_frontend import FrontEnd, LogMel
from platonic_ta.audio_zoo import (AudioFamilySpec, AudioEncoder, ClapDual, audio_family_encoder, audio_tokenizer,
                                   create_audio_model, pretrain_audio, finetune_audio, load_clap, build_audio_zoo,
                                   load_audio_base, load_audio_finetune)
from platonic_ta.grids import make_grid, union_grid
from platonic_ta.cache import EmbeddingCache
from platonic_ta.descriptors import Descriptor
from platonic_ta.edits import fold_operator, fold_rel_err
from platonic_ta.composition import OperatorBank
from platonic_ta.heads import last_layer, image_features

EDIT = audio_world.list_tasks(controls=False)


def _tiny_clap(tmp_path, seed=0):
    "A random-init transformers ClapModel of CLAP's real architecture (HTSAT + RoBERTa), saved as a local folder."
    from transformers import ClapConfig, ClapAudioConfig, ClapTextConfig, ClapModel
    tok = audio_tokenizer()
    ac = ClapAudioConfig(spec_size=32, num_mel_bins=16, patch_size=4, patch_stride=4, patch_embeds_hidden_size=16,
                         depths=[1, 1], num_attention_heads=[2, 2], window_size=4, hidden_size=32, projection_dim=12,
                         enable_fusion=False)
    tc = ClapTextConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=tok.context_length + 2, pad_token_id=tok.PAD,
                        projection_dim=12, type_vocab_size=1)
    torch.manual_seed(seed)
    clap = ClapModel(ClapConfig(text_config=tc.to_dict(), audio_config=ac.to_dict(), projection_dim=12)).eval()
    clap.save_pretrained(tmp_path / 'clap')
    return clap, tmp_path / 'clap'


@pytest.fixture(scope='module')
def clap_enc(tmp_path_factory):
    clap, path = _tiny_clap(tmp_path_factory.mktemp('clap'))
    enc = load_clap(path, tokenizer=audio_tokenizer(), frontend=FrontEnd(layout='clap', n_mels=16))
    return clap, enc


def test_world_shapes_determinism_and_grounding():
    for t in audio_world.list_tasks():
        d = audio_world.load_task(t, 'train', 8)
        assert d.clips.dtype == torch.uint8 and tuple(d.clips.shape) == (8, 1, 1, audio_sounds.CLIP)
        assert torch.equal(d.clips, audio_world.load_task(t, 'train', 8).clips)
        assert all(set(p.split()) <= set(audio_world.vocabulary()) for c in d.prompts() for p in c)
    assert len(EDIT) >= 3 and audio_world.list_tasks(controls=True)
    for t in EDIT: assert 0 < audio_world.TASKS[t].grounding < 1
    # grounding off: no caption uses an edit task's words; on at 1: every matching clip's caption does
    spec = audio_world.TASKS[EDIT[0]]
    old = spec.grounding
    try:
        spec.grounding = 0.0
        assert audio_world.grounding_counts(300)[EDIT[0]][1] == 0
        spec.grounding = 1.0
        shown, named = audio_world.grounding_counts(300)[EDIT[0]]
        assert shown > 0 and named >= shown * 0.85       # the word itself is sometimes swapped (caption noise)
    finally: spec.grounding = old


def test_frontend_tone_band_and_layouts():
    lm = LogMel(FrontEnd())
    t = torch.arange(audio_sounds.CLIP) / audio_sounds.SR
    lo, hi = (lm.log_mel(torch.sin(2 * math.pi * f * t)[None])[0].mean(1).argmax().item() for f in (200.0, 2000.0))
    assert lo < hi
    clips = audio_world.load_task(EDIT[0], 'train', 3).clips
    assert lm(clips).shape == (3,) + FrontEnd().shape
    with pytest.raises(ValueError, match='samples'): lm(torch.zeros(2, 3, 8, 8, dtype=torch.uint8))


def test_real_clap_architecture_wrapper_matches_clapmodel(clap_enc):
    clap, enc = clap_enc
    clips = audio_world.load_task(EDIT[0], 'train', 4).clips
    x = enc.preprocess(clips)
    with torch.no_grad():
        ref_a = clap.get_audio_features(input_features=x)
        ref_a = getattr(ref_a, 'pooler_output', ref_a)
        ids = enc.tokenizer(['a low pitch', 'the sound of a barko'])
        ref_t = clap.get_text_features(input_ids=ids, attention_mask=(ids != 0).long())
        ref_t = getattr(ref_t, 'pooler_output', ref_t)
    torch.testing.assert_close(torch.nn.functional.normalize(enc.encode_image(clips), dim=-1), ref_a, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.nn.functional.normalize(enc.encode_text(['a low pitch', 'the sound of a barko']), dim=-1),
                               ref_t, rtol=1e-5, atol=1e-6)
    ll = enc.last_layer()
    assert (ll.kind, ll.path) == ('linear', 'audio_projection.linear2')


def test_fold_into_real_clap_architecture_is_exact(clap_enc):
    _, enc = clap_enc
    clips = audio_world.load_task(EDIT[0], 'train', 6).clips
    d = enc.embed_dim
    W = 0.3 * torch.randn(d, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert fold_rel_err(enc.model, enc.preprocess(clips), W) <= 1e-5
    edited = fold_operator(enc, W)
    z = enc.encode_image(clips).double()
    got = edited.encode_image(clips).double()
    want = z @ (torch.eye(d, dtype=torch.float64) + W).T
    assert ((got - want).norm(dim=-1) / want.norm(dim=-1)).max().item() <= 1e-5
    assert isinstance(edited, AudioEncoder) and edited.weights_hash() != enc.weights_hash()


def test_descriptor_bank_and_fold_on_real_clap(clap_enc, tmp_path):
    _, enc = clap_enc
    cache = EmbeddingCache(tmp_path)
    grids = {t: make_grid(audio_world.load_task(t, 'train', 24), 12, seed=0, context=None) for t in EDIT[:2]}
    d = enc.embed_dim
    g = torch.Generator().manual_seed(2)
    edits = {t: fold_operator(enc, 0.2 * torch.randn(d, d, generator=g, dtype=torch.float64)) for t in grids}
    descs = {('edit', t): Descriptor.from_encoders(edits[t], enc, grids[t], cache) for t in grids}
    for D in descs.values(): assert D.U.abs().max() > 0 and D.shape == (12, len(grids[D.task].classnames))
    bank = OperatorBank.build(enc, grids, descs, cache=cache)
    assert sorted(bank.keys()) == sorted(descs)
    W = bank.combine({k: 0.5 for k in descs})
    out = bank.apply({k: 0.5 for k in descs})
    clips = grids[EDIT[0]].images
    z = enc.encode_image(clips).double()
    want = z @ (torch.eye(d, dtype=torch.float64) + W.double()).T
    got = out.encode_image(clips).double()
    assert ((got - want).norm(dim=-1) / want.norm(dim=-1)).max().item() <= 1e-5
    assert cache.misses > 0 and Descriptor.from_encoders(edits[EDIT[0]], enc, grids[EDIT[0]], cache).grid_hash == descs[('edit', EDIT[0])].grid_hash


TINY = [AudioFamilySpec('t_vit', 16, 'open_clip', dict(layers=1, width=32, head_width=16, patch_size=8, image_size=(32, 64)),
                        dict(width=32, heads=2, layers=1), batch=8),
        AudioFamilySpec('t_clap', 12, 'clap', dict(spec_size=32, num_mel_bins=16, patch_size=4, patch_stride=4,
                        patch_embeds_hidden_size=16, depths=[1, 1], num_attention_heads=[2, 2], window_size=4, hidden_size=32),
                        dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32),
                        frontend=FrontEnd(layout='clap', n_mels=16), batch=8)]


@pytest.mark.parametrize('spec', [pytest.param(TINY[0], marks=pytest.mark.slow), TINY[1]], ids=lambda s: s.name)
def test_pretrain_and_lora_finetune_touch_only_the_audio_tower(spec):   # the open_clip tower is also fine-tuned by the build test
    base, losses = pretrain_audio(spec, steps=2, corpus_size=16, progress=False)
    assert all(math.isfinite(l) for l in losses)
    ft, tensors, _ = finetune_audio(base, EDIT[0], steps=2, n_train=16, batch=8, distill_n=8, progress=False)
    sb, sf = base.model.state_dict(), ft.model.state_dict()
    assert list(sb) == list(sf)
    changed = [k for k in sb if not torch.equal(sb[k], sf[k])]
    assert changed and all(k.startswith('visual.') for k in changed)
    assert all(('q' in k or 'query' in k or 'v' in k or 'value' in k) for k in tensors)
    assert ft.weights_hash() != base.weights_hash()


def test_build_and_load_audio_zoo(tmp_path):
    spec = TINY[0]
    small = dict(steps=1, n_train=8, distill_n=8, batch=4)
    z = build_audio_zoo([spec], [EDIT[0]], zoo=tmp_path / 'az', pretrain_steps=2, finetune=small, progress=False)
    base = load_audio_base(spec, z)
    ft = load_audio_finetune(spec.name, EDIT[0], 0, z, base)
    assert ft.weights_hash() != base.weights_hash()
    files = {p: p.stat().st_mtime_ns for p in z.rglob('*.safetensors')}
    assert build_audio_zoo([spec], [EDIT[0]], zoo=z, pretrain_steps=2, finetune=small, progress=False) == z   # resumes: nothing redone
    assert {p: p.stat().st_mtime_ns for p in z.rglob('*.safetensors')} == files
    runs = json.loads((z / 'BUILDS.json').read_text())
    assert len(runs) == 2 and all(r['cpu_seconds'] > 0 and r['wall_seconds'] > 0 for r in runs)
    with pytest.raises(ValueError, match='another zoo folder'):
        build_audio_zoo([spec], [EDIT[0]], zoo=z, pretrain_steps=3, finetune=small, progress=False)
    with pytest.raises(ValueError, match='another zoo folder'):
        build_audio_zoo([spec], [EDIT[0]], zoo=z, pretrain_steps=2, finetune=dict(small, steps=2), progress=False)
    with pytest.raises(KeyError, match='unknown fine-tune settings'):
        build_audio_zoo([spec], [EDIT[0]], zoo=z, pretrain_steps=2, finetune=dict(stepz=2), progress=False)


def test_load_clap_refuses_folders_without_safetensors(tmp_path):
    with pytest.raises(FileNotFoundError, match='not a transformers CLAP folder'): load_clap(tmp_path)
    (tmp_path / 'config.json').write_text('{}')
    with pytest.raises(FileNotFoundError, match='no .safetensors'): load_clap(tmp_path)


def test_shipped_audio_zoo_is_todays_and_loads():
    from platonic_ta.audio_zoo import shipped_audio_zoo_dir, get_audio_zoo, AUDIO_FAMILIES, audio_recipe
    from platonic_ta.zoo import load_artifact, base_path, ft_path
    d = shipped_audio_zoo_dir()
    man = json.loads((d / 'MANIFEST.json').read_text())
    assert man['world'] == audio_world.fingerprint(), 'the audio world changed since the audio zoo was shipped: rebuild and ship it'
    assert man['families'] == list(AUDIO_FAMILIES) and man['tasks'] == EDIT and man['seeds']
    assert man['command'].startswith('platonic_ta.audio_zoo.build_audio_zoo(')
    assert man['build_wall_seconds'] > 0 and man['build_cpu_seconds'] > 0
    assert man['bytes'] == sum(f.stat().st_size for f in d.rglob('*') if f.is_file() and f.name != 'MANIFEST.json')
    Z = get_audio_zoo('shipped')
    assert Z.families == list(AUDIO_FAMILIES) and Z.tasks == EDIT
    for f in Z.families:
        assert load_artifact(base_path(d, f))[1]['steps'] == AUDIO_FAMILIES[f].steps
        want = json.loads(json.dumps(audio_recipe(f)))
        for t in Z.tasks:
            for s in man['seeds']: assert load_artifact(ft_path(d, f, t, s))[1]['finetune'] == want
    base = Z.base(Z.families[-1])
    ft = Z.finetune(Z.families[-1], EDIT[0], 0, base)
    clips = audio_world.load_task(EDIT[0], 'test', 4).clips
    assert not torch.equal(base.encode_image(clips), ft.encode_image(clips))


def test_ship_audio_zoo_refuses_an_incomplete_zoo(tmp_path):
    from platonic_ta.audio_zoo import ship_audio_zoo
    with pytest.raises(FileNotFoundError, match='not a complete audio zoo'): ship_audio_zoo(tmp_path / 'az', dest=tmp_path / 'out')
    assert not (tmp_path / 'out').exists()


def test_audio_grids_take_corpus_rows_and_held_out_clips():
    "Context grids with caption-corpus rows, and a held-out split that leaves out every clip a grid holds, on audio tasks."
    from platonic_ta.grids import zoo_grids, CORPUS_SEED
    from platonic_ta.zoo_banks import heldout_split
    tasks = [audio_world.load_task(t, 'train') for t in EDIT[:2]]
    corpus = audio_world.caption_corpus(6, seed=CORPUS_SEED)[0]
    grids = zoo_grids(tasks, 8, 0, 3, corpus=corpus)
    for t, g in grids.items():
        assert g.N == 8 + 3 + 6 and torch.equal(g.images[-6:], corpus) and g.probe_index is not None
    with pytest.raises(ValueError, match="the tasks'"): zoo_grids(tasks, 8, corpus=torch.zeros(2, 3, 32, 32, dtype=torch.uint8))
    ho = heldout_split(EDIT[0], list(grids.values()), 20, source=audio_world)
    assert isinstance(ho, audio_world.AudioTaskData) and len(ho) == 20
    held = {h for g in grids.values() for h in g.probe_hashes}
    from platonic_ta.grids import image_hashes
    assert not held & set(image_hashes(ho.images))
    with pytest.raises(KeyError, match='unknown audio task'): heldout_split('shapes', source=audio_world)


def test_audio_recipe_reads_a_family_s_own_overrides():
    "The recorded settings: the audio defaults, then a family's overrides (a registered name or a spec), then changes."
    from platonic_ta.audio_zoo import audio_recipe, AUDIO_FINETUNE, AUDIO_FAMILIES
    import dataclasses
    spec = dataclasses.replace(AUDIO_FAMILIES['cnn_rn16'], name='mine', finetune=dict(steps=7, distill=1.5))
    r = audio_recipe(spec, lr=3e-3)
    assert (r['steps'], r['distill'], r['lr'], r['batch'], r['n_train']) == (7, 1.5, 3e-3, AUDIO_FINETUNE['batch'], None)
    assert audio_recipe('cnn_rn16')['steps'] == {**AUDIO_FINETUNE, **AUDIO_FAMILIES['cnn_rn16'].finetune}['steps']
    assert audio_recipe(None, n_train=64)['n_train'] == 64 and 'off_task' in audio_recipe()
    with pytest.raises(KeyError, match='unknown fine-tune settings'): audio_recipe(None, stpes=3)
    with pytest.raises(ValueError, match='out of range'): audio_recipe(None, rank=0)
