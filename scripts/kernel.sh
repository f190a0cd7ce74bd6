#!/usr/bin/env bash
# The stock, the patched and the v1 guest kernels, from the Debian source package that
# kernel-patches/series names and the config fragment kernel-patches/guest.config:
#   scripts/kernel.sh build [stock|patched|v1|both|all]  bzImages under build/kernel/<flavour>/
#       patched: the series in kernel-patches/ (and the options of kernel-patches/patched.config);
#       v1: the series' first version, as the project's history has it (for benchmarks);
#       both: stock and patched; all: the three (what make kernel builds). Each flavour
#       rebuilds the one object tree with its series applied in place (ccache for the rest);
#       the patched one only after checkpatch.pl --strict (report: build/kernel/checkpatch.log).
#   scripts/kernel.sh check    the series applies (patch -p1 and git am), checkpatch.pl --strict
#                              finds no error in it (report: build/kernel/checkpatch.log), and
#                              the files it adds or changes compile
#   scripts/kernel.sh source   unpack the source (and install it if missing)
# Every failure is one line. Builds run at nice 19 (HOSTWIRE_KERNEL_NICE=0: as started).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# a kernel build takes every core for many minutes: it yields to whatever else runs
if [ "${HOSTWIRE_KERNEL_NICE:-19}" != 0 ] && [ -z "${HOSTWIRE_KERNEL_NICED:-}" ]; then
    HOSTWIRE_KERNEL_NICED=1 exec nice -n "${HOSTWIRE_KERNEL_NICE:-19}" "$0" "$@"
fi

say() { printf 'hostwire kernel: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

patches=${HOSTWIRE_KERNEL_PATCHES:-kernel-patches}
case $patches in /*) ;; *) patches=$top/$patches ;; esac
fragment=$patches/guest.config
kbuild=${HOSTWIRE_KERNEL_BUILD:-$top/build/kernel}
jobs=${JOBS:-$(nproc)}
package=$(sed -n 's/^# source: \([^ ]*\) .*/\1/p' "$patches/series")
version=$(sed -n 's/^# source: [^ ]* \([^ ]*\).*/\1/p' "$patches/series")
[ -n "$package" ] && [ -n "$version" ] || die "$patches/series: line 2 must read '# source: PACKAGE VERSION'"
tarball=/usr/src/$package.tar.xz
patched_tree=${HOSTWIRE_KERNEL_TREE:-$kbuild/src-patched}
# the series' first version lies in the parent of the commit that removed this file
v1_marker=kernel-patches/0002-sched-schedtrace-io-syscall-records.patch
v1_files="series 0001-sched-schedtrace-switch-records.patch 0002-sched-schedtrace-io-syscall-records.patch"

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
        rm -rf "$kbuild/src" "$kbuild/src.tmp" "$kbuild/src.applied"
        mkdir -p "$kbuild/src.tmp"
        tar -xJf "$tarball" -C "$kbuild/src.tmp" --strip-components=1
        mv "$kbuild/src.tmp" "$kbuild/src"
        echo "$version" > "$kbuild/src.version"
    fi
}

# the patch files of a series directory, in order, as absolute paths
series_files() {
    local dir=$1 p
    for p in $(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$dir/series"); do
        [ -f "$dir/$p" ] || die "$dir/series names $p, which does not exist"
        printf '%s\n' "$dir/$p"
    done
}

# the directory of a flavour's series: v1's is taken out of the project's history once
series_dir() {
    case $1 in
        stock) ;;
        patched) printf '%s\n' "$patches" ;;
        v1)
            local dir=$kbuild/v1-patches removed f
            if [ ! -f "$dir/series" ]; then
                removed=$(git -C "$top" log -1 --format=%H --diff-filter=D -- "$v1_marker" 2>/dev/null) \
                    || die "the v1 series comes from git history, and $top is not a git work tree"
                [ -n "$removed" ] || die "git history has no commit removing $v1_marker: no v1 series to build"
                rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
                for f in $v1_files; do
                    git -C "$top" show "$removed^:kernel-patches/$f" > "$dir.tmp/$f" \
                        || die "cannot read kernel-patches/$f of commit $removed^"
                done
                echo "$removed^" > "$dir.tmp/commit"
                rm -rf "$dir" && mv "$dir.tmp" "$dir"
            fi
            printf '%s\n' "$dir" ;;
    esac
}

# one patch into a tree; on failure, the one line saying why is in patch.error
apply_patch() {
    local tree=$1 p=$2 out
    out=$(patch -d "$tree" -p1 --forward --batch --no-backup-if-mismatch -s < "$p" 2>&1) && return 0
    printf '%s does not apply to %s %s: %s\n' "${p#"$top"/}" "$package" "$version" \
        "$(printf '%s' "$out" | grep -m1 -iE 'fail|reject|malformed|only garbage|can.t find' || printf '%s' "$out" | head -1)" \
        > "$kbuild/patch.error"
    return 1
}

# build/kernel/src-patched: hard links to the pristine tree (patch replaces the files it
# changes, so the links of the others stay shared) with the series applied
patch_tree() {
    local tree=$patched_tree stamp p
    stamp="$version $(cat "$patches/series" $(series_files "$patches") | sha256sum | cut -c1-16)"
    if [ "$(cat "$tree.stamp" 2>/dev/null)" = "$stamp" ]; then
        return
    fi
    rm -rf "$tree"
    unapply_in_place
    cp -al "$kbuild/src" "$tree"
    for p in $(series_files "$patches"); do
        apply_patch "$tree" "$p" || { rm -rf "$tree"; die "$(cat "$kbuild/patch.error")"; }
    done
    echo "$stamp" > "$tree.stamp"
}

# allnoconfig plus the fragments, then a check that every line of each survived
configure() {
    local src=$1 out=$2 line key value f
    shift 2
    mkdir -p "$out"
    make -s -C "$src" O="$out" allnoconfig >/dev/null
    "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$@" >/dev/null
    make -s -C "$src" O="$out" olddefconfig >/dev/null
    for f in "$@"; do
        while IFS= read -r line; do
            key=${line%%=*} value=${line#*=}
            if [ "$value" = n ]; then
                ! grep -q "^$key=" "$out/.config" || die "${f#"$top"/}: $key stays set in the resolved config"
            else
                grep -qxF "$line" "$out/.config" || die "${f#"$top"/}: $line did not survive olddefconfig (a dependency is missing)"
            fi
        done < <(grep '^CONFIG_' "$f")
    done
}

fragments() {
    printf '%s\n' "$fragment"
    if [ "$1" = patched ] && [ -f "$patches/patched.config" ]; then
        printf '%s\n' "$patches/patched.config"
    fi
}

# A flavour's series applied to build/kernel/src in place, and taken back out: every kernel is
# the one object tree rebuilt with its series (make rebuilds only what a series changes: minutes
# instead of a full build), so that they differ by their series alone. src.applied lists what is in.
apply_in_place() {
    local dir=$1 p done=()
    unapply_in_place
    for p in $(series_files "$dir"); do
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
        patch -d "$kbuild/src" -p1 -R -E --batch --no-backup-if-mismatch -s < "$p" >/dev/null 2>&1 \
            || die "cannot take $p back out of $kbuild/src; remove $kbuild/src and run again"
    done
    rm -f "$kbuild/src.applied"
}

build_one() {
    local flavour=$1 obj=$kbuild/obj dest=$kbuild/$1 start seconds fresh dir
    dir=$(series_dir "$flavour")
    if [ -n "$dir" ]; then
        apply_in_place "$dir"
        trap unapply_in_place EXIT
    else
        unapply_in_place
    fi
    # a config rewritten with the same content would still make kbuild rebuild everything
    fresh=$kbuild/config.$flavour
    configure "$kbuild/src" "$fresh" $(fragments "$flavour")
    mkdir -p "$obj" "$dest"
    cmp -s "$fresh/.config" "$obj/.config" || cp "$fresh/.config" "$obj/.config"
    command -v ccache >/dev/null || die "ccache is missing; run make setup"
    export CCACHE_DIR=${CCACHE_DIR:-$kbuild/ccache}
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
    if [ -n "$dir" ]; then
        unapply_in_place
        trap - EXIT
    fi
}

# git am takes the series as mailed: a repository holding the pristine files it touches
git_am_check() {
    local repo=$kbuild/git-am f
    rm -rf "$repo" && mkdir -p "$repo"
    for f in $(cat $(series_files "$patches") | sed -n 's|^--- a/||p' | sort -u); do
        mkdir -p "$repo/$(dirname "$f")" && cp "$kbuild/src/$f" "$repo/$f"
    done
    git -C "$repo" init -q
    git -C "$repo" add -A
    git -C "$repo" -c user.name=hostwire -c user.email=hostwire@localhost commit -qm "$package $version" \
        || die "cannot make the git am test repository in $repo"
    # shellcheck disable=SC2046
    git -C "$repo" -c user.name=hostwire -c user.email=hostwire@localhost am -q $(series_files "$patches") \
        >"$repo.log" 2>&1 || die "git am does not take the series: $(grep -m1 -iE 'error|fail|patch' "$repo.log")"
    say "git am applies the $(series_files "$patches" | wc -l) patches: $(git -C "$repo" log --format=%s HEAD~"$(series_files "$patches" | wc -l)"..HEAD | tac | paste -sd '|')"
}

# checkpatch.pl --strict of the source itself, its whole report kept; an error fails the check
checkpatch() {
    local log=$kbuild/checkpatch.log p errors
    : > "$log"
    for p in $(series_files "$patches") $(ls "$patches"/*cover-letter.patch 2>/dev/null || true); do
        case $p in *cover-letter.patch) continue ;; esac
        printf '==> %s\n' "${p#"$top"/}" >> "$log"
        (cd "$kbuild/src" && ./scripts/checkpatch.pl --strict --no-color "$p") >> "$log" 2>&1 || true
    done
    errors=$(sed -n 's/^total: \([0-9]*\) errors.*/\1/p' "$log" | paste -sd+ | bc)
    [ "$(grep -c '^total: ' "$log")" -eq "$(series_files "$patches" | wc -l)" ] \
        || die "checkpatch.pl did not report on every patch (see $log)"
    [ "$errors" -eq 0 ] || die "checkpatch.pl --strict finds $errors errors in the series (see $log)"
    say "checkpatch.pl --strict: $(grep '^total: ' "$log" | paste -sd '|') (report: $log)"
}

# the series applies, checkpatch finds no error, and the files it adds or changes compile
check() {
    local out=$kbuild/check objs
    patch_tree
    git_am_check
    checkpatch
    configure "$patched_tree" "$out" $(fragments patched)
    make -s -C "$patched_tree" O="$out" -j"$jobs" prepare >/dev/null 2>"$out.log" \
        || die "make prepare failed: $(grep -m1 -iE 'error' "$out.log")"
    # a file of kernel/sched included into a consolidated unit compiles as that unit
    objs=$(cat $(series_files "$patches") | sed -n 's|^+++ b/\(kernel/.*\)\.c$|\1.o|p' | sort -u \
        | sed 's|^kernel/sched/switch_ext\.o$|kernel/sched/build_utility.o|' | sort -u)
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
        # the patched kernel is built only from a series checkpatch finds no error in
        case ${2:-both} in
            stock | v1) build_one "$2" ;;
            patched) checkpatch; build_one patched ;;
            both) checkpatch; build_one stock; build_one patched ;;
            all) checkpatch; build_one stock; build_one patched; build_one v1 ;;
            *) say "usage: scripts/kernel.sh build [stock|patched|v1|both|all]"; exit 2 ;;
        esac ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "usage: scripts/kernel.sh build [stock|patched|v1|both|all] | check | source"; exit 2 ;;
esac
