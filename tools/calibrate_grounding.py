"""Calibrate the world's grounding rates on one zoo family (dev tool): pretrain with rate overrides, then zero-shot
and linear probe per task.

Usage: .venv/bin/python tools/calibrate_grounding.py FAMILY TAG '{"weaves": 0.01, ...}' ['{"embed_dim": 128}']
  The optional second JSON overrides the family's spec (FamilySpec fields).
Weights go to _runs/calibrate/FAMILY_TAG (or $CALIBRATE_OUT/FAMILY_TAG); evaluation as tools/eval_family.py."""
import os, sys, time, json, dataclasses, torch
torch.set_num_threads(1)
from pathlib import Path
from platonic_ta.families import FAMILIES
from platonic_ta.training import pretrain
from platonic_ta.zoo import save_artifact
from platonic_ta import world
sys.path.insert(0, str(Path(__file__).parent))
from eval_family import evaluate

if __name__ == '__main__':
    fam, tag = sys.argv[1], sys.argv[2]
    rates = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    spec = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    for t, r in rates.items(): world.TASKS[t].grounding = float(r)
    f = dataclasses.replace(FAMILIES[fam], **spec)
    t0 = time.time(); enc, losses = pretrain(f, progress=False)
    print(fam, tag, rates, spec, f'pretrain {time.time() - t0:.0f}s loss {losses[0]:.2f} -> {sum(losses[-50:]) / 50:.3f}', flush=True)
    save_artifact(Path(os.environ.get('CALIBRATE_OUT', '_runs/calibrate')) / f'{fam}_{tag}', enc.model.state_dict(),
                  dict(family=fam, spec=spec, rates={t: world.TASKS[t].grounding for t in world.list_tasks(controls=False)}))
    evaluate(enc)
