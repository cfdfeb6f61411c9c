"""Print a summary row and the top lines of each hazard report (``torchport-hazards/1`` JSON files)."""
import json
import os
import sys

for path in sys.argv[1:]:
    d = json.load(open(path))
    s = d["summary"]
    shapes = sum(h["shapes"] for h in d["hazards"] if h["kind"] == "shapes")
    print(f"| {os.path.basename(path)[:-5]} | {d['steps']} | {s['host-sync']:.1f} | {d['cpu_fallback_share'] * 100:.1f}% "
          f"| {shapes} | {s['float64']:.1f} | {s['int64']:.1f} |")
    for t in d["top_lines"][:3]:
        h = max((h for h in d["hazards"] if h["site"] == t["site"]), key=lambda h: h["count"])
        print(f"|   | `{t['site']}` ({t['events']}) | {h['kind']}: {h['flavour']} | `{h['op'][:60]}` | `{h['code'][:60]}` | | |")
