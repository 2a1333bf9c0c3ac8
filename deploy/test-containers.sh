#!/usr/bin/env bash
# Container end-to-end test: build the image with no registry, make the
# secrets (deploy/make-secrets.sh, in a temporary directory), bring up the
# compose file with auth on (a job manager and node0..node3), and from this host:
#   0. a client without a token, or with one from another key, is refused;
#      with a token made from the instance key it is served;
#   1. run a 4-node job and read the four hostnames;
#   2. SIGKILL one exec container while a 4-node job runs: the job gets an
#      exception and ends, the node is offline in `fluxgate resource status`;
#   3. stop (SIGTERM) and start the job manager container while a job runs:
#      it exits 0, every job is still there and the running one finishes;
#   4. stop the rest: every service exits 0 on SIGTERM;
# then take everything down (containers, network, volume, secrets), even on failure.
#
#   deploy/test-containers.sh      (needs Docker Engine + docker-compose and
#                                   the debug binaries: cargo build --workspace)
#
# It prints the image size and how long it took, and ends with "N passed, N failed".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
bindir=${FLUXGATE_BIN_DIR:-${CARGO_TARGET_DIR:-$repo/target}/debug}
cli=$bindir/fluxgate
image=${FLUXGATE_IMAGE:-fluxgate:local}
project=fluxgate-e2e-$$
started=$(date +%s)
passed=0
failed=0

if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
else
    compose_cmd=(docker-compose)
fi
compose() { "${compose_cmd[@]}" -p "$project" -f "$here/docker-compose.yml" "$@"; }

secrets_dir=$(mktemp -d)
cleanup() {
    compose down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1 || true
    rm -rf "$secrets_dir"
}
trap cleanup EXIT

log() { printf '== %s\n' "$*"; }
ok() { passed=$((passed + 1)); printf 'ok: %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL: %s\n' "$*"; }
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}
finish() {
    printf '%s passed, %s failed\n' "$passed" "$failed"
    [ "$failed" -eq 0 ]
}
# Poll `$@` until it succeeds or `$1` seconds pass.
eventually() {
    local limit=$1
    shift
    local deadline=$(($(date +%s) + limit))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.5
    done
}
container() { compose ps -q "$1"; }
health() { docker inspect -f '{{.State.Health.Status}}' "$(container "$1")"; }
healthy() { [ "$(health "$1")" = healthy ]; }
exit_code() { docker inspect -f '{{.State.ExitCode}}' "$(container "$1")"; }
all_healthy() {
    local s
    for s in job-manager node0 node1 node2 node3; do healthy "$s" || return 1; done
}

[ -x "$cli" ] || { echo "test-containers: $cli is missing: run cargo build --workspace" >&2; exit 1; }

log "building $image"
"$here/build-local-image.sh" "$image" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$image")
log "image $image: $((size / 1000000)) MB"

# A free host port for the job manager, so that runs do not collide.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export FLUXGATE_IMAGE=$image FLUXGATE_PORT=$port
export FLUXGATE_URI=http://127.0.0.1:$port

log "secrets: instance key and node token (make-secrets.sh)"
export FLUXGATE_SECRETS=$secrets_dir/secrets
FLUXGATE_CLI=$cli "$here/make-secrets.sh" "$FLUXGATE_SECRETS" >/dev/null
# The owner's token (uid 1000 runs the services): every client below uses it.
owner_token=$("$cli" token create --user fluxgate --uid 1000 --ttl 2h \
    --key "$FLUXGATE_SECRETS/instance.key")
unset FLUXGATE_TOKEN
# A key the instance does not know, for a token it must refuse.
(umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$secrets_dir/other.key")
forged_token=$("$cli" token create --user fluxgate --uid 1000 --key "$secrets_dir/other.key")
# Jobs run in the submitter's directory: one that exists in the containers.
cd /tmp

log "compose up ($project, job manager on port $port)"
compose up -d >/dev/null 2>&1 || { compose logs; exit 1; }
check "all five services report healthy through fluxgate health" eventually 120 all_healthy

log "authentication is on"
refused() { ! "$@" >/dev/null 2>&1; }
check "fluxgate jobs without a token is refused" refused env -u FLUXGATE_TOKEN "$cli" jobs
check "fluxgate jobs with a token from another key is refused" \
    refused env FLUXGATE_TOKEN="$forged_token" "$cli" jobs
check "fluxgate health needs no token" env -u FLUXGATE_TOKEN "$cli" health -q "$FLUXGATE_URI"
export FLUXGATE_TOKEN=$owner_token
served() { "$@" >/dev/null; }
check "fluxgate jobs with the owner's token is served" served "$cli" jobs

log "a 4-node job prints the four hostnames"
hosts=$(timeout 120 "$cli" run -N4 hostname | sort | tr '\n' ' ') || true
check "fluxgate run -N4 hostname printed node0..node3 (got: $hosts)" [ "$hosts" = "node0 node1 node2 node3 " ]

log "SIGKILL of node2 while a 4-node job runs"
victim=$("$cli" submit -N4 sleep 300)
check "the 4-node job started" "$cli" job wait-event -q -t 60 "$victim" start
compose kill -s SIGKILL node2 >/dev/null 2>&1
check "the job ended (clean) after the node was lost" "$cli" job wait-event -q -t 60 "$victim" clean
events=$("$cli" job eventlog "$victim")
# Whichever notices first: the join stream's end (node-failure) or the
# broken Exec stream (exec, "rank(s) 2").
if grep -Eq 'exception type="(node-failure|exec)" severity=0 .*rank(\(s\))? 2' <<<"$events"; then
    ok "the job got a severity-0 exception naming rank 2"
else
    fail "the job got a severity-0 exception naming rank 2:"
    printf '%s\n' "$events"
fi
offline() { "$cli" resource status -n -s offline | grep -q node2; }
check "node2 is offline in fluxgate resource status" eventually 30 offline

log "restart of the job manager while a job runs"
survivor=$("$cli" submit -N3 sleep 10)
check "a 3-node job started on the remaining nodes" "$cli" job wait-event -q -t 60 "$survivor" start
compose stop -t 30 job-manager >/dev/null 2>&1
check "the job manager exited 0 on SIGTERM" [ "$(exit_code job-manager)" = 0 ]
compose start job-manager >/dev/null 2>&1
check "the job manager is healthy again" eventually 60 healthy job-manager
check "the running job was kept (flux-restart) and finished with status 0" \
    "$cli" job wait-event -q -t 60 -m status=0 "$survivor" finish
check "the job ended (clean)" "$cli" job wait-event -q -t 30 "$survivor" clean
check "the job lost with node2 kept its eventlog across the restart" \
    "$cli" job wait-event -q -t 5 "$victim" exception
check "the restart is in the running job's eventlog" \
    "$cli" job wait-event -q -t 5 "$survivor" flux-restart

log "SIGTERM to every service"
compose stop -t 30 >/dev/null 2>&1
for s in job-manager node0 node1 node3; do
    check "$s exited 0 on SIGTERM" [ "$(exit_code "$s")" = 0 ]
done

elapsed=$(($(date +%s) - started))
log "container test took ${elapsed}s; image $image is $((size / 1000000)) MB"
finish
