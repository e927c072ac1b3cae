"""Evaluate one built zoo family (dev tool): zero-shot, linear probe and its seed-0 fine-tunes, per task.

Evaluation: 500 test images per task, probe fitted on 1,000 training images, one thread
(`evaluate` is shared with tools/calibrate_family.py and tools/calibrate_grounding.py).
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import sys, torch
from pathlib import Path
from platonic_ta.zoo import load_base, load_finetune, ArtifactError
from platonic_ta.encoders import class_embeddings, predict, linear_probe_accuracy
from platonic_ta import world

def evaluate(enc, finetuned=None, tasks=None):
    "Print zero-shot and probe accuracy per task; `finetuned(task)` -> (encoder, note) or None adds its accuracy."
    for t in world.list_tasks():
        te = world.load_task(t, 'test', 500); tr = world.load_task(t, 'train', 1000)
        T = class_embeddings(enc, te.classnames, te.templates)
        zs = (predict(enc, te.images, T) == te.labels).float().mean().item()
        line = f'{t:<10} chance {1/len(te.classnames):.2f} zs {zs:.3f} probe {linear_probe_accuracy(enc, tr, te):.3f}'
        got = finetuned(t) if finetuned and (tasks is None or t in tasks) else None
        if got: line += f' ft {(predict(got[0], te.images, T) == te.labels).float().mean().item():.3f}{got[1]}'
        print(line, flush=True)

if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser
    from platonic_ta.zoo import FAMILIES
    ap = tool_parser(__doc__)
    ap.add_argument('family', choices=list(FAMILIES), metavar='FAMILY', help='the zoo family to evaluate: %(choices)s')
    ap.add_argument('zoo', type=Path, help='the zoo folder holding its base and fine-tunes')
    a = ap.parse_args()
    torch.set_num_threads(1)
    fam, zoo = a.family, a.zoo
    enc = load_base(fam, zoo)
    def seed0(t):
        try: return load_finetune(fam, t, 0, zoo, enc), ''
        except ArtifactError as e: print(f'{t}: fine-tune missing ({e})'); return None
    evaluate(enc, seed0, world.list_tasks(controls=False))
