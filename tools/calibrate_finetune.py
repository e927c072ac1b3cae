"""Calibrate the source fine-tune recipe on one pretrained family (dev tool).

Prints, per edit task, zero-shot, probe and fine-tuned accuracy and the cost on each control; 500 test images per
task, probe on 1,000 training images.
Example: .venv/bin/python tools/calibrate_finetune.py vit_w96 _runs/calibrate/vit_w96_A '{"distill": 7.0}' weaves grounds
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import sys, time, json, dataclasses, torch
torch.set_num_threads(1)
from pathlib import Path
import numpy as np
from platonic_ta.families import FAMILIES, create_family_model
from platonic_ta.zoo import load_base, load_artifact, save_artifact
from platonic_ta.encoders import family_encoder, class_embeddings, predict, linear_probe_accuracy
from platonic_ta.training import finetune
from platonic_ta import world

def base_encoder(fam, base):
    p = Path(base)
    if p.is_dir(): return load_base(fam, p)
    tensors, meta = load_artifact(p)
    spec = dataclasses.replace(FAMILIES[fam], **meta.get('spec', {}))   # a calibration's spec overrides
    for t, r in meta.get('rates', {}).items():   # the world it was pretrained on (tasks since renamed are skipped)
        if t in world.TASKS: world.TASKS[t].grounding = r
    m = create_family_model(spec); m.load_state_dict(tensors)
    return family_encoder(spec, m.eval())

def acc(enc, d, T): return (predict(enc, d.images, T) == d.labels).float().mean().item()

if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser, json_object, check_names
    ap = tool_parser(__doc__)
    ap.add_argument('family', choices=list(FAMILIES), metavar='FAMILY', help='the zoo family of the base: %(choices)s')
    ap.add_argument('base', help='a base artefact path without suffix (e.g. _runs/calibrate/vit_w96_A) or a zoo folder')
    ap.add_argument('overrides', nargs='?', type=json_object, default={},
                    help='fine-tune overrides (FINETUNE\'s keys), and optionally "save": a folder for the LoRA factors')
    ap.add_argument('tasks', nargs='*', help='edit tasks to fine-tune (default: every edit task)')
    a = ap.parse_args()
    fam, base, over = a.family, a.base, a.overrides
    tasks = a.tasks or world.list_tasks(controls=False)
    check_names(ap, 'tasks', tasks, world.list_tasks())
    out = over.pop('save', None)   # a folder: keep each fine-tune's LoRA factors there
    enc = base_encoder(fam, base)
    ctrl = {c: world.load_task(c, 'test', 500) for c in world.list_tasks(controls=True)}
    Tc = {c: class_embeddings(enc, d.classnames, d.templates) for c, d in ctrl.items()}
    c0 = {c: acc(enc, d, Tc[c]) for c, d in ctrl.items()}
    print(fam, base, over, 'controls', {c: round(v, 3) for c, v in c0.items()}, flush=True)
    rows = []
    for t in tasks:
        te, tr = world.load_task(t, 'test', 500), world.load_task(t, 'train', 1000)
        T = class_embeddings(enc, te.classnames, te.templates)
        t0 = time.time(); ft, lt, ls = finetune(enc, t, progress=False, **over)
        if out: save_artifact(Path(out) / f'{fam}_{t}', lt, dict(family=fam, task=t, base=str(base), finetune=ft.meta['finetune']))
        r = dict(task=t, chance=1 / len(te.classnames), zs=acc(enc, te, T), probe=linear_probe_accuracy(enc, tr, te),
                 ft=acc(ft, te, T), **{f'cost_{c}': c0[c] - acc(ft, d, Tc[c]) for c, d in ctrl.items()})
        rows.append(r)
        print(' '.join(f'{k} {v:.3f}' if isinstance(v, float) else f'{k} {v}' for k, v in r.items()),
              f'({time.time() - t0:.0f}s, loss {ls[0]:.2f}->{np.mean(ls[-20:]):.2f})', flush=True)
    m = lambda k: 100 * float(np.mean([r[k] for r in rows]))
    costs = [k for k in rows[0] if k.startswith('cost_')]
    print(f'MEAN gain {m("ft") - m("zs"):.1f} probe_gain {m("probe") - m("zs"):.1f} control_cost '
          f'{np.mean([m(k) for k in costs]):.1f} ({", ".join(f"{k[5:]} {m(k):.1f}" for k in costs)}) '
          f'above_chance {sum(r["zs"] > r["chance"] + 0.05 for r in rows)} gain10 {sum(r["ft"] - r["zs"] >= 0.10 for r in rows)}', flush=True)
