"""Compare two fingerprint JSON files: python3 scripts/fingerprint_compare.py A.json B.json"""
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
bad = 0
for k in sorted(set(a) | set(b)):
    if a.get(k) != b.get(k):
        bad += 1
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            diff = {f: (va.get(f), vb.get(f)) for f in set(va) | set(vb) if va.get(f) != vb.get(f)}
        else:
            diff = (va, vb)
        print("DIFF", k, diff)
print(f"{len(set(a)|set(b))} entries, {bad} differ")
sys.exit(1 if bad else 0)
