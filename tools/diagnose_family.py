"""Diagnose what limits a zoo family (dev tool): features u against embeddings z, tasks without their domain shift, fine-tune strength.

WHAT is one of:
  features   probe on the tower's pre-projection features u against the embedding z, and a random-init tower's
  unshifted  zero-shot and probe on the hard tasks as shipped, then rendered without their domain shift ('photo')
  finetune   seed-0 fine-tunes of every task with FINETUNE overrides JSON (e.g. '{"lr": 0.0015}'): mean gain, control cost
Sizes: 1,000 training images, 500 test (1,000 for `finetune`, as 01); one thread.
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import sys, json, torch, torch.nn.functional as F
from sklearn.linear_model import LogisticRegression
from platonic_ta import world
from platonic_ta.zoo import load_base, shipped_zoo_dir
from platonic_ta.encoders import family_encoder, zero_shot_accuracy, linear_probe_accuracy
from platonic_ta.families import create_family_model
from platonic_ta.training import finetune

HARD = ['grounds', 'weaves', 'scales', 'tallies', 'digits']

def _probe(Xtr, ytr, Xte, yte, C=10.0):
    "Logistic regression on standardised features (u and z have different scales)."
    m, s = Xtr.mean(0), Xtr.std(0) + 1e-6
    return LogisticRegression(C=C, max_iter=1000).fit((Xtr - m) / s, ytr).score((Xte - m) / s, yte)

def features(fam, zoo):
    enc, rnd = load_base(fam, zoo), family_encoder(fam, create_family_model(fam))
    for t in world.list_tasks():
        tr, te = world.load_task(t, 'train', 1000), world.load_task(t, 'test', 500)
        out = []
        for e in (enc, rnd):
            with torch.no_grad(): (utr, ztr), (ute, zte) = e.features(tr.images), e.features(te.images)
            out += [_probe(F.normalize(ztr.float(), dim=-1).numpy(), tr.labels, F.normalize(zte.float(), dim=-1).numpy(), te.labels),
                    _probe(utr.float().numpy(), tr.labels, ute.float().numpy(), te.labels)]
        print(f'{t:<10} z {out[0]:.3f} u {out[1]:.3f} | random-init z {out[2]:.3f} u {out[3]:.3f}  (u dim {utr.shape[1]})', flush=True)

def unshifted(fam, zoo):
    enc = load_base(fam, zoo)
    def run(tag):
        for t in HARD:
            world._render_task.cache_clear()
            tr, te = world.load_task(t, 'train', 1000), world.load_task(t, 'test', 500)
            print(f'{fam} {tag:<8} {t:<9} zs {zero_shot_accuracy(enc, te):.3f} probe {linear_probe_accuracy(enc, tr, te):.3f}', flush=True)
    run('shifted')
    style = world.pick_style
    world.pick_style = lambda rng, main, p: (rng.random(), 'photo')[1]   # the same random draws, always the photo domain
    try: run('photo')
    finally: world.pick_style = style; world._render_task.cache_clear()

def finetunes(fam, zoo, overrides):
    enc = load_base(fam, zoo)
    acc = zero_shot_accuracy   # a fine-tune's text tower is its base's: the same class embeddings
    ctrl = {c: world.load_task(c, 'test', 1000) for c in world.list_tasks(controls=True)}
    base_c = {c: acc(enc, d) for c, d in ctrl.items()}
    gains, costs = [], []
    for t in world.list_tasks(controls=False):
        te = world.load_task(t, 'test', 1000)
        ft, _, _ = finetune(enc, t, progress=False, **overrides)
        gains.append(100 * (acc(ft, te) - acc(enc, te)))
        costs.append(100 * sum(base_c[k] - acc(ft, d) for k, d in ctrl.items()) / len(ctrl))
        print(f'{t:<9} gain {gains[-1]:5.1f} control cost {costs[-1]:5.1f}', flush=True)
    print(f'{fam} {overrides}: mean gain {sum(gains) / len(gains):.2f}, mean control cost {sum(costs) / len(costs):.2f}')

if __name__ == '__main__':
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser, json_object
    from platonic_ta.zoo import FAMILIES
    ap = tool_parser(__doc__)
    ap.add_argument('what', choices=['features', 'unshifted', 'finetune'], metavar='WHAT', help='the diagnostic to run: %(choices)s (see below)')
    ap.add_argument('family', choices=list(FAMILIES), metavar='FAMILY', help='the zoo family to diagnose: %(choices)s')
    ap.add_argument('zoo', nargs='?', default=None, help='the zoo folder (default: the shipped zoo)')
    ap.add_argument('overrides', nargs='?', type=json_object, default={}, help="`finetune` only: FINETUNE overrides, e.g. '{\"lr\": 0.0015}'")
    a = ap.parse_args()
    if a.overrides and a.what != 'finetune': ap.error('fine-tune overrides go with `finetune` only')
    torch.set_num_threads(1)
    zoo = a.zoo if a.zoo is not None else shipped_zoo_dir()
    if a.what == 'features': features(a.family, zoo)
    elif a.what == 'unshifted': unshifted(a.family, zoo)
    else: finetunes(a.family, zoo, a.overrides)
