"""The kernel trace's TCP connections (inet_sock_set_state): each socket's state changes with its
endpoints, and the process that connected it. Read by the streams table (stream_tables) and by the
descriptors' lifetimes (fd_lifetimes), which names a connect()'s socket by the SYN its thread sent."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.timeline.tables import as_int, is_event


def _hex_ip(values: pd.Series) -> np.ndarray:
    """inet_sock_set_state's saddr/daddr (4 bytes, hex in memory order) as dotted text."""
    text = values.astype(str).str.lower()
    ok = text.str.fullmatch(r"[0-9a-f]{8}")
    parts = [text.str.slice(i, i + 2).where(ok, "00").map(lambda h: str(int(h, 16))) for i in (0, 2, 4, 6)]
    return (parts[0] + "." + parts[1] + "." + parts[2] + "." + parts[3]).where(ok, "").to_numpy()


def _hex_ip6(values: pd.Series) -> np.ndarray:
    """inet_sock_set_state's saddr_v6/daddr_v6 (16 bytes, hex in memory order) as the capture
    names them: "[2001:db8::1]", or the IPv4 address of an IPv4-mapped one."""
    import ipaddress

    out = []
    for text in values.astype(str).str.lower():
        try:
            addr = ipaddress.IPv6Address(bytes.fromhex(text))
        except ValueError:
            out.append("")
            continue
        out.append(str(addr.ipv4_mapped) if addr.ipv4_mapped else f"[{addr.compressed}]")
    return np.asarray(out, dtype=object)


def socket_states(sched: pd.DataFrame) -> pd.DataFrame:
    """The inet_sock_set_state events of IPv4 and IPv6 sockets: t_ns, pid (the task that ran),
    skaddr, local, remote (ip:port), ports (both ports known), newstate."""
    cols = ["t_ns", "pid", "skaddr", "local", "remote", "ports", "newstate"]
    if "event" not in sched.columns or "skaddr" not in sched.columns:
        return pd.DataFrame(columns=cols)
    ev = sched[is_event(sched, "inet_sock_set_state")]
    if len(ev) == 0:
        return pd.DataFrame(columns=cols)
    family = as_int(ev["family"]) if "family" in ev.columns else np.full(len(ev), 2)
    v6 = family == 10
    if "saddr_v6" not in ev.columns:
        v6[:] = False
    ev, v6 = ev[(family == 2) | v6], v6[(family == 2) | v6]
    sport, dport = as_int(ev["sport"], 0), as_int(ev["dport"], 0)
    src, dst = _hex_ip(ev["saddr"]), _hex_ip(ev["daddr"])
    if v6.any():
        src[v6] = _hex_ip6(ev["saddr_v6"][v6])
        dst[v6] = _hex_ip6(ev["daddr_v6"][v6])
    local = pd.Series(src) + ":" + pd.Series(sport).astype(str)
    remote = pd.Series(dst) + ":" + pd.Series(dport).astype(str)
    return pd.DataFrame({"t_ns": ev["t_ns"].to_numpy().astype(np.int64), "pid": ev["pid"].to_numpy().astype(np.int64),
                         "skaddr": ev["skaddr"].astype(str).to_numpy(), "local": local.to_numpy(),
                         "remote": remote.to_numpy(), "ports": (sport > 0) & (dport > 0),
                         "newstate": as_int(ev["newstate"], 0)})


def socket_owners(sched: pd.DataFrame) -> pd.DataFrame:
    """Connections seen by inet_sock_set_state: one row per socket (skaddr) with both ports known,
    columns skaddr, local (ip:port), remote (ip:port), owner_pid (the process that moved the socket
    to SYN_SENT: connect() runs in its owner; -1 for a socket that did not connect, whose changes
    come from softirq in whatever task ran), active (the socket connected: it went through
    SYN_SENT)."""
    cols = ["skaddr", "local", "remote", "owner_pid", "active"]
    states = socket_states(sched)
    if len(states) == 0:
        return pd.DataFrame(columns=cols)
    tab = states.assign(syn_sent=states["newstate"].to_numpy() == 2)
    # connect() moves a socket to SYN_SENT in the connecting process; later changes come mostly
    # from softirq, in the context of whatever task ran, which owns nothing
    owner = tab[(tab["pid"] > 0) & tab["syn_sent"]].groupby("skaddr")["pid"].first()
    active = tab.groupby("skaddr")["syn_sent"].any()
    named = tab[tab["ports"]].groupby("skaddr")[["local", "remote"]].first()
    out = named.join(owner.rename("owner_pid")).join(active.rename("active")).reset_index()
    out["owner_pid"] = out["owner_pid"].fillna(-1).astype("int64")
    return out[cols]
