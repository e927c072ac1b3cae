"""Calibrate the audio world's grounding rates on one audio family (dev tool): pretrain with rate overrides, then
zero-shot and a linear probe per task, and source fine-tunes of some tasks (their accuracy and the controls' move).

Usage: .venv/bin/python tools/calibrate_audio.py FAMILY TAG '{"events": 0.1, ...}' [STEPS] [FT_TASKS]
  FT_TASKS: comma-separated tasks to fine-tune with the family's recipe (default: none)."""
import sys, time, json, torch
torch.set_num_threads(1)
from platonic_ta import audio_world
from platonic_ta.audio_zoo import AUDIO_FAMILIES, pretrain_audio, finetune_audio, audio_accuracy
from platonic_ta.encoders import linear_probe_accuracy

if __name__ == '__main__':
    fam, tag = sys.argv[1], sys.argv[2]
    rates = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else None
    ft_tasks = [t for t in (sys.argv[5] if len(sys.argv) > 5 else '').split(',') if t]
    for t, r in rates.items(): audio_world.TASKS[t].grounding = float(r)
    t0, c0 = time.time(), time.process_time()
    enc, losses = pretrain_audio(fam, steps, progress=False)
    print(fam, tag, rates, f'pretrain {time.time() - t0:.0f}s wall {time.process_time() - c0:.0f}s cpu '
          f'loss {losses[0]:.2f} -> {sum(losses[-50:]) / 50:.3f}', flush=True)
    test = {t: audio_world.load_task(t, 'test', 400) for t in audio_world.list_tasks()}
    for t in audio_world.list_tasks():
        zs = audio_accuracy(enc, test[t])
        pr = linear_probe_accuracy(enc, audio_world.load_task(t, 'train', 800), test[t])
        print(f'{fam} {tag} {t:8s} chance {1 / len(test[t].classnames):.2f} zero-shot {zs:.3f} probe {pr:.3f}', flush=True)
    ctl = [t for t in audio_world.list_tasks() if t not in ft_tasks]
    before = {c: audio_accuracy(enc, test[c]) for c in ctl}
    for t in ft_tasks:
        t1 = time.time()
        ft = finetune_audio(enc, t, progress=False)[0]
        after = {c: audio_accuracy(ft, test[c]) for c in ctl}
        print(f'{fam} {tag} ft {t}: {audio_accuracy(enc, test[t]):.3f} -> {audio_accuracy(ft, test[t]):.3f} '
              f'others move ' + ' '.join(f'{c} {100 * (after[c] - before[c]):+.1f}' for c in ctl) + f' ({time.time() - t1:.0f}s)', flush=True)
