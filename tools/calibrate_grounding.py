"""Calibrate the world's grounding rates on one zoo family (dev tool).

Pretrains the family with grounding-rate overrides, saves its weights to _runs/calibrate/FAMILY_TAG (or
$CALIBRATE_OUT/FAMILY_TAG), then prints zero-shot and linear-probe accuracy per task (as tools/eval_family.py).
Example: .venv/bin/python tools/calibrate_grounding.py vit_w96 try1 '{"weaves": 0.01}' '{"embed_dim": 128}'
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
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
    from toolargs import tool_parser, json_object, check_names
    ap = tool_parser(__doc__)
    ap.add_argument('family', choices=list(FAMILIES), metavar='FAMILY', help='the zoo family to pretrain: %(choices)s')
    ap.add_argument('tag', help='a name for this try: the weights go to FAMILY_TAG')
    ap.add_argument('rates', nargs='?', type=json_object, default={},
                    help='grounding rate per task, e.g. \'{"weaves": 0.01}\' (default: the world\'s own)')
    ap.add_argument('spec', nargs='?', type=json_object, default={},
                    help='overrides of the family\'s FamilySpec fields, e.g. \'{"embed_dim": 128}\'')
    a = ap.parse_args()
    fam, tag, rates, spec = a.family, a.tag, a.rates, a.spec
    check_names(ap, 'tasks', rates, world.TASKS)
    check_names(ap, 'FamilySpec fields', spec, [f.name for f in dataclasses.fields(FAMILIES[fam])])
    for t, r in rates.items(): world.TASKS[t].grounding = float(r)
    f = dataclasses.replace(FAMILIES[fam], **spec)
    t0 = time.time(); enc, losses = pretrain(f, progress=False)
    print(fam, tag, rates, spec, f'pretrain {time.time() - t0:.0f}s loss {losses[0]:.2f} -> {sum(losses[-50:]) / 50:.3f}', flush=True)
    save_artifact(Path(os.environ.get('CALIBRATE_OUT', '_runs/calibrate')) / f'{fam}_{tag}', enc.model.state_dict(),
                  dict(family=fam, spec=spec, rates={t: world.TASKS[t].grounding for t in world.list_tasks(controls=False)}))
    evaluate(enc)
