import os, pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Tests never download: checkpoint and tokenizer lookups go through the product's offline switch (read at each call).
os.environ.setdefault('HF_HUB_OFFLINE', '1')

@pytest.fixture(scope='session')
def root(): return ROOT

@pytest.fixture(scope='session')
def cache_dir(tmp_path_factory):
    "A private cache for the whole test session: tests never touch the user's ~/.cache/platonic_ta."
    d = tmp_path_factory.mktemp('platonic_ta_cache')
    os.environ['PLATONIC_TA_CACHE'] = str(d)
    return d


def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: heavy checks, skipped unless PLATONIC_TA_SLOW=1 (make test-slow)')

def pytest_collection_modifyitems(config, items):
    "Tests marked slow run only under `make test-slow` (PLATONIC_TA_SLOW=1), like nbdev's `#| slow` cells."
    if os.environ.get('PLATONIC_TA_SLOW') == '1': return
    skip = pytest.mark.skip(reason='slow: run `make test-slow`')
    for item in items:
        if 'slow' in item.keywords: item.add_marker(skip)

def pytest_terminal_summary(terminalreporter):
    "Report how many inputs the property-based suite (tests/test_fuzz.py) tried."
    import sys
    mod = sys.modules.get('test_fuzz')
    counts, examples = getattr(mod, 'COUNTS', None), getattr(mod, 'EXAMPLES', None)
    if counts:
        terminalreporter.write_line(f"hypothesis: {sum(examples.values())} inputs generated over {len(examples)} properties, "
                                    f"{sum(counts.values())} calls tried over {len(counts)} functions and loaders "
                                    f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
