"""Compare candidate zoos (a fine-tune recipe, a world) on held-out training images only (dev tool).

Prints the fine-tunes' mean held-out accuracy beside their bases' and what they cost the controls, then the rows of
04_composition's held-out rule at the paper's size (1,000 probes per grid, the context rows, held-out images no grid
holds) for each solve candidate and target, the rule's choice for additions and for negations of each target (as 04
chooses them; --one-for-all: one for every target), and the choice for additions bounded by their single and pair
costs alone. No test image is scored, so its figures may choose a recipe.
Example: .venv/bin/python tools/heldout_rule_table.py /path/to/zoo --budgets 0.5 1 1.5 --context-budgets 5 10 20
"""
import itertools, json, time
from toolargs import tool_parser
from platonic_ta import world, zero_shot_accuracy
from platonic_ta.zoo import get_zoo
from platonic_ta.cache import EmbeddingCache
from platonic_ta.grids import zoo_grids
from platonic_ta.descriptors import zoo_descriptors
from platonic_ta.zoo_banks import heldout_split
from platonic_ta.analysis import heldout_rule, heldout_solve, solve_candidates
from platonic_ta.report import CONTEXT


def main():
    ap = tool_parser(__doc__)
    ap.add_argument('zoo', help="a zoo folder, or 'full' / 'shipped'")
    ap.add_argument('--budgets', type=float, nargs='*', default=[0.5, 0.75, 1.0, 1.25, 1.5], help='plain and class-centred candidates')
    ap.add_argument('--context-budgets', type=float, nargs='*', default=[2.5, 5.0, 10.0, 20.0, 40.0],
                    help="class-centred candidates that keep the other tasks' prompts still")
    ap.add_argument('--max-cost', type=float, default=2.0, help="the rule's bound (points)")
    ap.add_argument('--one-for-all', action='store_true', help="one solve for every target (default: each target's own, as 04 chooses)")
    a = ap.parse_args()
    t0 = time.time()
    Z = get_zoo(a.zoo, progress=False)
    cache = EmbeddingCache(progress=False)
    grids = zoo_grids(Z.tasks, 1000, 0, CONTEXT)
    D = zoo_descriptors(Z, grids, cache, seeds=[0], progress=False)
    ctl = [t for t in world.list_tasks(controls=True) if t not in Z.tasks]
    vals = {t: heldout_split(t, list(grids.values()), 1000) for t in dict.fromkeys(Z.tasks + world.list_tasks())}
    bases = {f: Z.base(f) for f in Z.families}
    acc = []
    for f in Z.families:
        for t in Z.tasks:
            ft = Z.finetune(f, t, 0, bases[f])
            acc.append((zero_shot_accuracy(bases[f], vals[t]), zero_shot_accuracy(ft, vals[t]),
                        sum(zero_shot_accuracy(ft, vals[c]) - zero_shot_accuracy(bases[f], vals[c]) for c in ctl) / len(ctl)))
    print('held-out, mean over (family, task): base %.3f, fine-tune %.3f, the fine-tune\'s change on the controls %+.3f'
          % tuple(sum(x[i] for x in acc) / len(acc) for i in range(3)), flush=True)
    cands = solve_candidates(a.budgets, (False, True), a.context_budgets)
    chosen, rows = heldout_rule(bases, grids, D, Z.families, vals, list(itertools.combinations(Z.tasks, 2)), cands,
                                0.5, 1.0, a.max_cost, controls=ctl, cache=cache, per_target=not a.one_for_all)
    for r in rows: print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != 'solve'}))
    print(f'the rule chooses ({time.time() - t0:.0f} s):')
    for f, c in ({'every target': chosen} if a.one_for_all else chosen).items():
        # beside it, the additions bounded by their single and pair costs alone, without the negations' control cost
        alone = heldout_solve([r for r in rows if r.get('target', f) == f], a.max_cost, costs=('single_cost', 'pair_cost'))
        print(f'{f}: additions {c["addition"]}\n  negations {c["negation"]}\n  additions within the single and pair costs alone {alone}')


if __name__ == '__main__':
    main()
