"""How much families' descriptors of a task agree, for the zoo's fine-tunes or for fine-tunes of another recipe (dev tool).

Per task and family: zero-shot and fine-tuned accuracy (500 test images), the mean cost on the controls, and the rms of
the row-centred descriptor on the task's own probes; then the mean cosine over family pairs of their descriptors on
the task's own probes, row-centred (a probe's shift common to every class changes none of its predictions), and on
every grid row (1,000 probes and 125 training images of each other task, the demo's grids). Seed 0, one thread.
With no overrides the zoo's own fine-tunes are measured; with overrides each family is fine-tuned again with them.
Example: .venv/bin/python tools/descriptor_agreement.py full vit_w96,timm_avg,rn_w16 weaves,hues '{"logit_scale": 5.0}'
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import sys, time, itertools, statistics, torch
from pathlib import Path
from platonic_ta import world
from platonic_ta.zoo import get_zoo
from platonic_ta.cache import EmbeddingCache
from platonic_ta.grids import zoo_grids
from platonic_ta.descriptors import affinity, descriptor_cosine
from platonic_ta.encoders import zero_shot_accuracy as accuracy
from platonic_ta.training import finetune

def cosine(a, b) -> float: return float(descriptor_cosine(a.double(), b.double()))

def row_centred(U): return U - U.mean(1, keepdim=True)

if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser, json_object, check_names
    ap = tool_parser(__doc__)
    ap.add_argument('zoo', help="'full' (the built, else the shipped zoo) or a zoo folder")
    ap.add_argument('families', help='comma-separated families, at least two')
    ap.add_argument('tasks', help='comma-separated edit tasks')
    ap.add_argument('overrides', nargs='?', type=json_object, default={},
                    help="fine-tune settings over each family's recipe (FinetuneConfig's keys); none: the zoo's fine-tunes")
    a = ap.parse_args()
    torch.set_num_threads(1)
    Z = get_zoo(a.zoo, build=False, progress=False)
    fams, tasks = a.families.split(','), a.tasks.split(',')
    check_names(ap, 'families', fams, Z.families)
    check_names(ap, 'tasks', tasks, Z.tasks)
    if len(fams) < 2: ap.error('agreement needs at least two families')
    cache = EmbeddingCache(progress=False)
    grids = zoo_grids(Z.tasks, 1000, 0, 125)
    bases = {f: Z.base(f) for f in fams}
    controls = {c: world.load_task(c, 'test', 500) for c in world.list_tasks(controls=True)}
    base_ctl = {(f, c): accuracy(bases[f], d) for f in fams for c, d in controls.items()}
    print(f'{Z.path}, overrides {a.overrides or "none (the zoo fine-tunes)"}', flush=True)
    for t in tasks:
        test, g, U = world.load_task(t, 'test', 500), grids[t], {}
        for f in fams:
            t0, b = time.time(), bases[f]
            ft = finetune(b, t, progress=False, **a.overrides)[0] if a.overrides else Z.finetune(f, t, 0, b)
            T = cache.text_embeddings(b, g)
            U[f] = affinity(cache.image_embeddings(ft, g), T) - affinity(cache.image_embeddings(b, g), T)
            cost = statistics.mean(base_ctl[(f, c)] - accuracy(ft, d) for c, d in controls.items())
            print(f'{t} {f}: zero-shot {accuracy(b, test):.3f} fine-tuned {accuracy(ft, test):.3f} control cost '
                  f'{100 * cost:.1f} rms {float(row_centred(U[f][:1000]).std()):.3f} ({time.time() - t0:.0f} s)', flush=True)
        pairs = list(itertools.combinations(fams, 2))
        mean = lambda fn: statistics.mean(fn(U[x], U[y]) for x, y in pairs)
        print(f'{t}: descriptor cosine own probes {mean(lambda u, v: cosine(u[:1000], v[:1000])):.3f}, row-centred '
              f'{mean(lambda u, v: cosine(row_centred(u[:1000]), row_centred(v[:1000]))):.3f}, every row '
              f'{mean(cosine):.3f}', flush=True)
