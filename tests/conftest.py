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
