#!/usr/bin/env bash
# The stock and the schedtrace-patched guest kernels, from the Debian source package that
# kernel-patches/series names and the config fragment kernel-patches/guest.config:
#   scripts/kernel.sh build [stock|patched|both]   bzImages under build/kernel/<flavour>/: the
#                                                   patched one rebuilds the stock objects with the
#                                                   series applied in place (ccache for the rest)
#   scripts/kernel.sh check                         the series applies and its files compile
#   scripts/kernel.sh source                        unpack the source (and install it if missing)
# Both kernels share one config, so they differ only by the series. Every failure is one line.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

say() { printf 'hostwire kernel: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

patches=${HOSTWIRE_KERNEL_PATCHES:-kernel-patches}
fragment=$patches/guest.config
kbuild=${HOSTWIRE_KERNEL_BUILD:-$top/build/kernel}
jobs=${JOBS:-$(nproc)}
package=$(sed -n 's/^# source: \([^ ]*\) .*/\1/p' "$patches/series")
version=$(sed -n 's/^# source: [^ ]* \([^ ]*\).*/\1/p' "$patches/series")
[ -n "$package" ] && [ -n "$version" ] || die "$patches/series: line 2 must read '# source: PACKAGE VERSION'"
tarball=/usr/src/$package.tar.xz
patched_tree=${HOSTWIRE_KERNEL_TREE:-$kbuild/src-patched}

# empty when the package is not installed (dpkg-query fails for a name it does not know)
installed_version() { { dpkg-query -W -f='${Status} ${Version}' "$package" 2>/dev/null || true; } | sed -n 's/^install ok installed //p'; }

ensure_package() {
    local have
    have=$(installed_version)
    if [ "$have" != "$version" ]; then
        [ "$(id -u)" -eq 0 ] || die "$package $version is not installed${have:+ (found $have)}; run as root or: apt-get install $package=$version"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
            "$package=$version" >/dev/null 2>"$kbuild.apt.log"; then
            die "$package $version cannot be installed ($(grep -m1 -E '^E:' "$kbuild.apt.log" || echo 'see apt-get'))"
        fi
        say "installed $package $version"
    fi
    [ -f "$tarball" ] || die "$tarball is missing although $package is installed"
}

# build/kernel/src: the pristine tree, unpacked once per source version
unpack() {
    mkdir -p "$kbuild"
    ensure_package
    if [ "$(cat "$kbuild/src.version" 2>/dev/null)" != "$version" ]; then
        say "unpacking $tarball"
        rm -rf "$kbuild/src" "$kbuild/src.tmp"
        mkdir -p "$kbuild/src.tmp"
        tar -xJf "$tarball" -C "$kbuild/src.tmp" --strip-components=1
        mv "$kbuild/src.tmp" "$kbuild/src"
        echo "$version" > "$kbuild/src.version"
    fi
}

series_files() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$patches/series"; }

# one patch of the series into a tree; on failure, the one line saying why is in patch.error
apply_patch() {
    local tree=$1 p=$2 out
    [ -f "$patches/$p" ] || die "$patches/series names $p, which does not exist"
    out=$(patch -d "$tree" -p1 --forward --batch --no-backup-if-mismatch -s < "$patches/$p" 2>&1) && return 0
    printf '%s does not apply to %s %s: %s\n' "$patches/$p" "$package" "$version" \
        "$(printf '%s' "$out" | grep -m1 -iE 'fail|reject|malformed|only garbage|can.t find' || printf '%s' "$out" | head -1)" \
        > "$kbuild/patch.error"
    return 1
}

# build/kernel/src-patched: hard links to the pristine tree (patch replaces the files it
# changes, so the links of the others stay shared) with the series applied
patch_tree() {
    local tree=$patched_tree stamp
    stamp="$version $(cat "$patches/series" $(series_files | sed "s|^|$patches/|") | sha256sum | cut -c1-16)"
    if [ "$(cat "$tree.stamp" 2>/dev/null)" = "$stamp" ]; then
        return
    fi
    rm -rf "$tree"
    unapply_in_place
    cp -al "$kbuild/src" "$tree"
    local p
    for p in $(series_files); do
        apply_patch "$tree" "$p" || { rm -rf "$tree"; die "$(cat "$kbuild/patch.error")"; }
    done
    echo "$stamp" > "$tree.stamp"
}

# allnoconfig plus the fragment, then a check that every line of the fragment survived
configure() {
    local src=$1 out=$2 line key value
    mkdir -p "$out"
    make -s -C "$src" O="$out" allnoconfig >/dev/null
    "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$top/$fragment" >/dev/null
    make -s -C "$src" O="$out" olddefconfig >/dev/null
    while IFS= read -r line; do
        key=${line%%=*} value=${line#*=}
        if [ "$value" = n ]; then
            ! grep -q "^$key=" "$out/.config" || die "$fragment: $key stays set in the resolved config"
        else
            grep -qxF "$line" "$out/.config" || die "$fragment: $line did not survive olddefconfig (a dependency is missing)"
        fi
    done < <(grep '^CONFIG_' "$fragment")
}

# The series applied to build/kernel/src in place, and taken back out: the patched kernel is
# the stock build's object tree rebuilt with the patch (make rebuilds only what it changes:
# minutes instead of a second full build), and the two differ by the patch alone.
apply_in_place() {
    local p done=()
    unapply_in_place
    for p in $(series_files); do
        if ! apply_patch "$kbuild/src" "$p"; then
            printf '%s\n' "${done[@]}" > "$kbuild/src.applied"
            unapply_in_place
            die "$(cat "$kbuild/patch.error")"
        fi
        done+=("$p")
        printf '%s\n' "${done[@]}" > "$kbuild/src.applied"
    done
}

unapply_in_place() {
    local p
    [ -f "$kbuild/src.applied" ] || return 0
    for p in $(tac "$kbuild/src.applied"); do
        [ -n "$p" ] || continue
        patch -d "$kbuild/src" -p1 -R -E --batch --no-backup-if-mismatch -s < "$patches/$p" >/dev/null 2>&1 \
            || die "cannot take $p back out of $kbuild/src; remove $kbuild/src and run again"
    done
    rm -f "$kbuild/src.applied"
}

build_one() {
    local flavour=$1 obj=$kbuild/obj dest=$kbuild/$1 start seconds fresh
    if [ "$flavour" = patched ]; then
        apply_in_place
        trap unapply_in_place EXIT
    else
        unapply_in_place
    fi
    # a config rewritten with the same content would still make kbuild rebuild everything
    fresh=$kbuild/config.$flavour
    configure "$kbuild/src" "$fresh"
    mkdir -p "$obj" "$dest"
    cmp -s "$fresh/.config" "$obj/.config" || cp "$fresh/.config" "$obj/.config"
    command -v ccache >/dev/null || die "ccache is missing; run make setup"
    export CCACHE_DIR=${CCACHE_DIR:-$top/build/ccache}
    say "building the $flavour kernel with $jobs jobs (log: $dest/build.log)"
    start=$(date +%s.%N)
    if ! make -C "$kbuild/src" O="$obj" CC="ccache gcc" -j"$jobs" bzImage > "$dest/build.log" 2>&1; then
        die "the $flavour kernel did not build: $(grep -m1 -E 'error|Error' "$dest/build.log")"
    fi
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    cp "$obj/arch/x86/boot/bzImage" "$dest/bzImage"
    make -s -C "$kbuild/src" O="$obj" kernelrelease > "$dest/release"
    printf '%s %s %.0f\n' "$flavour" "$(cat "$dest/release")" "$seconds" > "$dest/built"
    say "$flavour kernel $(cat "$dest/release") built in $(printf '%.0f' "$seconds") s: $dest/bzImage"
    if [ "$flavour" = patched ]; then
        unapply_in_place
        trap - EXIT
    fi
}

# the series applies, and the files it adds or changes compile in the patched tree's config
check() {
    local out=$kbuild/check objs
    patch_tree
    configure "$patched_tree" "$out"
    make -s -C "$patched_tree" O="$out" -j"$jobs" prepare >/dev/null 2>"$out.log" \
        || die "make prepare failed: $(grep -m1 -iE 'error' "$out.log")"
    objs=$(cat $(series_files | sed "s|^|$patches/|") | sed -n 's|^+++ b/\(kernel/.*\)\.c$|\1.o|p' | sort -u)
    # shellcheck disable=SC2086
    make -C "$patched_tree" O="$out" -j"$jobs" KCFLAGS=-Werror $objs >"$out.log" 2>&1 \
        || die "the patched files do not compile: $(grep -m1 -E 'error' "$out.log")"
    say "the series applies to $package $version and compiles: $(echo $objs)"
}

case ${1:-build} in
    source) unpack ;;
    check) unpack; check ;;
    build)
        unpack
        case ${2:-both} in
            stock | patched) build_one "$2" ;;
            both) build_one stock; build_one patched ;;
            *) say "usage: scripts/kernel.sh build [stock|patched|both]"; exit 2 ;;
        esac ;;
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "usage: scripts/kernel.sh build [stock|patched|both] | check | source"; exit 2 ;;
esac
