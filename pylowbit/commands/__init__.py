"""CLI subcommands; each module has add_parser(subparsers) and main(args)."""
