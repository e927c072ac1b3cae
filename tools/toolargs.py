"""Command-line parsing shared by the dev tools in this folder: a parser whose --help is the tool's docstring,
JSON-object arguments with a clear error, and a check of names against a known set."""
import argparse, json


def tool_parser(doc: str) -> argparse.ArgumentParser:
    "A parser for a tool: the docstring's first line describes it, the rest follows the options in --help."
    first, _, rest = doc.strip().partition('\n')
    return argparse.ArgumentParser(description=first, epilog=rest.strip() or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def json_object(text: str) -> dict:
    "A JSON object given on the command line (quote it for the shell), or a usage error saying what is wrong."
    try: value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({e}); write it as '{{\"key\": value}}', in single quotes")
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object; write it as '{{\"key\": value}}'")
    return value


def check_names(ap: argparse.ArgumentParser, what: str, names, known) -> None:
    "Stop with a usage error when `names` holds one not in `known`, listing the known ones."
    unknown = sorted(set(names) - set(known))
    if unknown: ap.error(f'unknown {what} {unknown}; known: {sorted(known)}')
