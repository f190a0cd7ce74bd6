"""The kernel trace's TCP connections (inet_sock_set_state): each socket's state changes with its
endpoints, and the process that connected it; its connections one after another on one socket
address, and the listen() calls. Read by the streams table (stream_tables) and by the
descriptors' lifetimes (fd_lifetimes), which names a connect()'s socket by the SYN its thread sent
and an accept()'s by the order its listener's connections were established."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.timeline.tables import as_int, is_event

TCP_SYN_SENT, TCP_ESTABLISHED, TCP_CLOSE, TCP_LISTEN = 2, 1, 7, 10


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


def connections(sched: pd.DataFrame | None) -> pd.DataFrame:
    """The TCP connections of the kernel trace (socket_states.socket_states): local, remote,
    active (it went through SYN_SENT), syn_tid and t_syn_ns (the task that moved it to SYN_SENT,
    in its connect(); -1 for a passive one) and t_established_ns (when it first reached
    ESTABLISHED; -1 never). A socket address serves one connection after another: a connection
    begins with its address's first event, a SYN_SENT, or the first event after a CLOSE; its
    endpoints are those of its first event with both ports (connect() moves the socket to
    SYN_SENT before it picks the local port)."""

    cols = ["local", "remote", "active", "syn_tid", "t_syn_ns", "t_established_ns"]
    states = socket_states(sched) if sched is not None else pd.DataFrame()
    if len(states) == 0:
        return pd.DataFrame(columns=cols)
    st = states.sort_values(["skaddr", "t_ns"], kind="stable").reset_index(drop=True)
    state = st["newstate"].to_numpy()
    sk = st["skaddr"].to_numpy()
    first = np.r_[True, sk[1:] != sk[:-1]]
    after_close = np.r_[False, state[:-1] == TCP_CLOSE] & ~first
    conn = np.cumsum(first | after_close | ((state == TCP_SYN_SENT) & ~first & ~after_close))
    st = st.assign(conn=conn)
    named = st[st["ports"].to_numpy()].groupby("conn")[["local", "remote"]].first()
    syn = st[state == TCP_SYN_SENT].groupby("conn").agg(t_syn_ns=("t_ns", "first"), syn_tid=("pid", "first"))
    est = st[state == TCP_ESTABLISHED].groupby("conn").agg(t_established_ns=("t_ns", "first"))
    out = named.join(syn).join(est).reset_index(drop=True)
    out = out.fillna({"syn_tid": -1, "t_syn_ns": -1, "t_established_ns": -1})
    out["active"] = out["t_syn_ns"].to_numpy() >= 0
    return out.astype({"syn_tid": np.int64, "t_syn_ns": np.int64, "t_established_ns": np.int64})[cols]


def listens(sched: pd.DataFrame | None) -> pd.DataFrame:
    """The kernel trace's listen() calls: t_ns, tid (the task that called it: the change to LISTEN
    runs in it) and local (the endpoint it listens on, 0.0.0.0:port for any address)."""

    states = socket_states(sched) if sched is not None else pd.DataFrame()
    if len(states) == 0:
        return pd.DataFrame(columns=["t_ns", "tid", "local"])
    on = states[states["newstate"].to_numpy() == TCP_LISTEN]
    return pd.DataFrame({"t_ns": on["t_ns"].to_numpy(), "tid": on["pid"].to_numpy(), "local": on["local"].to_numpy()})
