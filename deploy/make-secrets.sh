#!/usr/bin/env bash
# Make the two secrets a container deployment runs with:
#
#   DIR/instance.key   the job manager's key (32 random bytes as hex): it signs
#                      every token, so whoever reads it can act as any user;
#   DIR/node.token     the node credential derived from that key: exec nodes
#                      present it to the job manager, and the job manager
#                      presents it to them; it lets a holder run jobs.
#
#   deploy/make-secrets.sh [DIR]        # default: deploy/secrets
#
# Both files are created mode 0600 (umask 077, never chmod-ed after) in a 0700
# directory. An existing key is kept (replacing it invalidates every token
# users hold); --force replaces both. The image runs as uid 1000 and compose
# mounts the files as they are on this host, so when run as root they are
# given to FLUXGATE_SECRETS_OWNER (default 1000:1000).
#
# The node token is signed by `fluxgate token create --node`: the CLI is taken
# from FLUXGATE_CLI, else PATH, else this checkout's target/{debug,release}.
# The instance owner's uid (the job manager's owner_uid, 1000 in the image)
# is part of the token: FLUXGATE_OWNER_UID changes it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

force=false
if [ "${1:-}" = --force ]; then
    force=true
    shift
fi
dir=${1:-$here/secrets}
owner=${FLUXGATE_SECRETS_OWNER:-1000:1000}
owner_uid=${FLUXGATE_OWNER_UID:-1000}

die() { echo "make-secrets: $*" >&2; exit 1; }

find_cli() {
    local c
    for c in "${FLUXGATE_CLI:-}" "$(command -v fluxgate 2>/dev/null || true)" \
             "${CARGO_TARGET_DIR:-$repo/target}/debug/fluxgate" \
             "${CARGO_TARGET_DIR:-$repo/target}/release/fluxgate"; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return; }
    done
    die "no fluxgate CLI: set FLUXGATE_CLI or run cargo build --workspace"
}
cli=$(find_cli)

# Everything created from here on is readable by its owner only.
umask 077
mkdir -p "$dir"
[ -O "$dir" ] || [ "$(id -u)" = 0 ] || die "$dir is not yours"
key=$dir/instance.key
token=$dir/node.token

if [ -e "$key" ] && ! $force; then
    echo "make-secrets: keeping the existing $key (--force makes a new one)" >&2
else
    # Into a new file, then renamed: a reader never sees half a key.
    tmp=$(mktemp "$dir/.instance.key.XXXXXX")
    od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$tmp"
    echo >>"$tmp"
    mv -f "$tmp" "$key"
fi

tmp=$(mktemp "$dir/.node.token.XXXXXX")
"$cli" token create --node --uid "$owner_uid" --key "$key" >"$tmp" || {
    rm -f "$tmp"
    die "cannot sign the node token with $key"
}
mv -f "$tmp" "$token"

if [ "$(id -u)" = 0 ]; then
    chown "$owner" "$dir" "$key" "$token"
elif [ "$(id -u)" != "${owner%%:*}" ]; then
    echo "make-secrets: the files belong to you, not to uid ${owner%%:*} that the" \
         "containers run as: compose cannot read them (run this as root)" >&2
fi
echo "$dir"
