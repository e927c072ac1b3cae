import hashlib
import numpy as np
import pytest
import torch
from platonic_ta import world

def test_same_seed_same_bytes_and_pinned_hash():
    a = world.load_task('weaves', 'train', 32).images
    world._render_task.cache_clear()
    b = world.load_task('weaves', 'train', 32).images
    assert torch.equal(a, b)
    # pinned: changes only when the world changes on purpose
    assert world.images_hash(world.load_task('weaves', 'test', 16).images)[:16] == '8b89b69ba74c0cda'

def test_splits_disjoint_and_balanced():
    tr, te = world.load_task('digits', 'train', 200), world.load_task('digits', 'test', 200)
    h = lambda d: {hashlib.sha1(x.numpy().tobytes()).hexdigest() for x in d.images}
    assert not h(tr) & h(te)
    assert np.bincount(tr.labels.numpy()).min() == 20

def test_errors_list_valid_names():
    with pytest.raises(KeyError, match='tasks are'): world.load_task('imagenet', 'train')
    with pytest.raises(KeyError, match='splits are'): world.load_task('digits', 'valid')
    with pytest.raises(ValueError): world.load_task('digits', 'train', 0)

def test_captions_use_the_vocabulary_and_prompts_too():
    vocab = set(world.vocabulary())
    _, caps = world.caption_corpus(200, seed=1)
    assert all(set(c.split()) <= vocab for c in caps)
    for t in world.list_tasks():
        d = world.load_task(t, 'test', 8)
        assert all(set(p.split()) <= vocab for ps in d.prompts() for p in ps)

def test_report_cli_writes_a_page(tmp_path):
    from platonic_ta.cli import main
    from platonic_ta.metrics import record_metrics
    record_metrics({'world.n_tasks': 8}, tmp_path / 'report')
    assert main(['report', '--out', str(tmp_path)]) == 0
    assert '`world.n_tasks`' in (tmp_path / 'report' / 'index.md').read_text()
