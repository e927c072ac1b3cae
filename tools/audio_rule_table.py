"""Compare audio fine-tune recipes on one audio build, on held-out training clips only (dev tool).

Fine-tunes every family of the audio zoo ZOO again with the audio recipe updated by --recipe (in memory; none given,
the zoo's own fine-tunes), then prints each fine-tune's held-out gain and what it costs the controls, the rows of
08_audio's held-out solve rule at the demo's size (the probe, context and corpus counts of `report.STAGES`, every
training clip no grid holds), the rule's choice for additions and for negations, and at those choices the audio headline's
figures per cross-model cell on the held-out clips: the composed gain, the control move, and the negation at λ = 1.
No test clip is scored, so its figures may choose a recipe. Run it on every build: a recipe holds only if it holds on each.
Example: .venv/bin/python tools/audio_rule_table.py zoos/audio-b1 --recipe '{"distill": 12.0}'
"""
import json, sys, time
from pathlib import Path

if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser, json_object
    ap = tool_parser(__doc__)
    ap.add_argument('zoo', help="an audio zoo folder, or 'shipped'")
    ap.add_argument('--recipe', type=json_object, default=None,
                    help='audio fine-tune settings over the zoo\'s recipe, e.g. \'{"distill": 12.0}\' (default: the zoo\'s fine-tunes)')
    ap.add_argument('--max-cost', type=float, default=2.0, help="the rule's bound (points)")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    from platonic_ta import audio_world
    from platonic_ta.audio_zoo import get_audio_zoo, finetune_audio
    from platonic_ta.grids import zoo_grids, CORPUS_SEED
    from platonic_ta.cache import EmbeddingCache
    from platonic_ta.scoring import Scorer
    from platonic_ta.descriptors import zoo_descriptors, Descriptor
    from platonic_ta.analysis import addition_sweep, negation_sweep, cross_edit_figures, kind_solves, solve_candidates
    from platonic_ta.zoo_banks import zoo_bank, heldout_split
    from platonic_ta.encoders import zero_shot_accuracy
    from platonic_ta.stats import points, mean_or_nan
    from platonic_ta.report import STAGES
    t0 = time.time()
    composed, alpha = ('events', 'genres'), 0.5
    Z = get_audio_zoo(a.zoo, progress=False)
    edit = [t for t in audio_world.list_tasks(controls=False) if t in Z.tasks]
    controls = [t for t in audio_world.list_tasks() if t not in composed]
    cache = EmbeddingCache(progress=False)
    demo = STAGES['08_audio.ipynb']
    corpus = audio_world.caption_corpus(demo['n_corpus'], seed=CORPUS_SEED)[0]
    grids = zoo_grids([audio_world.load_task(t, 'train') for t in edit], demo['n_probes'], 0, demo['n_context'], corpus=corpus)
    vals = {t: heldout_split(t, list(grids.values()), None, source=audio_world) for t in audio_world.list_tasks()}
    bases = {f: Z.base(f) for f in Z.families}
    d3 = {} if a.recipe else zoo_descriptors(Z, grids, cache, progress=False)
    for f, base in bases.items():
        zs = {t: zero_shot_accuracy(base, v) for t, v in vals.items()}
        for t in edit:
            ft = finetune_audio(base, t, seed=0, progress=False, **a.recipe)[0] if a.recipe else Z.finetune(f, t, 0, base)
            if a.recipe: d3[(f, t, 0)] = Descriptor.from_encoders(ft, base, grids[t], cache)
            acc = {u: zero_shot_accuracy(ft, v) for u, v in vals.items()}
            cost = mean_or_nan(zs[u] - acc[u] for u in audio_world.list_tasks(controls=True))
            print(f'fine-tune {f}/{t}: held-out gain {points(acc[t] - zs[t]):+.1f}, control cost {points(cost):+.2f}', flush=True)
    rows = []
    for cfg in solve_candidates((0.5, 0.75, 1.0, 1.25, 1.5), (False, True), (2.5, 5.0, 10.0, 20.0, 40.0)):
        scs = {f: Scorer(zoo_bank(b, f, grids, d3, Z.families, cache=cache, consensus=False, nulls=False, solve=cfg), vals, cache=cache)
               for f, b in bases.items()}
        rows.append(dict(solve=cfg, scorers=scs, **cross_edit_figures(scs, [composed], alpha, 1.0, 1.0, controls=controls)))
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in rows[-1].items() if k not in ('solve', 'scorers')}
                         | dict(max_move=cfg.max_move, center=cfg.center, prompt_context=cfg.prompt_context)), flush=True)
    chosen = kind_solves(rows, a.max_cost)
    print('the rule chooses, for additions:', chosen['addition'], '\nfor negations:', chosen['negation'], flush=True)
    picked = kind_solves(rows, a.max_cost, choice='scorers')   # each kind's chosen candidate's scorers
    add_sc, neg_sc = picked['addition'], picked['negation']
    cells = []
    for f, sc in add_sc.items():
        for src in [g for g in Z.families if g != f]:
            r = addition_sweep(sc, [composed], [src], alphas=(alpha,), controls=controls)[0]
            n = negation_sweep(neg_sc[f], composed[0], src, lambdas=(1.0,), controls=controls)[0]
            cells.append(dict(gain=points((r['gain_a'] + r['gain_b']) / 2), move=points(r['control_gain']),
                              removed=points(n['drop_removed']), cost=points(n['drop_control'])))
            c = cells[-1]
            print(f"{f} <- {src}: gain {c['gain']:+.2f}, control move {c['move']:+.2f}; negation at λ = 1 removes "
                  f"{c['removed']:.2f} for {c['cost']:.2f}", flush=True)
    print(f"held-out headline: composed gain {mean_or_nan(c['gain'] for c in cells):.2f}, largest control move "
          f"{max(abs(c['move']) for c in cells):.2f}, negation at λ = 1 removes {mean_or_nan(c['removed'] for c in cells):.2f} "
          f"for {mean_or_nan(c['cost'] for c in cells):.2f} ({time.time() - t0:.0f} s)")
