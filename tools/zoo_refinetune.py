"""Fine-tune one family of a zoo again with another recipe, into a scratch copy (dev tool): a cheap recipe trial.

Copies ZOO (a zoo folder, or 'shipped') to OUT unless OUT exists, deletes the given family's fine-tunes there, and
fine-tunes its base again on every edit task (or the tasks named) with the family's recipe updated by OVERRIDES,
one process, the given seeds (default 0). Bases are kept, so a trial costs minutes, not a rebuild. OUT is a scratch
folder: open it with get_zoo(OUT) or tools/zoo_transfer.py OUT (which reads the files and does not check recipes).
Two families can be trialled at once into one OUT from two shells (each writes only its own family's folder).
Example: .venv/bin/python tools/zoo_refinetune.py shipped /tmp/zooA timm_avg '{"rank": 8, "alpha": 16.0, "lr": 0.01}'"""
import sys, shutil, torch
from pathlib import Path

if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).parent))
    from toolargs import tool_parser, json_object, check_names
    ap = tool_parser(__doc__)
    ap.add_argument('zoo', help="the zoo to copy: a zoo folder, or 'shipped' (the package's)")
    ap.add_argument('out', type=Path, help='the scratch copy to fine-tune into (made when missing)')
    ap.add_argument('family', help='the family to fine-tune again')
    ap.add_argument('overrides', type=json_object, help='recipe settings over the family\'s own, e.g. \'{"distill": 1.0}\'')
    ap.add_argument('tasks', nargs='*', help='edit tasks (default: every edit task of the world)')
    ap.add_argument('--seeds', type=int, nargs='+', default=[0], help='fine-tune seeds (default: 0)')
    a = ap.parse_args()
    from platonic_ta import families, world
    from platonic_ta.zoo import build_zoo, shipped_zoo_dir
    check_names(ap, 'families', [a.family], families.FAMILIES)
    check_names(ap, 'tasks', a.tasks, world.list_tasks(controls=False))
    src = shipped_zoo_dir() if a.zoo == 'shipped' else Path(a.zoo)
    if not (src / a.family / 'base.safetensors').exists(): ap.error(f'{src} holds no base of {a.family}')
    if a.out.resolve() in (src.resolve(), shipped_zoo_dir().resolve()): ap.error('OUT must be a scratch copy, not the zoo itself')
    families.FAMILIES[a.family].finetune = {**families.FAMILIES[a.family].finetune, **a.overrides}   # this process only
    try: print(a.family, families.finetune_recipe(a.family))   # the recipe the build records, checked
    except (KeyError, TypeError, ValueError) as e: ap.error(f'overrides {a.overrides}: {e}')
    if not a.out.exists():
        shutil.copytree(src, a.out)
        (a.out / 'MANIFEST.json').unlink(missing_ok=True)     # a copy is no shipped zoo
    for p in (a.out / a.family / 'ft').glob('*'): p.unlink()
    torch.set_num_threads(1)
    build_zoo(families=[a.family], tasks=a.tasks or world.list_tasks(controls=False), seeds=tuple(a.seeds), zoo=a.out,
              workers=1, progress=False)
    print(f'{a.out}: {a.family} fine-tuned again')
