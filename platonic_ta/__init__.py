__version__ = "0.1.0"

# The public API: `from platonic_ta import OperatorBank` and friends. Each name is imported from its module on first
# use, so `import platonic_ta` stays light (the command line and worker processes pay only for what they touch).
_API = {
    'world': ['list_tasks', 'load_task'],
    'tasks': ['register_task', 'register_folder_task', 'folder_images'],
    'families': ['FAMILIES', 'FamilySpec', 'FinetuneConfig'],
    'encoders': ['DualEncoder', 'zero_shot_accuracy', 'linear_probe_accuracy', 'probe_accuracy'],
    'checkpoints': ['open_clip_encoder', 'load_open_clip'],
    'training': ['pretrain', 'finetune'],
    'zoo': ['Zoo', 'get_zoo', 'build_zoo'],
    'grids': ['Grid', 'make_grid', 'zoo_grids', 'ContextWarning'],
    'cache': ['EmbeddingCache'],
    'descriptors': ['Descriptor'],
    'factorization': ['SolveConfig', 'solve_operator'],
    'edits': ['fold_operator', 'save_edited', 'load_edited'],
    'composition': ['OperatorBank'],
    'scoring': ['Scorer', 'certify_edit'],
    'widgets': ['make_sliders'],
    'adapter': ['AdapterConfig', 'fit_adapter', 'load_adapter'],
    'residuals': ['shared_component'],
}
_WHERE = {name: mod for mod, names in _API.items() for name in names}
__all__ = ['__version__', *_WHERE]

def __getattr__(name):
    if name not in _WHERE: raise AttributeError(f"module 'platonic_ta' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f'{__name__}.{_WHERE[name]}'), name)
    globals()[name] = value
    return value

def __dir__(): return sorted(set(globals()) | set(_WHERE))
