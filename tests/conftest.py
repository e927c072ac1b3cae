import os, pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Tests never download: checkpoint and tokenizer lookups go through the product's offline switch (read at each call).
os.environ.setdefault('HF_HUB_OFFLINE', '1')

@pytest.fixture(scope='session')
def root(): return ROOT

@pytest.fixture(scope='session')
def cache_dir(tmp_path_factory):
    """A private cache for the whole test session: tests never touch the user's ~/.cache/platonic_ta.
    Under pytest-xdist the workers share one (the micro zoo is built once, each artefact under its lock);
    `PLATONIC_TA_TEST_CACHE` names one that several pytest runs share (make test: the parallel and the serial part)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get('PLATONIC_TA_TEST_CACHE'): d = Path(os.environ['PLATONIC_TA_TEST_CACHE'])
    elif os.environ.get('PYTEST_XDIST_WORKER'): d = base.parent / 'platonic_ta_cache'
    else: d = base / 'platonic_ta_cache'
    d.mkdir(parents=True, exist_ok=True)
    os.environ['PLATONIC_TA_CACHE'] = str(d)
    return d


def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: heavy checks, skipped unless PLATONIC_TA_SLOW=1 (make test-slow)')
    config.addinivalue_line('markers', 'serial: tests that time several processes of their own (Ray, builders, a killed '
                                       'build); `make test` runs them after the parallel part, one at a time')
    config.addinivalue_line('markers', 'xdist_group(name): tests that pytest-xdist keeps on one worker, in file order')

def pytest_collection_modifyitems(config, items):
    "Tests marked slow run only under `make test-slow` (PLATONIC_TA_SLOW=1), like nbdev's `#| slow` cells."
    if os.environ.get('PLATONIC_TA_SLOW') == '1': return
    skip = pytest.mark.skip(reason='slow: run `make test-slow`')
    for item in items:
        if 'slow' in item.keywords: item.add_marker(skip)

def _fuzz_counts():
    "The property-based suite's counters (tests/test_fuzz.py), if it ran in this process."
    import sys
    mod = sys.modules.get('test_fuzz')
    return dict(getattr(mod, 'COUNTS', None) or {}), dict(getattr(mod, 'EXAMPLES', None) or {})

_REMOTE = ({}, {})   # counters sent back by pytest-xdist workers (make test runs the suite on two)

def pytest_sessionfinish(session):
    "On an xdist worker, hand the counters to the controller."
    if hasattr(session.config, 'workeroutput'):
        counts, examples = _fuzz_counts()
        session.config.workeroutput['fuzz_counts'], session.config.workeroutput['fuzz_examples'] = counts, examples

@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    "On the xdist controller, add up each worker's counters."
    out = getattr(node, 'workeroutput', {})
    for acc, key in zip(_REMOTE, ('fuzz_counts', 'fuzz_examples')):
        for k, v in out.get(key, {}).items(): acc[k] = acc.get(k, 0) + v

def pytest_terminal_summary(terminalreporter):
    "Report how many inputs the property-based suite (tests/test_fuzz.py) tried, in this process or on the workers."
    counts, examples = _fuzz_counts()
    for acc, mine in zip(_REMOTE, (counts, examples)):
        for k, v in acc.items(): mine[k] = mine.get(k, 0) + v
    if counts:
        terminalreporter.write_line(f"hypothesis: {sum(examples.values())} inputs generated over {len(examples)} properties, "
                                    f"{sum(counts.values())} calls tried over {len(counts)} functions and loaders "
                                    f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")

def pytest_sessionstart(session):
    """make test's parallel run: the controller builds the micro zoo on both cores before the workers start (each
    worker then finds it built, instead of one worker building it on one core while the other waits on its locks)."""
    shared = os.environ.get('PLATONIC_TA_TEST_CACHE')
    if not shared or os.environ.get('PYTEST_XDIST_WORKER') or not getattr(session.config.option, 'numprocesses', None): return
    os.environ['PLATONIC_TA_CACHE'] = shared
    from platonic_ta.zoo import get_zoo
    get_zoo('micro', workers=2, progress=False)
