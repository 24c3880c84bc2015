"""What runtime/gen_*.py share: a generated header is written, or with --check compared."""
import argparse
import sys


def write_or_check(header, text, description, stale):
    """Write text to header, or with --check exit 1 (printing `stale`) when header differs."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    if ap.parse_args().check:
        if not header.exists() or header.read_text() != text:
            print(f"{header} {stale}", file=sys.stderr)
            return 1
        return 0
    header.write_text(text)
    return 0
