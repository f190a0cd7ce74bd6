"""The scheduler's tables of a run's timeline (docs/timeline.md): switches, wake-ups and
migrations, what ran on each CPU, each task's state over time and the run queues
(hostwire.timeline.stream_tables has the streams' tables). Every builder here takes DataFrames (hand-built ones in tests, a Run's
raw tables in hostwire.timeline.build) and returns a DataFrame; stamps are int64 ns of the run's
reference clock (the sender host's CLOCK_MONOTONIC)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError

# sched_switch prev_state as the kernel reports it: 0 = R (runnable, e.g. after yield), 256 =
# TASK_REPORT_MAX (preempted while runnable, "R+"); any of the low bits set = not runnable
# (S, D, T, t, X, Z, P, I).
STATE_PREEMPTED = 256
RUNNING, RUNNABLE, SLEEPING = "running", "runnable", "sleeping"
TASK_STATES = (RUNNING, RUNNABLE, SLEEPING)

SWITCH_COLUMNS = ["t_ns", "cpu", "prev_pid", "prev_comm", "prev_state", "prev_runnable", "next_pid", "next_comm"]
WAKEUP_COLUMNS = ["t_ns", "cpu", "pid", "comm", "target_cpu", "waker_pid", "waker_comm", "new"]
MIGRATION_COLUMNS = ["t_ns", "pid", "comm", "orig_cpu", "dest_cpu"]
RUNNING_COLUMNS = ["cpu", "t_start_ns", "t_end_ns", "dur_ns", "pid", "comm", "role"]
STATE_COLUMNS = ["pid", "t_start_ns", "t_end_ns", "state", "cpu"]
RUNQUEUE_COLUMNS = ["cpu", "t_ns", "nr_running", "nr_waiting"]


def require_columns(df: pd.DataFrame, columns: list[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(missing)}")


def is_event(sched: pd.DataFrame, *names: str) -> np.ndarray:
    """Which rows are one of these events (compared in the text column's own storage: turning a
    long trace's event names into Python strings first costs more than the whole comparison)."""
    return np.asarray(sched["event"].isin(names), dtype=bool)


def as_int(series: pd.Series, fill: int = -1) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").fillna(fill).to_numpy().astype(np.int64)


# ------------------------------------------------------------------ scheduler events


def switches(sched: pd.DataFrame) -> pd.DataFrame:
    """sched_switch events: t_ns, cpu, prev_pid, prev_comm, prev_state (the kernel's code),
    prev_runnable (the task left its CPU still runnable: preempted or yielded), next_pid,
    next_comm. Time-ordered."""
    require_columns(sched, ["t_ns", "cpu", "event"], "sched.tsv")
    ev = sched[is_event(sched, "sched_switch")]
    if len(ev):
        require_columns(ev, ["prev_pid", "prev_comm", "prev_state", "next_pid", "next_comm"], "sched.tsv sched_switch")
    state = as_int(ev["prev_state"], 1) if len(ev) else np.zeros(0, np.int64)
    out = pd.DataFrame({
        "t_ns": ev["t_ns"].to_numpy().astype(np.int64),
        "cpu": ev["cpu"].to_numpy().astype(np.int64),
        "prev_pid": as_int(ev["prev_pid"]) if len(ev) else np.zeros(0, np.int64),
        "prev_comm": ev["prev_comm"].astype(str).to_numpy() if len(ev) else np.zeros(0, object),
        "prev_state": state,
        "prev_runnable": (state & (STATE_PREEMPTED - 1)) == 0,
        "next_pid": as_int(ev["next_pid"]) if len(ev) else np.zeros(0, np.int64),
        "next_comm": ev["next_comm"].astype(str).to_numpy() if len(ev) else np.zeros(0, object),
    })
    return out.sort_values(["t_ns", "cpu"], kind="stable").reset_index(drop=True)


def wakeups(sched: pd.DataFrame) -> pd.DataFrame:
    """sched_wakeup and sched_wakeup_new events: t_ns, cpu (whose buffer holds the event), pid and
    comm of the task woken, target_cpu (where it will run), waker_pid and waker_comm (the task that
    ran when the event fired; 0 for an interrupt), new (a task's first wake-up after fork)."""
    require_columns(sched, ["t_ns", "cpu", "event"], "sched.tsv")
    ev = sched[is_event(sched, "sched_wakeup", "sched_wakeup_new")]
    if len(ev):
        require_columns(ev, ["arg_pid", "arg_comm", "target_cpu"], "sched.tsv sched_wakeup")
    out = pd.DataFrame({
        "t_ns": ev["t_ns"].to_numpy().astype(np.int64),
        "cpu": ev["cpu"].to_numpy().astype(np.int64),
        "pid": as_int(ev["arg_pid"]) if len(ev) else np.zeros(0, np.int64),
        "comm": ev["arg_comm"].astype(str).to_numpy() if len(ev) else np.zeros(0, object),
        "target_cpu": as_int(ev["target_cpu"]) if len(ev) else np.zeros(0, np.int64),
        "waker_pid": ev["pid"].to_numpy().astype(np.int64),
        "waker_comm": ev["comm"].astype(str).to_numpy(),
        "new": is_event(ev, "sched_wakeup_new"),
    })
    return out.sort_values(["t_ns", "cpu"], kind="stable").reset_index(drop=True)


def migrations(sched: pd.DataFrame) -> pd.DataFrame:
    """sched_migrate_task events: t_ns, pid, comm, orig_cpu, dest_cpu."""
    require_columns(sched, ["t_ns", "cpu", "event"], "sched.tsv")
    ev = sched[is_event(sched, "sched_migrate_task")]
    if len(ev):
        require_columns(ev, ["arg_pid", "arg_comm", "orig_cpu", "dest_cpu"], "sched.tsv sched_migrate_task")
    n = len(ev)
    return pd.DataFrame({
        "t_ns": ev["t_ns"].to_numpy().astype(np.int64),
        "pid": as_int(ev["arg_pid"]) if n else np.zeros(0, np.int64),
        "comm": ev["arg_comm"].astype(str).to_numpy() if n else np.zeros(0, object),
        "orig_cpu": as_int(ev["orig_cpu"]) if n else np.zeros(0, np.int64),
        "dest_cpu": as_int(ev["dest_cpu"]) if n else np.zeros(0, np.int64),
    }).sort_values("t_ns", kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------ roles


def role_map(bench_summary: dict | None, sched: pd.DataFrame | None = None) -> dict[int, str]:
    """pid -> role of the benchmark's processes: send-<i>, bg-<i> and recv-<i> from bench.json, and
    main: the process that forked the senders (sched_process_fork in the kernel trace)."""
    roles: dict[int, str] = {}
    if not bench_summary:
        return roles
    for proc in [*bench_summary.get("processes", []), *bench_summary.get("receivers", [])]:
        try:
            roles[int(proc["pid"])] = str(proc["role"])
        except (KeyError, TypeError, ValueError):
            continue
    if sched is not None and len(sched) and "child_pid" in sched.columns:
        forks = sched[is_event(sched, "sched_process_fork")]
        children = as_int(forks["child_pid"])
        parents = as_int(forks["parent_pid"]) if "parent_pid" in forks.columns else as_int(forks["pid"])
        senders = [pid for pid, role in roles.items() if role.startswith(("send-", "bg-"))]
        mains = parents[np.isin(children, senders)]
        if len(mains):
            main = int(pd.Series(mains).mode().iloc[0])
            roles.setdefault(main, "main")
    return roles


def roles_of(pid: np.ndarray, comm: np.ndarray, roles: dict[int, str]) -> np.ndarray:
    """The role of each (pid, comm): the benchmark's roles, `idle` for pid 0, `collector` for the
    hostwire collectors (comm hw-* other than hw-bench), `other` for the rest."""
    pid = np.asarray(pid, dtype=np.int64)
    comm = pd.Series(np.asarray(comm, dtype=object)).astype(str)
    out = pd.Series(pid).map(roles).to_numpy(dtype=object)
    missing = pd.isna(out)
    collector = (comm.str.startswith("hw-") & (comm != "hw-bench")).to_numpy()
    out[missing & collector] = "collector"
    out[missing & ~collector] = "other"
    out[pid == 0] = "idle"
    return out.astype(str)


# ------------------------------------------------------------------ CPUs and tasks


def running(sw: pd.DataFrame, t_first_ns: int, t_last_ns: int, roles: dict[int, str]) -> pd.DataFrame:
    """Per CPU, the intervals [t_start_ns, t_end_ns) of which task ran: from the trace's first
    stamp to its first switch the task that switched out, then each switch's next task until the
    CPU's next switch (the last until the trace's last stamp). Columns: cpu, t_start_ns, t_end_ns,
    dur_ns, pid, comm, role (roles_of)."""
    require_columns(sw, SWITCH_COLUMNS, "switches")
    if len(sw) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
            RUNNING_COLUMNS, ["int64", "int64", "int64", "int64", "int64", "object", "object"])})
    s = sw.sort_values(["cpu", "t_ns"], kind="stable")
    cpu = s["cpu"].to_numpy()
    t = s["t_ns"].to_numpy()
    first = np.ones(len(s), dtype=bool)
    first[1:] = cpu[1:] != cpu[:-1]
    last = np.roll(first, -1)
    nxt = np.roll(t, -1)
    end = np.where(last, max(t_last_ns, int(t.max())), nxt)
    start_first = min(t_first_ns, int(t.min()))
    head = pd.DataFrame({"cpu": cpu[first], "t_start_ns": start_first, "t_end_ns": t[first],
                         "pid": s["prev_pid"].to_numpy()[first], "comm": s["prev_comm"].to_numpy()[first]})
    body = pd.DataFrame({"cpu": cpu, "t_start_ns": t, "t_end_ns": end,
                         "pid": s["next_pid"].to_numpy(), "comm": s["next_comm"].to_numpy()})
    out = pd.concat([head, body], ignore_index=True)
    out = out[out["t_end_ns"].to_numpy() > out["t_start_ns"].to_numpy()]
    out = out.sort_values(["cpu", "t_start_ns"], kind="stable").reset_index(drop=True)
    out["dur_ns"] = out["t_end_ns"] - out["t_start_ns"]
    out["role"] = roles_of(out["pid"].to_numpy(), out["comm"].to_numpy(), roles)
    return out[RUNNING_COLUMNS]


def task_states(sw: pd.DataFrame, wk: pd.DataFrame, mg: pd.DataFrame, t_first_ns: int,
                t_last_ns: int) -> pd.DataFrame:
    """Each task's state over time (idle, pid 0, left out): intervals [t_start_ns, t_end_ns) with
    state running (on cpu), runnable (waiting for cpu) or sleeping (cpu: where it last was).
    Switch-in: running; switch-out: runnable when prev_runnable, else sleeping; wake-up: runnable
    on target_cpu when the task's next switch event switches it in (a wake-up of a running task,
    or one no switch-in follows, changes nothing); migration: same state on
    dest_cpu. Before a task's first event: running on its CPU when that event switches it out,
    runnable when it switches it in, sleeping otherwise."""
    n_sw = len(sw)
    pid = np.concatenate([sw["next_pid"].to_numpy(), sw["prev_pid"].to_numpy(), wk["pid"].to_numpy(),
                          mg["pid"].to_numpy()]).astype(np.int64)
    t = np.concatenate([sw["t_ns"].to_numpy(), sw["t_ns"].to_numpy(), wk["t_ns"].to_numpy(),
                        mg["t_ns"].to_numpy()]).astype(np.int64)
    # kind: 0 switch-out, 1 switch-in (same stamp: out before in), 2 wake-up, 3 migration
    kind = np.concatenate([np.full(n_sw, 1), np.full(n_sw, 0), np.full(len(wk), 2), np.full(len(mg), 3)])
    cpu = np.concatenate([sw["cpu"].to_numpy(), sw["cpu"].to_numpy(), wk["target_cpu"].to_numpy(),
                          mg["dest_cpu"].to_numpy()]).astype(np.int64)
    prev_cpu_hint = np.concatenate([sw["cpu"].to_numpy(), sw["cpu"].to_numpy(), wk["target_cpu"].to_numpy(),
                                    mg["orig_cpu"].to_numpy()]).astype(np.int64)
    # state codes: 0 running, 1 runnable, 2 sleeping, -1 to be derived
    state = np.concatenate([np.zeros(n_sw, np.int64),
                            np.where(sw["prev_runnable"].to_numpy().astype(bool), 1, 2),
                            np.full(len(wk), -1), np.full(len(mg), -1)]).astype(np.int64)
    keep = pid > 0
    pid, t, kind, cpu, prev_cpu_hint, state = pid[keep], t[keep], kind[keep], cpu[keep], prev_cpu_hint[keep], state[keep]
    if len(pid) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(
            STATE_COLUMNS, ["int64", "int64", "int64", "object", "int64"])})
    order = np.lexsort((kind, t, pid))
    pid, t, kind, cpu, prev_cpu_hint, state = (a[order] for a in (pid, t, kind, cpu, prev_cpu_hint, state))
    first = np.ones(len(pid), dtype=bool)
    first[1:] = pid[1:] != pid[:-1]
    group = np.cumsum(first) - 1

    def ffill_prior(values: np.ndarray, known: np.ndarray, default: int, grp: np.ndarray | None = None) -> np.ndarray:
        """Per row: the value of the latest earlier known row of the same task (default: none)."""
        idx = np.where(known, np.arange(len(values)), -1)
        idx = np.maximum.accumulate(idx)
        prior = np.empty_like(idx)
        prior[0] = -1
        prior[1:] = idx[:-1]
        # an index from another task does not count
        g = group if grp is None else grp
        valid = prior >= 0
        valid[valid] = g[prior[valid]] == g[valid]
        return np.where(valid, values[np.maximum(prior, 0)], default)

    is_switch = kind <= 1
    switch_state = ffill_prior(state, is_switch, 2)
    # the task's next switch event (reversed rows: the prior one): a wake-up counts only when the
    # task then switches in; one that no switch-in follows (a task already awake, the trace's end)
    # changes nothing
    rev = slice(None, None, -1)
    next_kind = ffill_prior(kind[rev], is_switch[rev], -1, group[rev])[rev]
    wake = kind == 2
    confirmed = wake & (next_kind == 1)
    state[wake & ~confirmed] = -1
    state[confirmed] = np.where(switch_state[confirmed] == 0, 0, 1)
    wake = confirmed
    known = state >= 0
    carried = ffill_prior(state, known, 2)
    state[~known] = carried[~known]
    # a wake-up of a running task keeps its CPU
    cpu_known = ~(wake & (switch_state == 0))
    carried_cpu = ffill_prior(cpu, cpu_known, -1)
    cpu = np.where(cpu_known, cpu, carried_cpu)
    # the state before each task's first event
    first_kind = kind[first]
    init_state = np.where(first_kind == 0, 0, np.where(first_kind == 1, 1, 2))
    init_cpu = prev_cpu_hint[first]
    t_first_task = t[first]
    t_lo = min(int(t_first_ns), int(t.min()))
    head = pd.DataFrame({"pid": pid[first], "t_start_ns": t_lo, "t_end_ns": t_first_task,
                         "state_code": init_state, "cpu": init_cpu})
    last = np.roll(first, -1)
    end = np.where(last, max(int(t_last_ns), int(t.max())), np.roll(t, -1))
    body = pd.DataFrame({"pid": pid, "t_start_ns": t, "t_end_ns": end, "state_code": state, "cpu": cpu})
    out = pd.concat([head, body], ignore_index=True)
    out = out[out["t_end_ns"].to_numpy() > out["t_start_ns"].to_numpy()]
    out = out.sort_values(["pid", "t_start_ns"], kind="stable").reset_index(drop=True)
    # merge consecutive intervals of one task in the same state on the same CPU
    p, sc, c = out["pid"].to_numpy(), out["state_code"].to_numpy(), out["cpu"].to_numpy()
    new = np.ones(len(out), dtype=bool)
    new[1:] = (p[1:] != p[:-1]) | (sc[1:] != sc[:-1]) | (c[1:] != c[:-1]) | (
        out["t_start_ns"].to_numpy()[1:] != out["t_end_ns"].to_numpy()[:-1])
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(out)) - 1
    merged = pd.DataFrame({
        "pid": p[starts], "t_start_ns": out["t_start_ns"].to_numpy()[starts],
        "t_end_ns": out["t_end_ns"].to_numpy()[ends],
        "state": np.array(TASK_STATES, dtype=object)[sc[starts]], "cpu": c[starts]})
    return merged[STATE_COLUMNS]


def runqueue(states: pd.DataFrame) -> pd.DataFrame:
    """Per CPU, at each change: nr_running (tasks running or runnable on it, as the kernel's
    nr_running, idle not counted) and nr_waiting (runnable, not running). Columns: cpu, t_ns,
    nr_running, nr_waiting; each row holds until the CPU's next row."""
    require_columns(states, STATE_COLUMNS, "task states")
    active = states[states["state"].isin([RUNNING, RUNNABLE]).to_numpy() & (states["cpu"].to_numpy() >= 0)]
    waiting = (active["state"].to_numpy() == RUNNABLE).astype(np.int64)
    cpu = np.concatenate([active["cpu"].to_numpy(), active["cpu"].to_numpy()]).astype(np.int64)
    t = np.concatenate([active["t_start_ns"].to_numpy(), active["t_end_ns"].to_numpy()]).astype(np.int64)
    d_run = np.concatenate([np.ones(len(active), np.int64), -np.ones(len(active), np.int64)])
    d_wait = np.concatenate([waiting, -waiting])
    if len(t) == 0:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in RUNQUEUE_COLUMNS})
    deltas = pd.DataFrame({"cpu": cpu, "t_ns": t, "d_run": d_run, "d_wait": d_wait})
    summed = deltas.groupby(["cpu", "t_ns"], sort=True).sum().reset_index()
    summed["nr_running"] = summed.groupby("cpu")["d_run"].cumsum()
    summed["nr_waiting"] = summed.groupby("cpu")["d_wait"].cumsum()
    return summed[RUNQUEUE_COLUMNS].astype("int64")
