"What a new user runs into, each as it was reported: silent results and crashes on the documented paths."
import os, stat
import numpy as np
import pytest
import torch
from platonic_ta import world
from platonic_ta.world import TaskData
from platonic_ta.grids import make_grid
from platonic_ta.encoders import family_encoder, zero_shot_accuracy
from platonic_ta.checkpoints import open_clip_encoder, check_device, CheckpointError
from platonic_ta.composition import OperatorBank
from platonic_ta.factorization import SolveConfig
from platonic_ta.edits import save_edited
from platonic_ta.families import FinetuneConfig
from platonic_ta.training import finetune
from platonic_ta.tasks import read_image, folder_images
from platonic_ta.guards import AllocationError
from platonic_ta.scoring import Scorer

TASK = 'colours'


@pytest.fixture(scope='module')
def bank():
    enc = family_encoder('vit_w96')
    g = make_grid(world.load_task(TASK, 'train', 64), 16, seed=0, n_context=2)
    U = 0.2 * torch.randn(g.N, g.M, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return OperatorBank.build(enc, [g], {('src', TASK): U})


def test_16_bit_png_decodes_to_its_values(tmp_path):
    from PIL import Image
    ramp = (np.arange(256, dtype=np.uint16).reshape(16, 16) * 256)
    Image.fromarray(ramp).save(tmp_path / 'x.png')
    x = read_image(tmp_path / 'x.png')
    assert x.dtype == torch.uint8 and len(torch.unique(x)) > 200 and int(x.max()) < 256   # not 255 everywhere
    assert folder_images(tmp_path).shape == (1, 3, 16, 16)


def test_a_flipped_byte_in_an_edited_checkpoint_is_refused(tmp_path):
    base = open_clip_encoder('ViT-S-32-alt', 'random', 32)
    from platonic_ta.edits import fold_operator
    edited = fold_operator(base, 0.01 * torch.eye(base.embed_dim, dtype=torch.float64))
    path = save_edited(edited, tmp_path / 'e.safetensors')
    assert open_clip_encoder('ViT-S-32-alt', str(path), 32).weights_hash() == edited.weights_hash()   # intact: loads
    raw = bytearray(path.read_bytes()); raw[-100] ^= 0x01; path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match='is damaged'): open_clip_encoder('ViT-S-32-alt', str(path), 32)


def test_overflowing_coefficients_are_refused(bank):
    with pytest.raises(ValueError, match='not finite'): bank.apply({('src', TASK): 1e60})
    enc = family_encoder('vit_w96')
    with torch.no_grad(): enc.last_layer().weight.fill_(float('inf'))
    with pytest.raises(ValueError, match='NaN or Inf'): zero_shot_accuracy(enc, world.load_task(TASK, 'test', 8))


def test_hand_made_task_data_with_labels_outside_its_classes_is_refused(bank):
    d = world.load_task(TASK, 'test', 8)
    bad = TaskData('mine', 'test', d.images, d.labels + len(d.classnames), d.classnames, d.templates)
    with pytest.raises(ValueError, match='labels run from'): zero_shot_accuracy(family_encoder('vit_w96'), bad)
    with pytest.raises(ValueError, match='labels run from'): Scorer(bank, {TASK: bad})
    bad_train = TaskData('mine', 'train', d.images, d.labels + 99, d.classnames, d.templates)
    with pytest.raises(ValueError, match='labels run from'): make_grid(bad_train, 4, context=None)


def test_a_batch_beyond_memory_is_refused_before_it_is_allocated():
    with pytest.raises(AllocationError, match='smaller batch'):
        finetune(family_encoder('vit_w96'), TASK, steps=1, n_train=8, progress=False, config=FinetuneConfig(batch=10 ** 9))


def test_devices_the_library_does_not_run_on_are_refused():
    for dev in ('mps', 'meta'):
        with pytest.raises(ValueError, match="'cpu' or 'cuda' only"): check_device(dev)
        with pytest.raises(ValueError, match="'cpu' or 'cuda' only"): open_clip_encoder('ViT-S-32-alt', 'random', 32, device=dev)


def test_saved_tensor_files_follow_the_umask(bank, tmp_path):
    mask = os.umask(0o022); os.umask(mask)
    want = 0o666 & ~mask
    js = bank.save(tmp_path / 'b')
    paths = [js, js.with_suffix('.safetensors'), save_edited(bank.apply({('src', TASK): 0.1}), tmp_path / 'e')]
    for p in paths: assert stat.S_IMODE(p.stat().st_mode) == want, p


def test_finetune_with_task_data_says_to_pass_a_name():
    d = world.load_task(TASK, 'train', 8)
    with pytest.raises(TypeError) as e: finetune(family_encoder('vit_w96'), d, steps=1, progress=False)
    assert 'a task is named by a string' in str(e.value) and len(str(e.value)) < 400   # no tensor printed


def test_a_grid_without_context_warns_when_a_bank_is_built_on_it():
    from platonic_ta.grids import ContextWarning
    g = make_grid(world.load_task(TASK, 'train', 64), 16, seed=0, context=None)
    with pytest.warns(ContextWarning, match='may cost other tasks'):
        OperatorBank.build(family_encoder('vit_w96'), [g], {('src', TASK): torch.randn(16, g.M, dtype=torch.float64)})


def test_a_task_of_sound_by_name_makes_its_grid_from_the_audio_world():
    g = make_grid('events', 4, context=None)
    assert g.task == 'events' and g.N == 4
    assert make_grid('events', 4, n_context=2).sources[1:] == [t for t in ('genres', 'streets')]   # the other audio edit tasks
