#!/bin/bash
# Installs hostwire into DESTDIR/PREFIX (`make install`, and the staged tree of `make deb`):
#   PREFIX/libexec/hostwire/bin/hw-*          the C tools (built into BUILD by make build-c)
#   PREFIX/libexec/hostwire/lib/libhwiowrap.so the preload library (hw-iotrace finds it at ../lib)
#   PREFIX/libexec/hostwire/lib/libhwpcapcols.so the capture reader the Python package loads
#   PREFIX/lib/hostwire/venv/                 a private Python environment: the hostwire package and
#                                             its pinned dependencies (analyze/requirements.txt)
#   PREFIX/bin/hostwire                       the launcher: that environment's Python, isolated
#   PREFIX/share/man/man{1,5,7}/hostwire*     the committed manual pages (man/)
#   PREFIX/share/bash-completion/completions/hostwire, PREFIX/share/zsh/site-functions/_hostwire
# The package learns where its tools are from installed.json, written beside it; nothing refers
# to the source tree afterwards. With DESTDIR, the environment is built in DESTDIR/PREFIX and its
# scripts are rewritten to PREFIX, where it will run.
# Environment: DESTDIR, PREFIX, BUILD (the C build folder), PYTHON (the interpreter the
# environment is made from), REVISION (the source revision), COMPRESS_MAN=1 (gzip the pages).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:?PREFIX is not set}
build=${BUILD:-$top/build}
python=${PYTHON:-python3}
revision=${REVISION:-unknown}
dest=${DESTDIR:-}$prefix
say() { printf 'hostwire install: %s\n' "$*"; }
fail() { printf 'hostwire install: %s\n' "$*" >&2; exit 1; }

case $prefix in /*) ;; *) fail "PREFIX must be an absolute path, not '$prefix'";; esac
tools=(hw-bench hw-wirecap hw-schedtrace hw-iotrace hw-pcapcols)
for tool in "${tools[@]}"; do
    [ -x "$build/bin/$tool" ] || fail "$build/bin/$tool is missing (run 'make build')"
done
[ -f "$build/lib/libhwiowrap.so" ] || fail "$build/lib/libhwiowrap.so is missing (run 'make build')"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || fail "$python is older than 3.11"

# Folders made here that were not there before, so that uninstall.sh removes them again when
# they are empty (an empty prefix is left empty) and leaves the ones that were there alone.
created=()
make_dir() {
    local dir
    for dir in "$@"; do
        local missing=() up=$dir
        while [ ! -d "$up" ]; do missing=("$up" "${missing[@]}"); up=$(dirname "$up"); done
        install -d "$dir"
        for up in "${missing[@]}"; do created+=("${up#"${DESTDIR:-}"}"); done
    done
}

say "C tools into $dest/libexec/hostwire"
make_dir "$dest/libexec/hostwire/bin" "$dest/libexec/hostwire/lib" "$dest/lib/hostwire"
# stripped: the debugging information names the source tree, and an install refers to nothing there
for tool in "${tools[@]}"; do
    install -m 755 -s "$build/bin/$tool" "$dest/libexec/hostwire/bin/$tool"
done
for lib in libhwiowrap.so libhwpcapcols.so; do
    install -m 644 "$build/lib/$lib" "$dest/libexec/hostwire/lib/$lib"
    strip --strip-unneeded "$dest/libexec/hostwire/lib/$lib"
done

venv=$dest/lib/hostwire/venv
say "Python environment into $venv"
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check --no-warn-script-location)
# the runtime's pins: the test and documentation tools stay out of the installed environment
grep -v -E '^(pytest|pytest-xdist|pytest-timeout|execnet|iniconfig|pluggy|argparse-manpage|shtab)==' \
    "$top/analyze/requirements.txt" > "$dest/lib/hostwire/requirements.txt"
"${pip[@]}" -r "$dest/lib/hostwire/requirements.txt"
# a copy of the package's source, so that building it writes nothing into the source tree
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
cp -r "$top/analyze/pyproject.toml" "$top/analyze/hostwire" "$staging/"
find "$staging" -name __pycache__ -prune -exec rm -rf {} +
"${pip[@]}" --no-deps "$staging"
package=$("$venv/bin/python" -I -c 'import hostwire, os; print(os.path.dirname(hostwire.__file__))')
"$venv/bin/python" -I - "$package/installed.json" "$prefix" "$revision" <<'PY'
import json, sys
path, prefix, revision = sys.argv[1:]
with open(path, "w") as out:
    json.dump({"prefix": prefix, "libexec": f"{prefix}/libexec/hostwire", "revision": revision}, out, indent=1)
    out.write("\n")
PY
if [ -n "${DESTDIR:-}" ]; then  # the environment runs from PREFIX, not from DESTDIR
    grep -rlI --null -F "$dest" "$venv/bin" "$venv/pyvenv.cfg" | xargs -0 -r sed -i "s|$dest|$prefix|g"
fi

say "launcher $dest/bin/hostwire"
make_dir "$dest/bin"
cat > "$dest/bin/hostwire" <<SH
#!/bin/sh
# hostwire: the hostwire package in its private environment ($prefix/lib/hostwire/venv).
# -I: neither the current folder nor PYTHON* variables change which hostwire runs.
exec $prefix/lib/hostwire/venv/bin/python -I -m hostwire "\$@"
SH
chmod 755 "$dest/bin/hostwire"

say "manual pages and completion"
for page in "$top"/man/hostwire*.[157]; do
    section=${page##*.}
    make_dir "$dest/share/man/man$section"
    install -m 644 "$page" "$dest/share/man/man$section/"
    if [ "${COMPRESS_MAN:-0}" = 1 ]; then gzip -9nf "$dest/share/man/man$section/${page##*/}"; fi
done
make_dir "$dest/share/bash-completion/completions" "$dest/share/zsh/site-functions"
install -m 644 "$top/completion/hostwire.bash" "$dest/share/bash-completion/completions/hostwire"
install -m 644 "$top/completion/_hostwire" "$dest/share/zsh/site-functions/_hostwire"
if ((${#created[@]})); then printf '%s\n' "${created[@]}" > "$dest/lib/hostwire/created-dirs"; fi
say "done: $prefix/bin/hostwire (revision $revision)"
