"""The scratch folder's checks (hostwire.record.remote_scratch) on this machine's own shell, as the
`local` host runs them: folders owned by another user, writable by others, a symbolic link on the
way, a sticky folder of root's, a tool changed after it was sent."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from hostwire.errors import HostwireError
from hostwire.record.hosts import Host, HostsSpec, parse_destination
from hostwire.record.remote_scratch import UnsafeFolder, make_scratch, remove_scratch, verify

pytestmark = pytest.mark.privileged("root")
NOBODY = 65534


def local(remote_dir: Path) -> Host:
    return Host("sender", parse_destination("local"), HostsSpec(remote_dir=str(remote_dir)))


@pytest.fixture
def base(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)
    return tmp_path


def test_a_scratch_folder_is_private_marked_and_removed(base: Path) -> None:
    scratch = make_scratch(local(base), "0", "c")
    path = Path(scratch.path)
    assert path.parent == base and path.name.startswith("hostwire-c-sender.") and len(path.suffix) == 11
    assert path.stat().st_mode & 0o7777 == 0o700 and path.stat().st_uid == 0
    assert (path / ".hostwire-scratch").is_file()
    other = make_scratch(local(base), "0", "c")
    assert other.path != scratch.path  # two roles on one filesystem: two folders
    remove_scratch(local(base), scratch)
    remove_scratch(local(base), other)
    assert list(base.iterdir()) == []


@pytest.mark.parametrize(("setup", "message"), [
    (lambda b: os.chown(b, NOBODY, NOBODY), "remote_dir {b} is owned by nobody (uid 65534), not by root or the login user"),
    (lambda b: b.chmod(0o777), "remote_dir {b} is writable by other users (mode 777, owner root)"),
    (lambda b: b.chmod(0o775), "remote_dir {b} is writable by other users (mode 775, owner root)"),
])
def test_a_base_folder_others_can_change_is_refused_in_one_line(base: Path, setup: object, message: str) -> None:
    setup(base)  # type: ignore[operator]
    with pytest.raises(UnsafeFolder) as err:
        make_scratch(local(base), "0", "c")
    assert str(err.value) == f"sender (local): {message.format(b=base)}; nothing started"
    assert list(base.iterdir()) == []


def test_a_sticky_folder_of_roots_is_a_base_but_a_link_on_the_way_is_not(base: Path) -> None:
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp and /var/tmp: nobody else can rename what is in it
    remove_scratch(local(sticky), make_scratch(local(sticky), "0", "c"))
    os.chown(sticky, NOBODY, NOBODY)  # sticky, but another user's: that user can
    with pytest.raises(UnsafeFolder, match="is owned by nobody"):
        make_scratch(local(sticky), "0", "c")
    (base / "real").mkdir()
    (base / "link").symlink_to(base / "real")
    (base / "real" / "below").mkdir()
    with pytest.raises(UnsafeFolder) as err:
        make_scratch(local(base / "link" / "below"), "0", "c")
    assert str(err.value) == f"sender (local): remote_dir {base}/link/below: {base}/link is a symbolic link; nothing started"


def test_a_tool_changed_or_opened_to_others_refuses_the_run(base: Path) -> None:
    scratch = make_scratch(local(base), "0", "c")
    Path(scratch.bin).mkdir()
    tool = Path(scratch.bin) / "hw-bench"
    tool.write_bytes(b"sent")
    tool.chmod(0o755)
    sent = {"hw-bench": hashlib.sha256(b"sent").hexdigest()}
    verify(local(base), scratch, sent, then=f"mkdir -p {scratch.run_dir('r')}")
    assert Path(scratch.run_dir("r")).is_dir()
    tool.write_bytes(b"swapped")
    with pytest.raises(HostwireError) as err:
        verify(local(base), scratch, sent, then=f"mkdir -p {scratch.run_dir('s')}")
    now = hashlib.sha256(b"swapped").hexdigest()[:12]
    assert str(err.value) == (f"sender (local): {tool} is not the file sent (sha256 {now}..., "
                              f"sent {sent['hw-bench'][:12]}...); the run did not start")
    assert not Path(scratch.run_dir("s")).exists()
    tool.write_bytes(b"sent")
    tool.chmod(0o777)
    with pytest.raises(UnsafeFolder, match=r"hw-bench is writable by other users \(mode 777"):
        verify(local(base), scratch, sent)
    Path(scratch.path).chmod(0o750)
    with pytest.raises(UnsafeFolder, match=r"is open to other users \(mode 750"):
        verify(local(base), scratch, sent)
    with pytest.raises(HostwireError, match="could not remove"):
        remove_scratch(local(base), scratch)  # no longer the private folder made: left alone
