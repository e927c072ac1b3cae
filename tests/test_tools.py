"The dev tools in tools/ parse their arguments with argparse: each answers --help, and bad arguments are usage errors."
import subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = sorted(p.name for p in (ROOT / 'tools').glob('*.py') if p.name != 'toolargs.py')


def run_tool(name, *args):
    return subprocess.run([sys.executable, str(ROOT / 'tools' / name), *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.slow   # each tool imports torch and the library: seconds apiece
@pytest.mark.parametrize('name', TOOLS)
def test_tool_answers_help(name):
    r = run_tool(name, '--help')
    assert r.returncode == 0 and r.stdout.startswith('usage: ' + name), r.stdout + r.stderr
    assert 'positional arguments' in r.stdout and '(dev tool)' in r.stdout


@pytest.mark.slow
def test_tool_refuses_bad_json_and_unknown_names():
    r = run_tool('calibrate_grounding.py', 'vit_w96', 'try', '{"weaves": 0.01')
    assert r.returncode == 2 and 'is not JSON' in r.stderr, r.stderr
    r = run_tool('calibrate_grounding.py', 'vit_w96', 'try', '{"no_such_task": 0.01}')
    assert r.returncode == 2 and "unknown tasks ['no_such_task']" in r.stderr, r.stderr


def test_json_object_and_check_names():
    sys.path.insert(0, str(ROOT / 'tools'))
    import argparse
    from toolargs import json_object, check_names, tool_parser
    assert json_object('{"lr": 0.001}') == {'lr': 0.001}
    for bad, msg in (('{"lr": 0.001', 'is not JSON'), ('[1, 2]', 'is not a JSON object')):
        with pytest.raises(argparse.ArgumentTypeError, match=msg): json_object(bad)
    ap = tool_parser('A tool.\n\nMore about it.')
    check_names(ap, 'tasks', ['a'], ['a', 'b'])
    with pytest.raises(SystemExit): check_names(ap, 'tasks', ['c'], ['a', 'b'])
    assert ap.description == 'A tool.' and ap.epilog == 'More about it.'
