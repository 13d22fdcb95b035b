"""Compare two outputs of scripts/fingerprint.py:

    python3 scripts/fingerprint_compare.py BASE.json NEW.json

Prints each entry that differs (for a record, the fields that differ, as
(base, new) pairs; None where a field is missing) or is in one file only,
then a one-line verdict.  Exit status 0 when every entry is identical, 1 on
any difference, 2 on a usage error.
"""
import json
import sys


def differences(base, new):
    """{key: what differs} over the keys of both fingerprints."""
    diffs = {}
    for key in sorted(set(base) | set(new)):
        a, b = base.get(key), new.get(key)
        if a == b:
            continue
        if key not in new or key not in base:
            diffs[key] = "only in " + ("base" if key in base else "new")
        elif isinstance(a, dict) and isinstance(b, dict):
            diffs[key] = {f: (a.get(f), b.get(f)) for f in sorted(set(a) | set(b))
                          if a.get(f) != b.get(f)}
        else:
            diffs[key] = (a, b)
    return diffs


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    base, new = (json.load(open(path)) for path in argv)
    diffs = differences(base, new)
    for key, diff in diffs.items():
        print("DIFF", key, diff)
    entries = len(set(base) | set(new))
    if diffs:
        print(f"DIFFERENT: {len(diffs)} of {entries} entries differ ({argv[0]} vs {argv[1]})")
    else:
        print(f"IDENTICAL: all {entries} entries agree bit for bit ({argv[0]} vs {argv[1]})")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
