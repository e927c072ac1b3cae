"""Evaluate one built zoo family (dev tool): zero-shot, linear probe and its seed-0 fine-tunes, per task.

Usage: .venv/bin/python tools/eval_family.py FAMILY ZOO_FOLDER
Evaluation as tools/calibrate_family.py: 500 test images per task, probe fitted on 1,000 training images, one thread."""
import sys, torch
torch.set_num_threads(1)
from pathlib import Path
from platonic_ta.zoo import load_base, load_finetune, class_embeddings, predict, linear_probe_accuracy, ArtifactError
from platonic_ta import world
fam, zoo = sys.argv[1], Path(sys.argv[2])
enc = load_base(fam, zoo)
for t in world.list_tasks():
    te = world.load_task(t, 'test', 500); tr = world.load_task(t, 'train', 1000)
    T = class_embeddings(enc, te.classnames, te.templates)
    zs = (predict(enc, te.images, T) == te.labels).float().mean().item()
    line = f'{t:<10} chance {1/len(te.classnames):.2f} zs {zs:.3f} probe {linear_probe_accuracy(enc, tr, te):.3f}'
    if t in world.list_tasks(controls=False):
        try: line += f' ft {(predict(load_finetune(fam, t, 0, zoo, enc), te.images, T) == te.labels).float().mean().item():.3f}'
        except ArtifactError as e: line += f' ft missing ({e})'
    print(line, flush=True)
