"""sender_rps: the sender host's received ACKs steered by RPS to its own CPUs (the 1997 host did
all its own network work), read back from the namespaces' sysfs; off, the sender's veth steers
nothing and only the receiver's is steered."""

from __future__ import annotations

import pytest

from hostwire.record.link import LinkSpec
from hostwire.record.point import PointError, RunPoint
from hostwire.record.topology import Topology, run_cmd




def rps_mask(ns: str, dev: str) -> int:
    return int(run_cmd(["cat", f"/sys/class/net/{dev}/queues/rx-0/rps_cpus"], netns=ns).stdout.strip(), 16)


@pytest.mark.privileged("netns")
@pytest.mark.parametrize("sender_rps_cpus, expected", [(None, 0), ("0", 0b1), ("1", 0b10)])
def test_the_senders_veth_steers_its_acks_only_when_asked(sender_rps_cpus: str | None, expected: int) -> None:
    with Topology(link=LinkSpec(qdisc="none"), receiver_cpus="1", sender_rps_cpus=sender_rps_cpus) as t:
        assert rps_mask(t.tx_ns, t.tx_dev) == expected
        assert rps_mask(t.rx_ns, t.rx_dev) == 0b10


def test_sender_rps_is_true_or_false() -> None:
    with pytest.raises(PointError, match="sender_rps = 'yes': expected true or false"):
        RunPoint(sender_rps="yes").validate()  # type: ignore[arg-type]


def test_real_hosts_refuse_sender_rps_in_one_line() -> None:
    from hostwire.record.remote_run import point_problems

    assert point_problems(RunPoint(sender_rps=True)) == [
        "sender_rps: it steers the namespaces' veth; on real hosts set the NIC's rps_cpus"]
    assert point_problems(RunPoint()) == []
