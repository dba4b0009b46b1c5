"""Print the SCAN lines of scan.py logs as one table row each."""

import json
import sys

for path in sys.argv[1:]:
    for line in open(path):
        if not line.startswith("SCAN"):
            continue
        _, m, rest = line.rstrip().split(" ", 2)
        i = rest.index("} {")
        v = json.loads(rest[: i + 1])
        r = json.loads(rest[i + 2 :])
        print(
            m.split("/")[-1][:6],
            v.get("family", "syn")[:9],
            v.get("inventory"),
            v.get("objects"),
            "solid" if v.get("patterns") else "all",
            v.get("cluster_size", ""),
            "val {:.1f}/{:.1f}".format(*tuple(r["val"])),
            "mean {:.3f} hard {:.3f} f8 {:.2f} p9 {:.2f}".format(
                r["mean"], r["hardest"], r["frac08"], r["pair09"]
            ),
            "lossmed {:.2g} sat {:.2f} eff {:.1f}".format(r["loss_median"], r["sat"], r["eff"]),
        )
