import os, pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
