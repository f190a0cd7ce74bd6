#!/bin/bash
# Removes what packaging/install.sh put into DESTDIR/PREFIX (`make uninstall`): hostwire's own
# folders whole, and its files by name in the shared ones (bin, man, completion), which stay.
set -euo pipefail
prefix=${PREFIX:?PREFIX is not set}
dest=${DESTDIR:-}$prefix
# the folders install.sh made (recorded there), removed last and only when empty
created=()
if [ -f "$dest/lib/hostwire/created-dirs" ]; then mapfile -t created < "$dest/lib/hostwire/created-dirs"; fi
rm -rf "$dest/libexec/hostwire" "$dest/lib/hostwire"
rm -f "$dest/bin/hostwire" \
      "$dest/share/bash-completion/completions/hostwire" "$dest/share/zsh/site-functions/_hostwire"
for section in 1 5 7; do
    rm -f "$dest/share/man/man$section"/hostwire.$section{,.gz} "$dest/share/man/man$section"/hostwire-*.$section{,.gz}
done
for ((i = ${#created[@]} - 1; i >= 0; i--)); do  # deepest first: they were recorded parents first
    dir=${DESTDIR:-}${created[i]}
    [ -d "$dir" ] && rmdir --ignore-fail-on-non-empty "$dir"
done
printf 'hostwire uninstall: removed hostwire from %s\n' "$dest"
