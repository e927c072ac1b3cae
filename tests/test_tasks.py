"Tasks from anywhere: an image folder becomes a task every stage takes; the whole transfer path through the public API."
import pytest, torch, torch.nn.functional as F
import open_clip
from platonic_ta import world
from platonic_ta.tasks import make_image_folder, register_folder_task, folder_task, register_tensor_task
from platonic_ta.grids import make_grid, image_hashes
from platonic_ta.cache import EmbeddingCache
from platonic_ta.descriptors import Descriptor
from platonic_ta.composition import OperatorBank
from platonic_ta.zoo_banks import heldout_split
from platonic_ta.edits import save_edited, load_edited
from platonic_ta.families import FinetuneConfig
from platonic_ta.training import finetune
from platonic_ta.encoders import zero_shot_accuracy
from platonic_ta.checkpoints import open_clip_encoder


@pytest.fixture
def folder_task_name(tmp_path):
    folder = make_image_folder(tmp_path / 'squares', n_per_class=8, size=16)
    name = 'pt_squares'
    register_folder_task(name, folder, overwrite=True, progress=False)
    yield name, folder
    world.unregister_task(name)


def test_a_folder_task_goes_through_every_stage_that_takes_a_name(folder_task_name):
    name, folder = folder_task_name
    train, test = world.load_task(name, 'train'), world.load_task(name, 'test')
    assert (len(train), len(test)) == (18, 6)
    assert set(test.labels.tolist()) == {0, 1, 2} and set(train.labels.tolist()) == {0, 1, 2}
    g = make_grid(name, 10, seed=0)
    assert g.task == name and g.N == 10 and g.M == 3
    held = heldout_split(name, exclude=g)
    assert len(held) == 8 and not set(g.probe_hashes) & set(image_hashes(held.images))


def test_the_loader_decodes_only_what_is_asked(tmp_path):
    folder = make_image_folder(tmp_path / 'f', n_per_class=20, size=8)
    t = folder_task('lazy', folder, progress=False, batch=4)
    t('train', 5)
    assert sum(len(b) for b in t._done['train']) == 5 and not t._done['test']
    full = t('train')
    assert len(full) == t.split_size('train') == 45
    assert torch.equal(full.images[:5], t('train', 5).images)


def test_bad_folders_and_bad_tensors_say_what_is_wrong(tmp_path):
    (tmp_path / 'empty').mkdir()
    with pytest.raises(ValueError, match='no class folders'): folder_task('x', tmp_path / 'empty')
    f = make_image_folder(tmp_path / 'g', n_per_class=3, size=6)
    (f / 'blue' / '0001.png').write_bytes(b'\x89PNG broken')
    t = folder_task('x', f, progress=False, test_frac=0.5)
    with pytest.raises(ValueError, match='0001.png'): t('train'), t('test')
    with pytest.raises(ValueError, match='one label per image'):
        register_tensor_task('x', torch.zeros(3, 4, 4, 3, dtype=torch.uint8), [0, 1], ['a', 'b'])
    with pytest.raises(ValueError, match='task of the world'):
        register_folder_task(world.list_tasks()[0], make_image_folder(tmp_path / 'h', n_per_class=2, size=6))


@pytest.mark.slow
def test_transfer_vit_b32_to_rn50_through_the_public_api(folder_task_name, tmp_path, cache_dir):
    "Folder -> task -> fine-tune -> descriptor -> bank -> edit -> save -> open_clip reload -> zero-shot, random-init open_clip."
    name, _ = folder_task_name
    base = open_clip_encoder('ViT-B-32', 'random', image_size=32)
    ft, _, losses = finetune(base, name, progress=False, config=FinetuneConfig(steps=3, batch=8, distill=0.0))
    assert ft.weights_hash() != base.weights_hash() and all(map(torch.isfinite, map(torch.tensor, losses)))
    cache = EmbeddingCache(progress=False)
    grid = make_grid(name, 12, seed=0)
    D = Descriptor.from_encoders(ft, base, grid, cache)
    D = Descriptor.load(D.save(tmp_path / 'desc'))
    assert D.shape == (12, 3) and D.U.abs().max() > 0

    target = open_clip_encoder('RN50', 'random', image_size=32, init_seed=1)
    bank = OperatorBank.build(target, [grid], {('ViT-B-32', name): D}, cache=cache)
    bank = OperatorBank.load(bank.save(tmp_path / 'bank'), target=target)
    edited = bank.apply({('ViT-B-32', name): 1.0})
    path = save_edited(edited, tmp_path / 'edited.safetensors')

    test = world.load_task(name, 'test')
    z0, z1 = target.encode_image(test.images), edited.encode_image(test.images)
    assert not torch.allclose(z0, z1)                                   # the edit moved the embeddings
    reloaded = open_clip.create_model('RN50', pretrained=str(path), force_image_size=32).eval()
    with torch.no_grad(): z2 = reloaded.encode_image(edited.preprocess(test.images))
    torch.testing.assert_close(z2, z1)                                  # open_clip loads the edit back exactly
    again = load_edited(target, path)
    assert again.weights_hash() == edited.weights_hash()
    accs = [zero_shot_accuracy(e, test) for e in (target, edited, again)]
    assert all(0.0 <= a <= 1.0 for a in accs) and accs[1] == accs[2]


def test_a_registered_task_through_the_zoo_helpers(tmp_path):
    "register_* -> build_zoo (a micro zoo family, few steps) -> get_zoo -> finetune, make_grid, heldout_split, zoo_descriptors."
    from platonic_ta import zoo, families, training
    from platonic_ta.descriptors import zoo_descriptors
    fams = zoo.MICRO['families'][:1]                                                  # one family keeps it quick
    name = 'pt_tinted'
    folder = make_image_folder(tmp_path / 'tinted', n_per_class=6, size=16)          # red, green, blue: words of the world
    register_folder_task(name, folder, templates=['a {} object'], progress=False)
    try:
        zdir = tmp_path / 'zoo'
        zoo.build_zoo(fams, [name], zoo=zdir, pretrain_steps=2, finetune_steps=2, progress=False)
        Z = zoo.get_zoo(str(zdir))
        assert Z.families == [f for f in families.FAMILIES if f in fams] and Z.tasks == [name]
        base = Z.base(fams[0])
        ft, _, losses = training.finetune(base, name, steps=2, distill=0.0, progress=False)
        assert len(losses) == 2 and ft.weights_hash() != base.weights_hash()
        grid = make_grid(name, 6, seed=0)
        held = heldout_split(name, exclude=grid)
        assert len(held) == world.load_task(name, 'train').images.shape[0] - 6
        descs = zoo_descriptors(Z, {name: grid}, EmbeddingCache(tmp_path / 'cache', progress=False), progress=False)
        assert set(descs) == {(f, name, 0) for f in fams} and all(D.shape == (6, 3) and D.U.abs().max() > 0 for D in descs.values())
        # the same name with other images: never resumed from the old fine-tunes
        register_folder_task(name, make_image_folder(tmp_path / 'other', n_per_class=6, size=16, seed=1),
                             templates=['a {} object'], overwrite=True, progress=False)
        with pytest.raises(ValueError, match='other data under the task name'):
            zoo.build_zoo(fams, [name], zoo=zdir, pretrain_steps=2, finetune_steps=2, progress=False)
        # prompts in words the families cannot read: named before any pretraining; another process's workers: refused
        register_folder_task(name, folder, overwrite=True, progress=False)                # default templates 'a photo of a {}.'
        for kw, says in ((dict(workers=1), r"does not know \['blue\.'"), (dict(workers=2), 'workers=1')):
            with pytest.raises((KeyError, ValueError), match=says):
                zoo.build_zoo(zoo.MICRO['families'], [name], zoo=tmp_path / 'none', pretrain_steps=2, progress=False, **kw)
        assert not (tmp_path / 'none').exists() or not list((tmp_path / 'none').glob('*/base.*'))
        with pytest.raises(KeyError, match=f"task '{name}'.*does not know"): training.finetune(base, name, steps=1, progress=False)
    finally:
        world.unregister_task(name)
