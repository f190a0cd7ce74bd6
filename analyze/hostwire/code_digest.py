"""What a cache was computed by: the sha256 of the source of the hostwire modules a computation
can run (a module and every hostwire module it imports, at the top or inside a function, found in
the source itself), and the package's version. A cache records it beside the digests of the raw
files it was made from and serves only while both are the same, so that an upgrade of the code
that computes a table recomputes it, and no number has to be raised by hand."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import hostwire

PACKAGE = Path(hostwire.__file__).resolve().parent


def _file_of(module: str) -> Path | None:
    """The source file of a hostwire module or package, None when there is none."""
    parts = module.split(".")[1:]
    base = PACKAGE.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


# import statements, read from the text (an AST walk of the package takes seconds): a statement in
# a docstring adds a module, which only makes the digest cover more than it needs.
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#]*)", re.M)


def _imported(path: Path, module: str) -> set[str]:
    """The hostwire modules `path` (module `module`) imports: each `import hostwire.x`, each
    `from hostwire.x import y` (y itself when it is a module) and each relative import."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    text = path.read_text()
    names: set[str] = set()
    for match in _IMPORT.finditer(text):
        for item in match.group(1).split(","):
            name = item.split()[0] if item.split() else ""
            if name.split(".")[0] == "hostwire":
                names.add(name)
    for match in _FROM.finditer(text):
        base = match.group(1)
        level = len(base) - len(base.lstrip("."))
        if level:
            anchor = package.split(".")[:len(package.split(".")) - level + 1]
            base = ".".join([*anchor, *([base[level:]] if base[level:] else [])])
        if base.split(".")[0] != "hostwire":
            continue
        names.add(base)
        for item in match.group(2).strip("()").replace("\n", " ").split(","):
            words = item.split()
            if words and _file_of(f"{base}.{words[0]}") is not None:
                names.add(f"{base}.{words[0]}")
    return names


@lru_cache(maxsize=None)
def modules_of(root: str) -> tuple[Path, ...]:
    """The source files of `root` and of every hostwire module it reaches through imports (the
    packages on the way, whose __init__ runs first, included)."""
    seen: dict[str, Path] = {}
    todo = [root, "hostwire"]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        path = _file_of(module)
        if path is None:
            continue
        seen[module] = path
        todo += [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        todo += sorted(_imported(path, module))
    return tuple(sorted(set(seen.values())))


@lru_cache(maxsize=None)
def code_digest(root: str) -> str:
    """sha256 over hostwire's version and the path and bytes of every module `root` reaches."""
    h = hashlib.sha256(f"hostwire {hostwire.__version__}\n".encode())
    for path in modules_of(root):
        data = path.read_bytes()
        h.update(f"{path.relative_to(PACKAGE)} {len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()
