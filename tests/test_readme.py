"The README's quick start runs as written, on the shipped zoo, and the transfer it prints is a gain."
import contextlib, io, re
import pytest
import platonic_ta

def quick_start(text: str) -> str:
    "The first python code block under the README's `## Quick start` heading."
    m = re.search(r'^## Quick start\n(.*?)(?=^## )', text, re.M | re.S)
    if m is None: raise AssertionError('the README has no "## Quick start" section')
    code = re.search(r'^```python\n(.*?)^```', m.group(1), re.M | re.S)
    if code is None: raise AssertionError('the quick start section has no python code block')
    return code.group(1)

def test_quick_start_is_found_where_it_stands():
    text = '# x\n## Quick start\nprose\n```sh\nmake\n```\n```python\nprint(1)\n```\n## Next\n```python\nprint(2)\n```\n'
    assert quick_start(text) == 'print(1)\n'
    with pytest.raises(AssertionError, match='no python code block'): quick_start('## Quick start\ntext\n## Next\n')
    with pytest.raises(AssertionError, match='no "## Quick start"'): quick_start('# x\n```python\nprint(1)\n```\n')

def test_readme_quick_start_transfers_a_task(root, cache_dir):
    code = quick_start((root / 'README.md').read_text())
    assert len(code.strip().splitlines()) <= 10, 'the quick start is at most ten lines'
    used = {n.strip() for n in re.search(r'from platonic_ta import ([^\n]+)', code).group(1).split(',')}
    assert used <= set(platonic_ta.__all__), sorted(used - set(platonic_ta.__all__))
    out = io.StringIO()
    with contextlib.redirect_stdout(out): exec(compile(code, 'README quick start', 'exec'), {})
    m = re.search(r'(\S+) on (\S+): ([\d.]+)% -> ([\d.]+)% \(([+-][\d.]+) points', out.getvalue())
    assert m, f'the quick start printed {out.getvalue()!r}'
    before, after, gain = float(m[3]), float(m[4]), float(m[5])
    assert abs(after - before - gain) < 0.06 and gain >= 10, f'a transfer of {gain} points'
    o = re.search(r'the other (\d+) tasks: ([+-][\d.]+) points on average', out.getvalue())
    assert o, f'the quick start does not print what the edit does to the other tasks: {out.getvalue()!r}'
    assert int(o[1]) == len(platonic_ta.list_tasks()) - 1 and float(o[2]) >= -3, f'the other tasks moved by {o[2]} points'

def test_public_api_names_resolve():
    for name in platonic_ta.__all__: assert getattr(platonic_ta, name) is not None, name
    with pytest.raises(AttributeError, match='no attribute'): platonic_ta.not_a_name


def audio_quick_start(text: str) -> str:
    "The python code block under the README's `### The same on sound` heading."
    m = re.search(r'^### The same on sound\n(.*?)(?=^##)', text, re.M | re.S)
    if m is None: raise AssertionError('the README has no "### The same on sound" section')
    return re.search(r'^```python\n(.*?)^```', m.group(1), re.M | re.S).group(1)


def test_readme_audio_quick_start_transfers_a_task(root, cache_dir):
    code = audio_quick_start((root / 'README.md').read_text())
    out = io.StringIO()
    with contextlib.redirect_stdout(out): exec(compile(code, 'README audio quick start', 'exec'), {})
    m = re.search(r'on events: ([\d.]+)% -> ([\d.]+)% \(([+-][\d.]+) points.*the other (\d+) tasks: ([+-][\d.]+) points', out.getvalue())
    assert m, f'the audio quick start printed {out.getvalue()!r}'
    assert float(m[3]) >= 5 and float(m[5]) >= -3, f'a transfer of {m[3]} points for {m[5]} on the other tasks'
