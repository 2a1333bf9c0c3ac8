#!/usr/bin/env bash
# The job shell's benchmarks, on this machine, with release binaries:
#  1. `fluxgate run -N2 -n4 mpi_hello` (MPICH over PMI-1) against
#     `fluxgate run -N2 -n4 true` in the same instance: medians of RUNS runs.
#  2. The PMI barrier and exchange over N exec services x 4 tasks, for N in
#     NODES: the time from the last task entering the barrier to the last
#     leaving it (the fence across the nodes), median of ROUNDS jobs.
# Usage: clients/bench/scripts/job-shell.sh   (RUNS=20 ROUNDS=3 NODES="8 16 32 64")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=${FLUXGATE_BIN:-$root/target/release}
F=$bin/fluxgate
runs=${RUNS:-20}
rounds=${ROUNDS:-3}
nodes=${NODES:-"8 16 32 64"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$F" ] || { echo "no $F: cargo build --release --bins" >&2; exit 1; }
command -v mpicc >/dev/null || { echo "mpicc missing: apt-get install mpich libmpich-dev" >&2; exit 1; }
mpicc -O2 -o "$work/mpi_hello" "$root/integration-tests/mpi/hello.c"
export PATH=$bin:$PATH

calc() { awk "BEGIN { print $1 }"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# 1. Wall time of a run, alternating the two commands so load hits both.
cat >"$work/runs.sh" <<'SH'
set -e
for i in $(seq "$RUNS"); do
    for what in true hello; do
        cmd=true; [ $what = hello ] && cmd=$WORK/mpi_hello
        t0=$(date +%s.%N)
        out=$(fluxgate run -N2 -n4 "$cmd")
        t1=$(date +%s.%N)
        if [ $what = hello ]; then
            [ "$(echo "$out" | grep -c 'of 4$')" = 4 ] || { echo "bad output: $out" >&2; exit 1; }
        fi
        echo "$what $(awk "BEGIN { print $t1 - $t0 }")"
    done
done
SH
RUNS=$runs WORK=$work fluxgate start --size 2 --cores-per-node 4 -- sh "$work/runs.sh" >"$work/runs"
t_true=$(awk '$1=="true"{print $2}' "$work/runs" | median)
t_hello=$(awk '$1=="hello"{print $2}' "$work/runs" | median)
printf 'run -N2 -n4 true:      %.1f ms (median of %d)\n' "$(calc "$t_true*1000")" "$runs"
printf 'run -N2 -n4 mpi_hello: %.1f ms (median of %d), %.1f ms over true\n' \
    "$(calc "$t_hello*1000")" "$runs" "$(calc "($t_hello-$t_true)*1000")"

# 2. The fence over N nodes.
prev=
for n in $nodes; do
    tasks=$((n * 4))
    cat >"$work/pmi.sh" <<SH
set -e
for i in \$(seq $rounds); do
    fluxgate run -N$n -n$tasks python3 $here/pmi_barrier.py >"$work/pmi.\$i"
    [ "\$(wc -l <"$work/pmi.\$i")" = $tasks ]
    awk 'BEGIN{e=0;l=0} {if (\$1>e) e=\$1; if (\$2>l) l=\$2} END{print l-e}' "$work/pmi.\$i"
done
SH
    fluxgate start --size "$n" --cores-per-node 4 --start-timeout 300 -- sh "$work/pmi.sh" >"$work/fence.$n"
    f=$(median <"$work/fence.$n")
    ratio=
    [ -n "$prev" ] && ratio=$(printf ', %.2fx the previous' "$(calc "$f/$prev")")
    printf 'PMI barrier, %3d nodes x 4 tasks: %.1f ms (median of %d)%s\n' \
        "$n" "$(calc "$f*1000")" "$rounds" "$ratio"
    prev=$f
done
