"""Calibrate one zoo family (dev tool): pretrain with spec overrides, then zero-shot / probe / LoRA fine-tune per task.

Weights go to _runs/calibrate/FAMILY_TAG (or $CALIBRATE_OUT/FAMILY_TAG). Evaluation as tools/eval_family.py (its
`evaluate`); fine-tunes on tallies, weaves, scales, grounds only.
Example: .venv/bin/python tools/calibrate_family.py vit_w96 3000 try1 '{"lr": 0.001, "ft_steps": 100}'
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import os, sys, time, json, dataclasses, functools, torch
torch.set_num_threads(1)
from pathlib import Path
from platonic_ta.families import FAMILIES
from platonic_ta.training import pretrain, finetune
from platonic_ta.zoo import save_artifact
from platonic_ta import world
sys.path.insert(0, str(Path(__file__).parent))
from eval_family import evaluate
from toolargs import tool_parser, json_object, check_names

if __name__ == '__main__':
    ap = tool_parser(__doc__)
    ap.add_argument('family', choices=list(FAMILIES), metavar='FAMILY', help='the zoo family to pretrain: %(choices)s')
    ap.add_argument('steps', type=int, help='pretraining steps')
    ap.add_argument('tag', help='a name for this try: the weights go to FAMILY_TAG')
    ap.add_argument('options', nargs='?', type=json_object, default={},
                    help='FamilySpec overrides (e.g. \'{"lr": 0.001}\'), plus optional "cap" (caption_corpus keyword '
                         'arguments), "ft_steps" (default 150) and "ft" (finetune keyword arguments)')
    a = ap.parse_args()
    fam, steps, tag, opt = a.family, a.steps, a.tag, a.options
    cap = opt.pop('cap', {}); ftsteps = opt.pop('ft_steps', 150); ftkw = opt.pop('ft', {})
    check_names(ap, 'FamilySpec fields', opt, [f.name for f in dataclasses.fields(FAMILIES[fam])])
    if cap: world.caption_corpus = functools.partial(world.caption_corpus, **cap)
    f = dataclasses.replace(FAMILIES[fam], **opt)
    t0 = time.time(); enc, losses = pretrain(f, steps, progress=False)
    print(fam, steps, tag, opt, cap, f'pretrain {time.time()-t0:.0f}s loss {losses[0]:.2f} -> {sum(losses[-50:])/len(losses[-50:]):.3f}', flush=True)
    save_artifact(Path(os.environ.get('CALIBRATE_OUT', '_runs/calibrate')) / f'{fam}_{tag}', enc.model.state_dict(), dict(steps=steps, opt=opt, cap=cap))

    def tuned(t):
        t1 = time.time(); ft, _, fl = finetune(enc, t, steps=ftsteps, progress=False, **ftkw)
        return ft, f' (loss {fl[0]:.2f}->{fl[-1]:.2f}, {time.time()-t1:.0f}s)'
    evaluate(enc, tuned, ('tallies', 'weaves', 'scales', 'grounds'))
