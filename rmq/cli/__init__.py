"""The ``rmq`` command line (subcommands are added by the daemon work)."""
import argparse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="rmq", description=__doc__)
    parser.parse_args(argv)
    parser.print_help()
    return 0
