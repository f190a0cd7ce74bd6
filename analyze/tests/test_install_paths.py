"""Where the package looks for its C tools and its revision: $HOSTWIRE_BUILD, then an install's
installed.json, then the checkout's build/ (docs/install.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hostwire import paths
from hostwire.errors import HostwireError


@pytest.fixture
def install_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """installed.json moved to a file of the test's: absent until the test writes it."""
    path = tmp_path / "installed.json"
    monkeypatch.setattr(paths, "INSTALLED_FILE", path)
    monkeypatch.delenv("HOSTWIRE_BUILD", raising=False)
    paths.installed.cache_clear()
    paths.source_revision.cache_clear()
    yield path
    paths.installed.cache_clear()
    paths.source_revision.cache_clear()


def test_a_checkout_uses_its_build_folder_and_its_git_head(install_file: Path) -> None:
    assert paths.build_dir_origin() == (paths.REPO_ROOT / "build", "checkout")
    assert paths.runs_root() == paths.REPO_ROOT / "runs"
    assert len(paths.source_revision() or "") == 40


def test_an_install_uses_its_libexec_folder_and_recorded_revision(install_file: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    install_file.write_text(json.dumps({"prefix": "/opt/hw", "libexec": "/opt/hw/libexec/hostwire",
                                        "revision": "0123abcd-dirty"}))
    assert paths.build_dir_origin() == (Path("/opt/hw/libexec/hostwire"), "installed")
    assert paths.source_revision() == "0123abcd-dirty"
    assert paths.runs_root() == Path("runs")  # the current folder's, never the prefix
    with pytest.raises(HostwireError, match=r"hw-bench is not built: /opt/hw/libexec/hostwire/bin/hw-bench is "
                                            r"missing \(reinstall hostwire\)"):
        paths.tool("hw-bench")
    monkeypatch.setenv("HOSTWIRE_BUILD", "/elsewhere/asan")  # the tests' override comes first
    assert paths.build_dir_origin() == (Path("/elsewhere/asan"), "$HOSTWIRE_BUILD")


def test_an_unknown_revision_is_none_and_a_damaged_file_one_line(install_file: Path) -> None:
    install_file.write_text(json.dumps({"prefix": "/p", "libexec": "/p/libexec/hostwire", "revision": "unknown"}))
    assert paths.source_revision() is None
    paths.installed.cache_clear()
    install_file.write_text('{"prefix": "/p"')
    with pytest.raises(HostwireError, match=r"installed.json: unreadable install description .*reinstall hostwire"):
        paths.installed()
