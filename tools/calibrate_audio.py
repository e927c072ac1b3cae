"""Calibrate the audio world's grounding rates on one audio family (dev tool).

Pretrains the family with grounding-rate overrides, then prints zero-shot and linear-probe accuracy per audio task,
and the accuracy of source fine-tunes of some tasks with how far each moves the other tasks.
Example: .venv/bin/python tools/calibrate_audio.py FAMILY try1 '{"events": 0.1}' 400 events,genres
It scores TEST images: it compares candidate worlds and recipes for the record. No setting of the method (the solve,
its ridges and budgets, probe and context counts, strengths) is chosen with it: those come from held-out training
images by the rules the stage notebooks state."""
import sys, time, json, torch
torch.set_num_threads(1)
from platonic_ta import audio_world
from platonic_ta.audio_zoo import AUDIO_FAMILIES, pretrain_audio, finetune_audio
from platonic_ta.encoders import linear_probe_accuracy, zero_shot_accuracy

if __name__ == '__main__':
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser, json_object, check_names
    ap = tool_parser(__doc__)
    ap.add_argument('family', choices=list(AUDIO_FAMILIES), metavar='FAMILY', help='the audio family to pretrain: %(choices)s')
    ap.add_argument('tag', help='a name for this try, printed on every line')
    ap.add_argument('rates', nargs='?', type=json_object, default={},
                    help='grounding rate per audio task, e.g. \'{"events": 0.1}\' (default: the world\'s own)')
    ap.add_argument('steps', nargs='?', type=int, default=None, help="pretraining steps (default: the family's own)")
    ap.add_argument('ft_tasks', nargs='?', default='', help="comma-separated tasks to fine-tune with the family's recipe (default: none)")
    a = ap.parse_args()
    fam, tag, rates, steps = a.family, a.tag, a.rates, a.steps
    ft_tasks = [t for t in a.ft_tasks.split(',') if t]
    check_names(ap, 'audio tasks', [*rates, *ft_tasks], audio_world.TASKS)
    for t, r in rates.items(): audio_world.TASKS[t].grounding = float(r)
    t0, c0 = time.time(), time.process_time()
    enc, losses = pretrain_audio(fam, steps, progress=False)
    print(fam, tag, rates, f'pretrain {time.time() - t0:.0f}s wall {time.process_time() - c0:.0f}s cpu '
          f'loss {losses[0]:.2f} -> {sum(losses[-50:]) / 50:.3f}', flush=True)
    test = {t: audio_world.load_task(t, 'test', 400) for t in audio_world.list_tasks()}
    for t in audio_world.list_tasks():
        zs = zero_shot_accuracy(enc, test[t])
        pr = linear_probe_accuracy(enc, audio_world.load_task(t, 'train', 800), test[t])
        print(f'{fam} {tag} {t:8s} chance {1 / len(test[t].classnames):.2f} zero-shot {zs:.3f} probe {pr:.3f}', flush=True)
    ctl = [t for t in audio_world.list_tasks() if t not in ft_tasks]
    before = {c: zero_shot_accuracy(enc, test[c]) for c in ctl}
    for t in ft_tasks:
        t1 = time.time()
        ft = finetune_audio(enc, t, progress=False)[0]
        after = {c: zero_shot_accuracy(ft, test[c]) for c in ctl}
        print(f'{fam} {tag} ft {t}: {zero_shot_accuracy(enc, test[t]):.3f} -> {zero_shot_accuracy(ft, test[t]):.3f} '
              f'others move ' + ' '.join(f'{c} {100 * (after[c] - before[c]):+.1f}' for c in ctl) + f' ({time.time() - t1:.0f}s)', flush=True)
