"""A campaign on real hosts (`[hosts]`, docs/hosts.md): the hosts prepared once before the first run
(each problem one line), then each run recorded through hostwire.record.hosts_runner. A host that
cannot be reached or lacks something is reported and the campaign goes on: each run that needs
it fails or is marked partial with the reason, and `--resume` records it again."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostwire.campaign.config import CampaignConfig
from hostwire.record.hosts import Host, hosts_of
from hostwire.record.point import RunPoint
from hostwire.record.remote_prepare import Prepared, prepare
from hostwire.record.remote_run import unique_hosts

log = logging.getLogger(__name__)


@dataclass
class CampaignHosts:
    config: CampaignConfig
    hosts: dict[str, Host]
    prepared: dict[str, Prepared] = field(default_factory=dict)

    @classmethod
    def prepare(cls, config: CampaignConfig) -> "CampaignHosts":
        spec = config.hosts
        hosts = hosts_of(spec)
        address = spec.receiver_address or spec.receiver.hostname
        self = cls(config, hosts)
        machines = unique_hosts(hosts)
        for role, host in machines.items():
            self.prepared[role] = prepare(host, config.name, address)
            for problem in self.prepared[role].problems:
                log.warning("%s", problem)
        for role, host in hosts.items():  # a role on a machine already prepared shares its result
            if role not in self.prepared:
                twin = next(r for r, h in machines.items() if h.destination.text == host.destination.text)
                host.sudo = machines[twin].sudo
                self.prepared[role] = self.prepared[twin]
        return self

    def problems(self) -> list[str]:
        return [p for role in unique_hosts(self.hosts) for p in self.prepared[role].problems]

    def facts(self) -> dict[str, Any]:
        return {role: self.prepared[role].as_dict() for role in unique_hosts(self.hosts)}

    def record(self, directory: Path, run_id: str, point: RunPoint, run_config: dict[str, Any]) -> tuple[str, str]:
        from hostwire.record.hosts_runner import record_run_on_hosts

        unreachable = [p for role in unique_hosts(self.hosts) for p in self.prepared[role].problems
                       if not self.prepared[role].reachable]
        if unreachable:  # tried again: a host back since the campaign began is used
            self.retry_unreachable()
            unreachable = [p for role in unique_hosts(self.hosts) for p in self.prepared[role].problems
                           if not self.prepared[role].reachable]
        if unreachable:
            return "failed", unreachable[0]
        record = record_run_on_hosts(directory, run_id, point, self.hosts, self.prepared, self.config.name,
                                     run_config)
        return record.status, record.reason

    def retry_unreachable(self) -> None:
        spec = self.config.hosts
        address = spec.receiver_address or spec.receiver.hostname
        for role, host in unique_hosts(self.hosts).items():
            if not self.prepared[role].reachable:
                self.prepared[role] = prepare(host, self.config.name, address)
                for other, twin in self.hosts.items():
                    if twin.destination.text == host.destination.text:
                        self.prepared[other] = self.prepared[role]
