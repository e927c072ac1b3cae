"""Calibrate one zoo family (dev tool): pretrain with spec overrides, then zero-shot / probe / LoRA fine-tune per task.

Usage: .venv/bin/python tools/calibrate_family.py FAMILY STEPS TAG [JSON]
  JSON: FamilySpec overrides (e.g. {"lr": 0.001}), plus optional "cap" (caption_corpus kwargs),
  "ft_steps" and "ft" (finetune overrides). Weights go to _runs/calibrate/FAMILY_TAG (or $CALIBRATE_OUT/FAMILY_TAG).
Evaluation as tools/eval_family.py (its `evaluate`); fine-tunes on tallies, weaves, scales, grounds only."""
import os, sys, time, json, dataclasses, functools, torch
torch.set_num_threads(1)
from pathlib import Path
from platonic_ta.families import FAMILIES
from platonic_ta.training import pretrain, finetune
from platonic_ta.zoo import save_artifact
from platonic_ta import world
sys.path.insert(0, str(Path(__file__).parent))
from eval_family import evaluate
fam, steps, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
opt = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
cap = opt.pop('cap', {}); ftsteps = opt.pop('ft_steps', 150); ftkw = opt.pop('ft', {})
if cap: world.caption_corpus = functools.partial(world.caption_corpus, **cap)
f = dataclasses.replace(FAMILIES[fam], **opt)
t0 = time.time(); enc, losses = pretrain(f, steps, progress=False)
print(fam, steps, tag, opt, cap, f'pretrain {time.time()-t0:.0f}s loss {losses[0]:.2f} -> {sum(losses[-50:])/len(losses[-50:]):.3f}', flush=True)
save_artifact(Path(os.environ.get('CALIBRATE_OUT', '_runs/calibrate')) / f'{fam}_{tag}', enc.model.state_dict(), dict(steps=steps, opt=opt, cap=cap))

def tuned(t):
    t1 = time.time(); ft, _, fl = finetune(enc, t, steps=ftsteps, progress=False, **ftkw)
    return ft, f' (loss {fl[0]:.2f}->{fl[-1]:.2f}, {time.time()-t1:.0f}s)'
evaluate(enc, tuned, ('tallies', 'weaves', 'scales', 'grounds'))
