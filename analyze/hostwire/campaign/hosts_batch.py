"""A campaign on real hosts (`[hosts]`, docs/hosts.md): the hosts prepared once before the first run
(each problem one line), then each run recorded through hostwire.record.hosts_runner, and at the
end every host's scratch folder removed (also after an error or Ctrl-C; kept with --keep-remote).
A host that cannot be reached or lacks something is reported and the campaign goes on: each run
that needs it fails or is marked partial with the reason, and `--resume` records it again. A
folder another user of a host could change stops the campaign before anything starts."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostwire.campaign.config import CampaignConfig
from hostwire.errors import HostwireError
from hostwire.record.hosts import Host, HostLost, hosts_of
from hostwire.record.point import RunPoint
from hostwire.record.remote_prepare import Prepared, prepare
from hostwire.record.remote_run import role_of, unique_hosts
from hostwire.record.remote_scratch import remove_scratch

log = logging.getLogger(__name__)


@dataclass
class CampaignHosts:
    config: CampaignConfig
    hosts: dict[str, Host]
    prepared: dict[str, Prepared] = field(default_factory=dict)
    keep_remote: bool = False

    @classmethod
    def prepare(cls, config: CampaignConfig, keep_remote: bool = False) -> "CampaignHosts":
        """Raises UnsafeFolder (one line) after removing the scratch folders already made."""
        self = cls(config, hosts_of(config.hosts), keep_remote=keep_remote)
        try:
            for role, host in unique_hosts(self.hosts).items():
                self._prepare_machine(role, host)
                for problem in self.prepared[role].problems:
                    log.warning("%s", problem)
        except BaseException:
            self.cleanup(keep=False)
            raise
        for role, host in self.hosts.items():  # a role on a machine already prepared shares its result
            if role not in self.prepared:
                self._share(role, host)
        self._loopback_when_one_stack()
        return self

    def _prepare_machine(self, role: str, host: Host) -> None:
        spec = self.config.hosts
        self.prepared[role] = prepare(host, self.config.name, spec.receiver_address or spec.receiver.hostname)

    def _share(self, role: str, host: Host) -> None:
        machines = unique_hosts(self.hosts)
        twin = next(r for r, h in machines.items() if h.destination.text == host.destination.text)
        host.sudo = machines[twin].sudo
        self.prepared[role] = self.prepared[twin]

    def _loopback_when_one_stack(self) -> None:
        """The sender and the receiver on one network stack (one machine under two names): their
        traffic goes over the loopback interface, so that is where both capture."""
        stacks = {role: self.prepared[role].facts.get("network_stack") for role in unique_hosts(self.hosts)}
        sender = stacks[role_of(self.hosts, "sender")]
        if sender and sender == stacks[role_of(self.hosts, "receiver")]:
            for role, stack in stacks.items():
                if stack == sender:
                    self.prepared[role].facts["interface"] = "lo"

    def problems(self) -> list[str]:
        return [p for role in unique_hosts(self.hosts) for p in self.prepared[role].problems]

    def facts(self) -> dict[str, Any]:
        return {role: self.prepared[role].as_dict() for role in unique_hosts(self.hosts) if role in self.prepared}

    def record(self, directory: Path, run_id: str, point: RunPoint, run_config: dict[str, Any]) -> tuple[str, str]:
        from hostwire.record.hosts_runner import record_run_on_hosts
        from hostwire.timeline.host_alignment import align

        unreachable = [p for role in unique_hosts(self.hosts) for p in self.prepared[role].problems
                       if not self.prepared[role].reachable]
        if unreachable:  # tried again: a host back since the campaign began is used
            self.retry_unreachable()
            unreachable = [p for role in unique_hosts(self.hosts) for p in self.prepared[role].problems
                           if not self.prepared[role].reachable]
        if unreachable:
            return "failed", unreachable[0]
        record = record_run_on_hosts(directory, run_id, point, self.hosts, self.prepared, run_config, align_clocks=align)
        return record.status, record.reason

    def retry_unreachable(self) -> None:
        for role, host in unique_hosts(self.hosts).items():
            if not self.prepared[role].reachable:
                self._prepare_machine(role, host)
                for other, twin in self.hosts.items():
                    if twin.destination.text == host.destination.text:
                        self.prepared[other] = self.prepared[role]
        self._loopback_when_one_stack()

    def cleanup(self, keep: bool | None = None) -> None:
        """Removes each host's scratch folder (one line for each that cannot be removed, with the
        command that removes it later); with keep, names each folder left."""
        keep = self.keep_remote if keep is None else keep
        for role in unique_hosts(self.hosts):
            prepared = self.prepared.get(role)
            if prepared is None or prepared.scratch is None:
                continue
            if keep:
                log.warning("%s: kept %s (--keep-remote)", prepared.host.name, prepared.scratch.path)
                continue
            try:
                remove_scratch(prepared.host, prepared.scratch)
            except (HostLost, HostwireError) as err:
                log.warning("%s; 'hostwire doctor --cleanup %s' removes it once the host answers",
                            err, prepared.host.destination.text)
