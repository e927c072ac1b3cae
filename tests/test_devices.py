"Device and dtype: banks, scorers, sliders, the adapter and fine-tunes follow the target (checked on the CPU with float64 and bfloat16)."
import copy
import pytest, torch
from platonic_ta import world, zoo, encoders, families, training
from platonic_ta.grids import make_grid
from platonic_ta.composition import OperatorBank
from platonic_ta.scoring import Scorer
from platonic_ta.widgets import make_sliders
from platonic_ta.adapter import fit_adapter


@pytest.fixture(scope='module')
def setup():
    family = zoo.MICRO['families'][0]
    task = zoo.MICRO['tasks'][0]
    base = encoders.family_encoder(family)                      # a fresh tower: placement, not accuracy, is checked here
    grid = make_grid(task, 16, seed=0)
    U = torch.randn(grid.N, grid.M, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1
    test = world.load_task(task, 'test', 48)
    return base, task, grid, U, test


def as_dtype(enc, dtype):
    out = copy.deepcopy(enc)
    out.model.to(dtype)
    out.name = f'{enc.name}-{str(dtype).split(".")[-1]}'
    return out


def params_dtypes(enc):
    return {p.dtype for p in enc.model.visual.parameters() if p.is_floating_point()}


@pytest.mark.parametrize('dtype', [torch.float64, torch.bfloat16])
def test_bank_scorer_sliders_follow_the_target(setup, dtype):
    base, task, grid, U, test = setup
    target = as_dtype(base, dtype)
    assert target.dtype == dtype and target.preprocess(test.images[:2]).dtype == dtype
    z = target.encode_image(test.images[:4])
    assert z.dtype == torch.float32 and z.device.type == 'cpu'   # embeddings come back as float32 CPU rows
    key = ('src', task)
    bank = OperatorBank.build(target, [grid], {key: U})
    edited = bank.apply({key: 1.0})
    assert params_dtypes(edited) == {dtype} and edited.device == target.device   # the edit lands in the model's dtype
    assert not torch.equal(edited.encode_image(test.images), target.encode_image(test.images))
    sc = Scorer(bank, {task: test}, target)
    assert sc.device == target.device and all(v.device == target.device for v in sc.sets[task].values() if v is not None)
    predicted = sc.predict({key: 1.0})[task]
    actual = encoders.predict(edited, test.images, encoders.class_embeddings(edited, test.classnames, test.templates))
    agree = (predicted.cpu() == actual).double().mean().item()
    # float64: the scorer's closed form is the edited model, bit for bit up to rounding; bfloat16 rounds the folded weights
    assert agree >= (1.0 if dtype == torch.float64 else 0.8), agree
    sl = make_sliders(bank, sc, ['src'], [task], widget=False)
    rows, bars = sl.update(dict(sl.initial_state(), alphas={task: 1.0}))
    assert bars['edited'][0] == pytest.approx(sc.score({key: 1.0})[task])


def test_adapter_and_finetune_follow_the_target(setup):
    base, task, grid, U, test = setup
    dtype = torch.bfloat16
    target = as_dtype(base, dtype)
    fit = fit_adapter(target, [(grid, U, 1.0)], steps=2, progress=False)
    assert params_dtypes(fit.encoder) == {dtype} and fit.encoder.device == target.device
    assert all(torch.isfinite(torch.tensor(fit.losses))) and fit.loss_final == fit.loss_final
    ft, tensors, losses = training.finetune(target, task, n_train=32, progress=False,
                                       config=families.FinetuneConfig(steps=2, batch=8, distill_n=8))
    assert params_dtypes(ft) == {dtype} and ft.device == target.device and all(map(lambda x: x == x, losses))
    assert ft.weights_hash() != target.weights_hash()
