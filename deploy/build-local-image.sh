#!/usr/bin/env bash
# Build the Fluxgate image with no registry: the base image is made from this
# host's files (glibc, a shell and the few commands jobs and probes use) and
# imported with `docker import`; deploy/Dockerfile.local then adds the
# binaries built on this host (target/debug by default: the test run has
# already built them), stripped of debug info.
#
#   deploy/build-local-image.sh [IMAGE]        # default fluxgate:local
#
# FLUXGATE_PROFILE=release uses target/release instead (cargo build --release).
# The host must be glibc-based like the binaries (Debian bookworm here); the
# image elsewhere is built by deploy/Dockerfile from official bases.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
image=${1:-fluxgate:local}
base=${FLUXGATE_BASE_IMAGE:-fluxgate-base:local}
profile=${FLUXGATE_PROFILE:-debug}
bindir=${CARGO_TARGET_DIR:-$repo/target}/$profile
bins=(fluxgate fluxgate-job-manager fluxgate-exec)
# What jobs, health checks and a person in `docker exec` may need.
tools=(sh hostname sleep cat echo env true false ls id uname date kill ps rm mkdir head)

for b in "${bins[@]}"; do
    [ -x "$bindir/$b" ] || {
        echo "build-local-image: $bindir/$b is missing: run cargo build --workspace" >&2
        exit 1
    }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
ctx=$work/context

# Merged /usr, as Debian has it: /bin, /lib, /lib64 and /sbin are links.
mkdir -p "$root"/usr/{bin,lib,lib64,sbin} "$root"/{etc,tmp,var/lib/fluxgate,etc/fluxgate,proc,sys,dev}
for d in bin lib lib64 sbin; do ln -s "usr/$d" "$root/$d"; done
chmod 1777 "$root/tmp"

# Copy a file and every shared library it loads, resolving links.
copy_with_libs() {
    local src=$1 dest=$2
    cp -L "$src" "$root$dest"
    ldd "$src" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
        [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"; }
    done
}

for t in "${tools[@]}"; do
    path=$(command -v "$t" 2>/dev/null) || true
    # Shell builtins (echo, kill) still get their standalone binary if any.
    case $path in /*) ;; *) path=$(PATH=/usr/bin:/bin type -P "$t" || true) ;; esac
    [ -n "$path" ] || { echo "build-local-image: $t not found on this host" >&2; exit 1; }
    copy_with_libs "$path" "/usr/bin/$t"
done
# glibc loads its resolver modules at run time (dlopen): copy them too.
for lib in $(ldconfig -p | grep -o '/[^ ]*libnss_\(files\|dns\)\.so\.2' | sort -u) \
           $(ldconfig -p | grep -o '/[^ ]*libresolv\.so\.2' | sort -u); do
    mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"
done
# The binaries' own libraries (glibc, libgcc_s), so Dockerfile.local only copies them.
for b in "${bins[@]}"; do
    ldd "$bindir/$b" | grep -o '/[^ ]*' | while read -r lib; do
        [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"; }
    done
done

cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
fluxgate:x:1000:1000:Fluxgate:/var/lib/fluxgate:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
cat > "$root/etc/group" <<'GROUP'
root:x:0:
fluxgate:x:1000:
nogroup:x:65534:
GROUP
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$root/etc/nsswitch.conf"
chown 1000:1000 "$root/var/lib/fluxgate"

# Rebuilds replace the tags; the images they leave untagged are removed below.
image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }
old_base=$(image_id "$base")
old_image=$(image_id "$image")
drop_replaced() {
    local old=$1 now
    now=$(image_id "$2")
    if [ -n "$old" ] && [ "$old" != "$now" ]; then
        docker rmi "$old" >/dev/null 2>&1 || true
    fi
}

tar --numeric-owner -C "$root" -c . | docker import \
    -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    -m "fluxgate base from host files" - "$base" >/dev/null

mkdir -p "$ctx/bin"
for b in "${bins[@]}"; do
    # Debug info is most of a debug binary; symbols stay for backtraces.
    objcopy --strip-debug "$bindir/$b" "$ctx/bin/$b"
done
cp "$here/config/job-manager.toml" "$ctx/job-manager.toml"
# The classic builder: it needs no buildx plugin and pulls nothing for a local base.
if ! DOCKER_BUILDKIT=0 docker build -q -f "$here/Dockerfile.local" --build-arg "BASE=$base" \
    -t "$image" "$ctx" >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    exit 1
fi
drop_replaced "$old_image" "$image"
drop_replaced "$old_base" "$base"
echo "$image"
