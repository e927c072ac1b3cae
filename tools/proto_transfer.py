"""Prototype (dev tool): cross-model transfer of saved calibration fine-tunes, with and without anchor probes.

Grids: 500 probes of each task (+ N_ANCHORS caption-corpus images as extra probes); ridges 'auto' above a floor
(--floor); strengths 0.5 and 1; 500 test images per task and control.
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import sys, json, copy, torch
torch.set_num_threads(1)
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).parent))
from calibrate_finetune import base_encoder
from platonic_ta import world
from platonic_ta.zoo import load_artifact
from platonic_ta.training import DISTILL_SEED
from platonic_ta.lora import load_adapter_tensors
from platonic_ta.grids import Grid, make_grid
from platonic_ta.cache import EmbeddingCache
from platonic_ta.descriptors import Descriptor
from platonic_ta.composition import OperatorBank
from platonic_ta.factorization import SolveConfig
from platonic_ta.scoring import Scorer

def grid_with_anchors(task, n, anchors):
    g = make_grid(task, n, seed=0, context=None)
    if not anchors: return g
    extra = world.caption_corpus(anchors, seed=DISTILL_SEED + 1)[0]
    return Grid(task=f'{task}+a{anchors}', images=torch.cat([g.images, extra]), prompts=g.prompts, classnames=g.classnames)

if __name__ == '__main__':
    from toolargs import tool_parser, check_names
    from platonic_ta.zoo import FAMILIES
    ap = tool_parser(__doc__)
    ap.add_argument('target_family', choices=list(FAMILIES), metavar='TARGET_FAMILY', help='the zoo family of the target: %(choices)s')
    ap.add_argument('target_base', help='the target\'s base artefact path (tools/calibrate_grounding.py)')
    ap.add_argument('source_family', choices=list(FAMILIES), metavar='SOURCE_FAMILY', help='the zoo family of the source: %(choices)s')
    ap.add_argument('source_base', help='the source\'s base artefact path (tools/calibrate_grounding.py)')
    ap.add_argument('ft_dir', help='the LoRA factors saved by tools/calibrate_finetune.py ("save")')
    ap.add_argument('anchors', type=int, help='caption-corpus images added to each grid as extra probes (0: none)')
    ap.add_argument('tasks', nargs='*', help='edit tasks to transfer (default: every edit task)')
    ap.add_argument('--floor', type=float, default=float(__import__('os').environ.get('FLOOR', '1e-2')),
                    help='the smallest relative ridge the label-free choice may pick (default: $FLOOR or 1e-2)')
    a = ap.parse_args()
    if a.anchors < 0: ap.error(f'anchors is {a.anchors}: give 0 or more')
    tf, tb, sf, sb, ftdir, anchors, FLOOR = (a.target_family, a.target_base, a.source_family, a.source_base, a.ft_dir,
                                             a.anchors, a.floor)
    tasks = a.tasks or world.list_tasks(controls=False)
    check_names(ap, 'tasks', tasks, world.list_tasks(controls=False))
    target, source = base_encoder(tf, tb), base_encoder(sf, sb)
    cache = EmbeddingCache('/tmp/proto_cache', progress=False)
    evals = {t: world.load_task(t, 'test', 500) for t in tasks + world.list_tasks(controls=True)}
    for t in tasks:
        tensors, meta = load_artifact(Path(ftdir) / f'{sf}_{t}')
        ft = copy.deepcopy(source)
        ft.model = load_adapter_tensors(ft.model, tensors, meta['finetune']['rank'], meta['finetune']['alpha']).eval()
        ft.name = f'{sf}+{t}'
        for a in sorted({0, anchors}):
            g = grid_with_anchors(t, 500, a)
            D = Descriptor.from_encoders(ft, source, g, cache=cache)
            bank = OperatorBank.build(target, {t: g}, {(sf, t): D}, SolveConfig(max_move=None, floor_f=FLOOR, floor_t=FLOOR, center=False), cache=cache)
            sc = Scorer(bank, {k: evals[k] for k in [t] + world.list_tasks(controls=True)}, cache=cache)
            z = sc.score({(sf, t): 0.0})
            out = []
            for s in (0.5, 1.0):
                acc = sc.score({(sf, t): s})
                out.append(f's{s}: gain {100 * (acc[t] - z[t]):+.1f} ' + ' '.join(f'{c} {100 * (acc[c] - z[c]):+.1f}' for c in world.list_tasks(controls=True)))
            print(f'{t:<8} anchors {a:<4} zs {z[t]:.3f} | ' + ' | '.join(out), flush=True)
