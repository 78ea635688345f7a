"""`pylowbit` command line: one subcommand per module in pylowbit.commands."""
from __future__ import annotations

import argparse
import importlib
import sys

# Each module exposes add_parser(subparsers) and main(args) -> int.
COMMANDS = ["info", "bench", "run", "serve", "perplexity", "quantize"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="pylowbit", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    argv = sys.argv[1:] if argv is None else list(argv)
    # Only the named command's module is imported (the others' imports, e.g. bench's statistics
    # and decimal, would stay resident through a whole `run`); all of them for help and errors.
    names = [argv[0]] if argv and argv[0] in COMMANDS else COMMANDS
    for name in names:
        try:
            mod = importlib.import_module(f"pylowbit.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"pylowbit.commands.{name}":
                raise
            continue  # command not part of this build
        mod.add_parser(sub).set_defaults(_main=mod.main)
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    try:
        return int(args._main(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, RuntimeError) as e:
        # User-facing errors: one clear line, no traceback.
        print(f"pylowbit {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
