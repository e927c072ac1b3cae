"""The transfer path on a GPU (prints numbers; exits 0 with "skipped: no CUDA" where there is none).

The demo's path on the shipped zoo: a source family's fine-tune gives a descriptor on a task's grid, the bank
solves it for a target family, the scorer predicts the edited target's accuracy, the edit is folded in, and the
adapter and a fine-tune run a few steps. It runs once on the CPU (float32, the reference) and once on DEVICE in
DTYPE, prints both, and fails (exit 1) when the accuracies or the operator disagree beyond the dtype's rounding
or when something lands on the wrong device or dtype.

    .venv/bin/python bench/gpu_check.py                      # cuda, float32 (skipped without CUDA)
    .venv/bin/python bench/gpu_check.py --dtype bfloat16     # half precision on the GPU
    .venv/bin/python bench/gpu_check.py --device cpu --dtype float64   # the same checks on a CPU
"""
import argparse, sys, tempfile, time
import torch


def run(where, dtype, a, zoo, world, cache_dir):
    "One pass of the transfer path with every model on `where` in `dtype`; a dict of results and timings."
    from platonic_ta.grids import make_grid
    from platonic_ta.cache import EmbeddingCache
    from platonic_ta.descriptors import Descriptor
    from platonic_ta.composition import OperatorBank
    from platonic_ta.scoring import Scorer
    from platonic_ta.adapter import fit_adapter
    from platonic_ta import encoders, families, training
    Z = zoo.get_zoo('full', build=False)
    src, tgt = Z.families[0], Z.families[1]
    task = a.task or Z.tasks[0]
    base, target = Z.base(src), Z.base(tgt)
    ft = Z.finetune(src, task, base=base)
    for e in (base, ft, target): e.model.to(where, dtype)
    sync = torch.cuda.synchronize if torch.device(where).type == 'cuda' else (lambda: None)
    grid, test = make_grid(task, a.probes, seed=0), world.load_task(task, 'test', a.n_eval)
    out, t = {}, time.time()
    cache = EmbeddingCache(root=cache_dir, progress=False)   # a fresh cache per pass: each pass computes its embeddings
    D = Descriptor.from_encoders(ft, base, grid, cache)
    bank = OperatorBank.build(target, [grid], {(src, task): D}, cache=cache)
    sync(); out['bank_s'] = time.time() - t; t = time.time()
    sc = Scorer(bank, {task: test}, target)
    out['predicted_acc'] = sc.score({(src, task): 1.0})[task]
    sync(); out['scorer_s'] = time.time() - t; t = time.time()
    edited = bank.apply({(src, task): 1.0})
    out['acc_before'], out['acc_after'] = encoders.zero_shot_accuracy(target, test), encoders.zero_shot_accuracy(edited, test)
    sync(); out['edit_eval_s'] = time.time() - t; t = time.time()
    fit = fit_adapter(target, [(grid, D, 1.0)], steps=a.steps, progress=False)
    sync(); out['adapter_s'] = time.time() - t; t = time.time()
    out['adapter_loss'] = (fit.loss_start, fit.loss_final)
    ft2 = training.finetune(target, task, progress=False, config=families.FinetuneConfig(steps=a.steps, batch=32, distill_n=64))[0]
    sync(); out['finetune_s'] = time.time() - t
    out['theta'] = bank.combine({(src, task): 1.0}).cpu()
    out['placed'] = {name: (e.device, e.dtype) for name, e in (('edited', edited), ('adapter', fit.encoder), ('finetune', ft2))}
    out['what'] = f'{src}/{task} -> {tgt}: {a.probes} probes, {len(test)} test images'
    out['scorer_device'] = sc.device
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--dtype', default='float32', choices=['float32', 'float64', 'bfloat16', 'float16'])
    ap.add_argument('--task', default=None, help='a task of the zoo (default: its first)')
    ap.add_argument('--probes', type=int, default=256)
    ap.add_argument('--n-eval', type=int, default=500)
    ap.add_argument('--steps', type=int, default=20, help='adapter and fine-tune steps')
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == 'cuda' and not torch.cuda.is_available():
        print(f'skipped: no CUDA (torch {torch.__version__}, built for CUDA {torch.version.cuda}); '
              f'run with --device cpu for the same checks on the CPU')
        return 0
    from platonic_ta import zoo, world
    dtype = getattr(torch, a.dtype)
    name = torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'CPU'
    print(f'torch {torch.__version__}, device {dev} ({name}), dtype {a.dtype}, threads {torch.get_num_threads()}')
    with tempfile.TemporaryDirectory() as c1, tempfile.TemporaryDirectory() as c2:
        ref, got = run('cpu', torch.float32, a, zoo, world, c1), run(dev, dtype, a, zoo, world, c2)
    print(ref['what'])
    for k in ('bank_s', 'scorer_s', 'edit_eval_s', 'adapter_s', 'finetune_s'):
        print(f'{k:12s} cpu float32 {ref[k]:8.3f} s   {dev} {a.dtype} {got[k]:8.3f} s')
    for k in ('predicted_acc', 'acc_before', 'acc_after'):
        print(f'{k:12s} cpu float32 {ref[k]:.4f}       {dev} {a.dtype} {got[k]:.4f}')
    print(f'adapter loss {ref["adapter_loss"][0]:.4g} -> {ref["adapter_loss"][1]:.4g} (cpu), '
          f'{got["adapter_loss"][0]:.4g} -> {got["adapter_loss"][1]:.4g} ({dev})')
    rel = float((got['theta'] - ref['theta']).norm() / ref['theta'].norm().clamp_min(1e-30))
    half = dtype in (torch.bfloat16, torch.float16)
    tol_theta, tol_acc = (0.2, 0.05) if half else (1e-3, 0.01)
    print(f'operator relative difference {rel:.2e} (tolerance {tol_theta}); scorer on {got["scorer_device"]}')
    bad = [f'{n} on {d} in {t}' for n, (d, t) in got['placed'].items() if d.type != dev.type or t != dtype]
    bad += [f'{k} {ref[k]:.4f} vs {got[k]:.4f}' for k in ('predicted_acc', 'acc_before', 'acc_after') if abs(ref[k] - got[k]) > tol_acc]
    bad += [f'operator differs by {rel:.2e}'] if rel > tol_theta else []
    bad += [f'scorer on {got["scorer_device"]}'] if got['scorer_device'].type != dev.type else []
    if bad:
        print('FAILED: ' + '; '.join(bad))
        return 1
    print(f'ok: the transfer path runs on {dev} in {a.dtype} and agrees with the CPU')
    return 0


if __name__ == '__main__':
    sys.exit(main())
