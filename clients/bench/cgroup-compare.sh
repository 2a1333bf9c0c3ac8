#!/usr/bin/env bash
# `fluxgate bench real` with the exec service's cgroups on and off, in the
# same script: runs alternate (on, off, on, off, ...) so that the machine's
# other load falls on both alike; prints each run and the medians of
# jobs/s and of the exec service's CPU milliseconds a job.
#
#   clients/bench/cgroup-compare.sh [FLUXGATE] [JOBS] [RUNS]
#
# FLUXGATE defaults to target/release/fluxgate; run as root (cgroups on
# needs a writable cgroup tree; the mode each run got is printed).
set -euo pipefail
B=${1:-target/release/fluxgate}
JOBS=${2:-1000}
RUNS=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$RUNS"); do
    for mode in auto off; do
        FLUXGATE_CGROUP_MODE=$mode "$B" bench real --jobs "$JOBS" --runs 1 --json \
            2>"$out/err" >>"$out/$mode.json" || { cat "$out/err" >&2; exit 1; }
    done
done
python3 - "$out" <<'PY'
import json, statistics, sys
d = sys.argv[1]
def runs(mode):
    text = open(f"{d}/{mode}.json").read()
    dec, i, out = json.JSONDecoder(), 0, []
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        obj, i = dec.raw_decode(text, i)
        out.extend(obj if isinstance(obj, list) else [obj])
    return out
med = {}
for mode, name in (("auto", "cgroups on"), ("off", "cgroups off")):
    rs = runs(mode)
    jps = [r["jobs_per_sec"] for r in rs]
    cpu = [r["cpu_ms_per_job"]["exec"] for r in rs]
    fails = sum(r.get("failed") or 0 for r in rs)
    med[mode] = (statistics.median(jps), statistics.median(cpu))
    print(f"{name:11}: jobs/s {[round(x) for x in jps]} median {med[mode][0]:.0f}; "
          f"exec cpu ms/job {[round(x, 2) for x in cpu]} median {med[mode][1]:.2f}; failed {fails}")
(on_j, on_c), (off_j, off_c) = med["auto"], med["off"]
print(f"cgroups on / off: {100 * on_j / off_j:.0f}% of the throughput, "
      f"{on_c - off_c:+.2f} ms exec CPU a job")
PY
