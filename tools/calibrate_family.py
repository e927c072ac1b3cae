"""Calibrate one zoo family (dev tool): pretrain with spec overrides, then zero-shot / probe / LoRA fine-tune per task.

Usage: .venv/bin/python tools/calibrate_family.py FAMILY STEPS TAG [JSON]
  JSON: FamilySpec overrides (e.g. {"lr": 0.001}), plus optional "cap" (caption_corpus kwargs),
  "ft_steps" and "ft" (finetune overrides). Weights go to _runs/calibrate/FAMILY_TAG (or $CALIBRATE_OUT/FAMILY_TAG).
Evaluation: 500 test images per task, probe fitted on 1,000 training images, one thread."""
import os, sys, time, json, dataclasses, functools, torch
torch.set_num_threads(1)
from pathlib import Path
from platonic_ta.zoo import *
from platonic_ta import zoo as Z, world
fam, steps, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
opt = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
cap = opt.pop('cap', {}); ftsteps = opt.pop('ft_steps', 150); ftkw = opt.pop('ft', {})
if cap: world.caption_corpus = functools.partial(world.caption_corpus, **cap)
f = dataclasses.replace(FAMILIES[fam], **opt)
t0 = time.time(); enc, losses = pretrain(f, steps, progress=False)
print(fam, steps, tag, opt, cap, f'pretrain {time.time()-t0:.0f}s loss {losses[0]:.2f} -> {sum(losses[-50:])/50:.3f}', flush=True)
save_artifact(Path(os.environ.get('CALIBRATE_OUT', '_runs/calibrate')) / f'{fam}_{tag}', enc.model.state_dict(), dict(steps=steps, opt=opt, cap=cap))
for t in world.list_tasks():
    te = world.load_task(t, 'test', 500); tr = world.load_task(t, 'train', 1000)
    T = class_embeddings(enc, te.classnames, te.templates)
    zs = (predict(enc, te.images, T) == te.labels).float().mean().item()
    line = f'{t:<10} chance {1/len(te.classnames):.2f} zs {zs:.3f} probe {linear_probe_accuracy(enc, tr, te):.3f}'
    if t in ('counting', 'glyphs', 'arrows', 'textures'):
        t1 = time.time(); ft, _, fl = finetune(enc, t, steps=ftsteps, progress=False, **ftkw)
        line += f' ft {(predict(ft, te.images, T) == te.labels).float().mean().item():.3f} (loss {fl[0]:.2f}->{fl[-1]:.2f}, {time.time()-t1:.0f}s)'
    print(line, flush=True)
