#!/bin/bash
# Builds the Debian package hostwire_<version>_<arch>.deb into OUT (`make deb`): the layout of
# `make install PREFIX=/usr`, with its Python environment built here from the pinned requirements
# (installing the package downloads nothing), made from Debian's own python3.X so that the
# environment runs on the interpreter the package depends on. Depends: the libraries the C tools
# link (dpkg-shlibdeps), that interpreter, and the programs a run needs. The package ships no
# byte code (Debian policy): postinst compiles the environment, prerm removes what it compiled.
# usage: packaging/deb.sh OUT   (environment: BUILD, REVISION, DEB_MAINTAINER "Name <address>")
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:?usage: packaging/deb.sh OUT}")
say() { printf 'hostwire deb: %s\n' "$*"; }

maintainer=${DEB_MAINTAINER:-hostwire developers <hostwire@example.org>}
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$top/analyze/hostwire/__init__.py")
arch=$(dpkg --print-architecture)
python=$(readlink -f /usr/bin/python3)  # /usr/bin/python3.11: the interpreter, by its version
python_package=$(dpkg-query -S "$python" | cut -d: -f1)
python_package=${python_package%-minimal}  # the whole standard library, not only the minimal part

# the package's tree in debian/hostwire, where dpkg-shlibdeps expects a package's files
rm -rf "$out/debian"
stage=$out/debian/hostwire
mkdir -p "$stage"
DESTDIR=$stage PREFIX=/usr PYTHON=$python COMPRESS_MAN=1 "$top/packaging/install.sh"
rm -f "$stage/usr/lib/hostwire/created-dirs"  # dpkg removes the package's folders itself
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
find "$stage" -name '*.py[co]' -delete
find "$stage/usr/lib/hostwire" -name '*.so*' -type f -exec chmod 644 {} +  # libraries, not programs
# modules, not programs: a module's own #! line would otherwise ask for the system's python3
find "$stage/usr/lib/hostwire/venv/lib" -name '*.py' -type f -perm /111 -exec chmod 644 {} +
# Debian's zsh reads /usr/share/zsh/vendor-completions (site-functions is for /usr/local)
install -d "$stage/usr/share/zsh/vendor-completions"
mv "$stage/usr/share/zsh/site-functions/_hostwire" "$stage/usr/share/zsh/vendor-completions/_hostwire"
rmdir "$stage/usr/share/zsh/site-functions"
install -d "$stage/usr/share/lintian/overrides"
install -m 644 "$top/packaging/lintian-overrides" "$stage/usr/share/lintian/overrides/hostwire"

doc=$stage/usr/share/doc/hostwire
install -d "$doc"
install -m 644 "$top/packaging/copyright" "$doc/copyright"
sed -e "s/@VERSION@/$version/" -e "s/@REVISION@/${REVISION:-unknown}/" -e "s|@MAINTAINER@|$maintainer|" \
    -e "s/@DATE@/$(date -R -d @"$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)")/" \
    "$top/packaging/changelog.in" | gzip -9n > "$doc/changelog.gz"
chmod 644 "$doc/changelog.gz"

say "dependencies"
install -d -m 755 "$stage/DEBIAN"  # dpkg-shlibdeps finds the package's root by it
printf 'Source: hostwire\n\nPackage: hostwire\nArchitecture: any\n' > "$out/debian/control"
libs=$(cd "$out" && dpkg-shlibdeps -O $(printf -- '-e%s ' debian/hostwire/usr/libexec/hostwire/lib/*.so) \
       $(printf -- '-e%s ' debian/hostwire/usr/libexec/hostwire/bin/*) | sed -n 's/^shlibs:Depends=//p')

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s|@MAINTAINER@|$maintainer|" \
    -e "s/@DEPENDS@/$libs, $python_package, iproute2, ethtool/" \
    "$top/packaging/control.in" > "$stage/DEBIAN/control"
install -m 755 "$top/packaging/postinst" "$top/packaging/prerm" "$stage/DEBIAN/"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0 md5sum > DEBIAN/md5sums)
chmod 644 "$stage/DEBIAN/md5sums"

deb=$out/hostwire_${version}_${arch}.deb
say "packing $deb"
# gzip: 40 s on this 400 MB tree where xz took more than ten minutes on two loaded CPUs, for a
# package of 117 MB; lintian refuses zstd's members
dpkg-deb --root-owner-group -Zgzip -z6 --build "$stage" "$deb" >/dev/null
say "built $deb ($(du -h "$deb" | cut -f1)); install it with: apt install $deb"
