"""Transfer figures of a zoo (dev tool): fine-tune gains, pair addition, single-task retention, negation, agreement.

Seed 0 only, one thread; grids of 1,000 probes (--probes) with 125 context images of each other task (the demo's); 1,000 test
images a task; pairs at α = 0.5 (cross-model cells, the own edit, each control apart); single tasks at strength 1
(median retention, by source, target and task); negation at λ = 0.5 and 1 (cross and own); descriptor cosines.
--context-rows asks where the selectivity of a transfer comes from: 'zero' sets every descriptor's context rows to 0
(the edit must leave the other tasks' images where they are on this task's classes), 'target' gives every source the
target's own context rows (a reference that needs the target's fine-tune, not a method). --drift takes from every
descriptor its family's common drift (the mean of its fine-tunes of the other tasks on the task's grid; see 06_residuals).
--text-floor floors the text-side ridge search apart from the probe side's. --strengths repeats the single-task rows at
other strengths (own and cross edits alike). --anatomy adds, per task, what a descriptor holds and how much of it an edit
carries out: the cosine of its class-centred probe rows with the centred one-hot labels and with the base's own affinities
less their class means, and the least-squares share of a descriptor that the edit at strength 1 realises on the probes
(own: of the target's own; cross: of the source's, and along the target's own).
Example: PLATONIC_TA_CACHE=/tmp/c .venv/bin/python tools/zoo_transfer.py full 1e-8 vit_w128 timm_avg
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import sys, itertools, time, statistics, torch
from pathlib import Path
from platonic_ta.scoring import Scorer
from platonic_ta import world
from platonic_ta.zoo import get_zoo
from platonic_ta.cache import EmbeddingCache
from platonic_ta.grids import zoo_grids, union_grid, CORPUS_SEED
from platonic_ta.descriptors import zoo_descriptors, affinity
from platonic_ta.ablations import CONTEXT_ROWS, replace_context_rows, common_drift, without_drift
from platonic_ta.factorization import SolveConfig
from platonic_ta.analysis import (pair_gain, zoo_cells, negation_sweep, negation_summary, median_retention,
                                  agreement_rows, cached_accuracy)
from platonic_ta.zoo_banks import zoo_bank
from platonic_ta.stats import mean_or_nan, points, median_of

def finetune_rows(Z, fams, sc, bases, evals, ctl, cache):
    "Per family: fine-tune gain per task (points), tasks gaining 10 or more, the controls' mean cost."
    for f in fams:
        g, c = [], []
        for t in Z.tasks:
            ft = Z.finetune(f, t, 0, bases[f])
            g.append(cached_accuracy(ft, sc[f], t, evals[t].images, cache) - sc[f].base[t])
            c.append(mean_or_nan(sc[f].base[k] - cached_accuracy(ft, sc[f], k, evals[k].images, cache) for k in ctl))
        print(f'{f}: fine-tune gain per task {[round(100 * x, 1) for x in g]} mean {100 * statistics.mean(g):.1f}; '
              f'>= 10: {sum(x >= .1 for x in g)}; control cost mean {100 * statistics.mean(c):.2f} max {100 * max(c):.2f}')

def pair_rows(Z, sc, ctl):
    "Pairs at α = 0.5: cross-model cells, consensus and the own edit; the cost on each control apart and their mean."
    pairs = list(itertools.combinations(Z.tasks, 2))
    runs = {k: zoo_cells(sc, pairs, (0.5,), [k], nulls=False) for k in ctl}   # one control each: the gains do not depend on it
    cells, raw = runs[ctl[0]]
    single = [c for c in cells if c['source'] != 'consensus']; cons = [c for c in cells if c['source'] == 'consensus']
    own = [r for r in raw if r['source'] == r['target']]
    cost = lambda cs: -points(mean_or_nan(c['control_gain'] for c in cs))
    cross_cost = {k: cost([c for c in runs[k][0] if c['source'] != 'consensus']) for k in ctl}
    own_cost = mean_or_nan(cost([r for r in runs[k][1] if r['source'] == r['target']]) for k in ctl)
    print(f'pairs at α = 0.5: cross gain {pair_gain(single):.2f} cost {mean_or_nan(cross_cost.values()):.2f}, both gain '
          f'{mean_or_nan(c["both_gain"] for c in single):.3f}, retention {median_retention(single)[0]:.3f}; consensus gain '
          f'{pair_gain(cons):.2f}; own gain {pair_gain(own):.2f} cost {own_cost:.2f}')
    for k, v in cross_cost.items(): print(f'  cross cost on {k}: {v:.2f}')

def single_rows(Z, fams, sc, strength=1.0):
    "Each task alone at `strength` from every other family and the consensus: median retention over cells."
    st = []
    if strength != 1.0: print(f'at strength {strength}:')
    for f in fams:
        for t in Z.tasks:
            gain = lambda s: sc[f].score({(s, t): strength}, tasks=[t])[t] - sc[f].base[t]
            own = gain(f)
            for s in [g for g in fams if g != f] + ['consensus']:
                x = gain(s)
                st.append(dict(target=f, source=s, task=t, gain=x, own=own, retention=x / own if own > .01 else float('nan')))
    cr = [r for r in st if r['source'] != 'consensus']
    print(f'single-task retention: cross {median_of(cr)[0]:.3f}, consensus {median_of([r for r in st if r["source"] == "consensus"])[0]:.3f}')
    for f in fams:
        print(f'  {f:<11} as source {median_of([r for r in cr if r["source"] == f])[0]:.2f}, as target {median_of([r for r in cr if r["target"] == f])[0]:.2f}')
    for t in Z.tasks:
        rs = [r for r in cr if r['task'] == t]
        print(f'  {t:<8} own {points(mean_or_nan(r["own"] for r in rs)):5.1f} cross {points(mean_or_nan(r["gain"] for r in rs)):5.1f} retention {median_of(rs)[0]:.2f}')

def anatomy_rows(Z, fams, bases, grids, ZD, banks, cache):
    "Per task, means over families (and source-target pairs): label and base-noise cosines, realised shares of descriptors."
    cc = lambda A: A - A.mean(1, keepdim=True)
    cos = lambda a, b: float((a * b).sum() / a.norm() / b.norm())
    share = lambda R, U: float((R * U).sum() / (U * U).sum())
    for t in Z.tasks:
        g = grids[t]
        n = len(g.probe_index)
        y = world.load_task(t, 'train').labels[g.probe_index].long()
        L = cc(torch.nn.functional.one_hot(y, g.M).double())
        lab, noise, own, cross_s, cross_t = [], [], [], [], []
        for f in fams:
            txt = cache.text_embeddings(bases[f], g)
            A0 = affinity(cache.image_embeddings(bases[f], g), txt).double()
            U = cc(ZD[(f, t, 0)].U.double())[:n]
            A0c = cc(A0)[:n]
            lab.append(cos(U, L))
            noise.append(cos(U, A0c - torch.stack([A0c[y == c].mean(0) for c in range(g.M)])[y]))
            for s in fams:
                R = cc(affinity(cache.image_embeddings(banks[f].apply({(s, t): 1.0}), g), txt).double() - A0)[:n]
                if s == f: own.append(share(R, U))
                else: cross_s.append(share(R, cc(ZD[(s, t, 0)].U.double())[:n])); cross_t.append(share(R, U))
        m = statistics.mean
        print(f'  {t:<8} descriptor cosine with the labels {m(lab):.2f}, with the base\'s noise {m(noise):+.2f}; realised: own '
              f'{m(own):.2f}, cross {m(cross_s):.2f} of the source\'s, {m(cross_t):.2f} along the target\'s own')

def negation_rows(Z, fams, sc, ctl):
    "Every task negated from every other family and from the target itself, at λ = 0.5 and 1."
    neg = []
    for f in fams:
        for t in Z.tasks:
            for s in fams:
                kind = 'own' if s == f else 'cross'
                neg += [{'target': f, 'kind': kind, 'family': s, **r} for r in negation_sweep(sc[f], t, s, (0.5, 1.0), controls=ctl)]
    for lam in (0.5, 1.0):
        n, o = negation_summary(neg, 'cross', lam), negation_summary(neg, 'own', lam)
        print(f'negation at λ = {lam}: cross removes {n["drop_removed"]:.2f} for {n["drop_control"]:.2f}; own {o["drop_removed"]:.2f} for {o["drop_control"]:.2f}')
    for t in Z.tasks:
        n = negation_summary([r for r in neg if r['task'] == t], 'cross', 0.5)
        print(f'  {t:<8} zero-shot {points(mean_or_nan(sc[f].base[t] for f in fams)):5.1f}: λ = 0.5 removes {n["drop_removed"]:5.2f} for {n["drop_control"]:5.2f}')

if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser
    ap = tool_parser(__doc__)
    ap.add_argument('zoo', help="'full' (the built, else the shipped zoo) or a zoo folder")
    ap.add_argument('floor', type=float, help='the ridge floor of every bank on both sides, e.g. 1e-8 (0: none)')
    ap.add_argument('families', nargs='*', help='families to use (default: all the zoo holds; at least two)')
    ap.add_argument('--probes', type=int, default=1000, help='probes a grid (default 1,000, the demo\'s); probes and context together fit in a task\'s training split')
    ap.add_argument('--corpus', type=int, default=0, help='caption-corpus images after every grid\'s rows (default 0)')
    ap.add_argument('--context', type=int, default=125, help='training images of each other task after every grid\'s probes (default 125)')
    ap.add_argument('--center', action='store_true', help='class-centred banks (fit only differences between a probe\'s classes)')
    ap.add_argument('--max-move', type=float, default=None,
                    help="the banks' context movement budget (SolveConfig.max_move; default: none, the floors alone)")
    ap.add_argument('--context-rows', choices=CONTEXT_ROWS, default='source',
                    help="the descriptors' context rows: as measured (default), zeroed, or the target's own (a reference)")
    ap.add_argument('--drift', action='store_true', help="take each family's common drift from its descriptors (slow: "
                    "every fine-tune on every task's grid)")
    ap.add_argument('--strengths', type=float, nargs='+', default=[1.0], help='strengths of the single-task rows (default 1)')
    ap.add_argument('--anatomy', action='store_true', help='per task: label and base-noise cosines, realised shares (slow)')
    ap.add_argument('--skip-finetunes', action='store_true', help='leave out the fine-tune rows')
    ap.add_argument('--text-floor', type=float, default=None,
                    help='floor of the text-side ridge search apart (max(floor, this)); default: the floor on both sides')
    a = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    Z = get_zoo(a.zoo, build=False, progress=False)
    fams = a.families or Z.families
    if unknown := [f for f in fams if f not in Z.families]: ap.error(f'families {unknown} are not in {Z.path}: it holds {Z.families}')
    if len(fams) < 2: ap.error('cross-model figures need at least two families')
    Z.families = fams
    cache = EmbeddingCache(progress=False)
    corpus = world.caption_corpus(a.corpus, seed=CORPUS_SEED)[0] if a.corpus else None
    grids = zoo_grids(Z.tasks, a.probes, 0, a.context, corpus=corpus)
    ZD = zoo_descriptors(Z, grids, cache, seeds=[0], progress=False)
    if a.drift:
        gu = union_grid(list(grids.values()), task='union')
        on_u = {(f, t): d for (f, t, _), d in zoo_descriptors(Z, {t: gu for t in Z.tasks}, cache, progress=False).items()}
        drift = common_drift(on_u, grids)
        share = [float(drift[k[:2]].U.norm() / D.U.norm()) for k, D in ZD.items()]
        print(f'common drift / descriptor norm: {min(share):.2f} to {max(share):.2f}, median {statistics.median(share):.2f}')
        ZD = without_drift(ZD, drift)
    ctl = [t for t in world.list_tasks(controls=True) if t not in Z.tasks]
    evals = {t: world.load_task(t, 'test', 1000) for t in Z.tasks + ctl}
    bases = {f: Z.base(f) for f in fams}
    if a.context_rows != 'source' and not a.context: ap.error('--context-rows needs context rows: pass --context > 0')
    solve = SolveConfig(max_move=a.max_move, floor_f=a.floor, floor_t=max(a.floor, a.text_floor or 0.0), center=a.center)
    print(f'banks: {solve}')
    banks = {f: zoo_bank(bases[f], f, grids, replace_context_rows(ZD, grids, a.context_rows, f if a.context_rows == 'target' else None), fams,
                         solve=solve, cache=cache) for f in fams}
    sc = {f: Scorer(banks[f], evals, cache=cache) for f in fams}
    if not a.skip_finetunes: finetune_rows(Z, fams, sc, bases, evals, ctl, cache)
    pair_rows(Z, sc, ctl)
    for x in a.strengths: single_rows(Z, fams, sc, x)
    if a.anatomy: anatomy_rows(Z, fams, bases, grids, ZD, banks, cache)
    negation_rows(Z, fams, sc, ctl)
    ag, nt = agreement_rows(ZD, fams, Z.tasks), len(Z.tasks)
    print('descriptor cosine between families (single / consensus) per task:',
          {t: (round(mean_or_nan(ag[i * nt + j]['single'] for i in range(len(fams))), 3),
               round(mean_or_nan(ag[i * nt + j]['consensus'] for i in range(len(fams))), 3)) for j, t in enumerate(Z.tasks)})
    print(f'({time.time() - t0:.0f} s)')
