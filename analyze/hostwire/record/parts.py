"""Where each part of hostwire was found (`hostwire doctor`): the package and its Python, the C
tools and the preload library, the libraries they link, the manual pages and the completion."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import hostwire
from hostwire import paths
from hostwire.record.finding import Finding

TOOLS = ("hw-bench", "hw-wirecap", "hw-schedtrace", "hw-iotrace", "hw-pcapcols")
PRELOAD_LIBRARY = "libhwiowrap.so"
# ldd's "libpcap.so.0.8 => /lib/x86_64-linux-gnu/libpcap.so.0.8 (0x...)" or "... => not found"
LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(not found|\S+)")


def check_package() -> list[Finding]:
    """The package, its revision and the Python that runs it (a private environment or not)."""
    package_dir = Path(hostwire.__file__).resolve().parent
    revision = paths.source_revision() or "unknown"
    layout = paths.installed()
    how = f"installed in {layout.prefix}" if layout else "checkout"
    private = sys.prefix != sys.base_prefix
    return [
        Finding("hostwire", True, f"{hostwire.__version__} at {package_dir} (revision {revision}, {how})"),
        Finding("python", True, f"{sys.executable} (Python {sys.version.split()[0]}, "
                + (f"private environment {sys.prefix})" if private else "no private environment)")),
    ]


def check_tools() -> list[Finding]:
    """Each C tool and the preload library, with the folder they came from and why."""
    build, origin = paths.build_dir_origin()
    fix = "reinstall hostwire" if origin == "installed" else "make build"
    findings = []
    for name in TOOLS:
        path = build / "bin" / name
        ok = os.access(path, os.X_OK)
        findings.append(Finding(f"tool {name}", ok, f"{path} ({origin})" if ok else f"{path} is missing", fix))
    library = build / "lib" / PRELOAD_LIBRARY
    findings.append(Finding(f"tool {PRELOAD_LIBRARY}", library.is_file(),
                            f"{library} ({origin})" if library.is_file() else f"{library} is missing", fix))
    return findings


def linked_libraries(programs: list[Path]) -> dict[str, str]:
    """soname -> the file the dynamic loader resolves it to ("not found" when it cannot), over
    every program given."""
    found: dict[str, str] = {}
    for program in programs:
        try:
            out = subprocess.run(["ldd", str(program)], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in out.splitlines():
            match = LDD_LINE.match(line)
            if match:
                found[match.group(1)] = match.group(2)
    return found


def check_linked_libraries(names: tuple[str, ...]) -> list[Finding]:
    """For an installed hostwire: each library (libpcap, ...) as the installed tools load it; the
    development files pkg-config knows are not needed there."""
    build, _ = paths.build_dir_origin()
    sonames = linked_libraries([build / "bin" / name for name in TOOLS])
    findings = []
    for name in names:
        hits = {soname: where for soname, where in sonames.items() if soname.startswith(f"{name}.so")}
        ok = bool(hits) and all(where != "not found" for where in hits.values())
        detail = ", ".join(f"{soname} => {where}" for soname, where in sorted(hits.items())) or "linked by no tool"
        findings.append(Finding(f"library {name}", ok, detail, f"apt-get install {name}*"))
    return findings


def check_documentation() -> list[Finding]:
    """The manual pages and the completion scripts, where `man` and the shells look for them (an
    install's pages may be compressed, and Debian's zsh reads vendor-completions)."""
    layout = paths.installed()
    if layout is not None:
        share = layout.prefix / "share"
        candidates = {
            "manual pages": [share / "man" / "man1" / "hostwire.1", share / "man" / "man1" / "hostwire.1.gz"],
            "bash completion": [share / "bash-completion" / "completions" / "hostwire"],
            "zsh completion": [share / "zsh" / "site-functions" / "_hostwire",
                               share / "zsh" / "vendor-completions" / "_hostwire"],
        }
    else:
        candidates = {"manual pages": [paths.REPO_ROOT / "man" / "hostwire.1"],
                      "bash completion": [paths.REPO_ROOT / "completion" / "hostwire.bash"],
                      "zsh completion": [paths.REPO_ROOT / "completion" / "_hostwire"]}
    fix = "reinstall hostwire" if layout else "make man completion"
    findings = []
    for what, places in candidates.items():
        found = next((place for place in places if place.is_file()), None)
        findings.append(Finding(what, found is not None, str(found) if found else f"{places[0]} is missing", fix))
    return findings
