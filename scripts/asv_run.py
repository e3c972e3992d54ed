#!/usr/bin/env python
"""``python -m asv ARGS``, but stopping it leaves no process behind.

asv starts every benchmark process (and its fork server) in a process group of its own, so a
Ctrl-C or ``kill`` aimed at asv does not reach them, and asv cleans them up only when it gets
a Ctrl-C itself: a ``kill``, a closed terminal or a ``timeout`` left the benchmark running,
orphaned, at full CPU. This runs asv in this process after

* making this process a *child subreaper* (Linux ``prctl``): a benchmark process whose parent
  dies is handed to us, not to init;
* turning SIGINT, SIGTERM and SIGHUP into a ``KeyboardInterrupt``, so asv's own clean-up runs;
* printing a progress line every 10 s inside a parametrised benchmark (asv prints nothing
  between a benchmark's name and its table; ``ASV_RUN_PROGRESS=0`` turns this off, ``=N`` sets
  the interval);

and, whatever way asv ends, terminates every process still below us (their whole process
groups: SIGTERM, then SIGKILL after two seconds).

    python scripts/asv_run.py run --config asv.existing.conf.json --quick ...   # any asv command

The scripts ``scripts/asv_local_run.sh``, ``asv_record_local.sh``, ``asv_gpu_run.sh`` and
``asv_regression_check.sh`` run asv through it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process (Linux 3.4+); False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int | None = None) -> list[int]:
    """Process ids whose parent is ``pid`` (default: this process), from /proc."""
    pid = os.getpid() if pid is None else pid
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ")"
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid and fields[0] != b"Z":  # zombies: reaped, not killed
            found.append(int(entry))
    return found


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (default: this process), parents before children."""
    out, todo = [], children(pid)
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children(p))
    return out


def _signal_tree(pids, signo) -> None:
    """``signo`` to each process and, where it leads a group other than ours, to its whole group."""
    for p in pids:
        try:
            group = os.getpgid(p)
            if group != os.getpgrp():
                os.killpg(group, signo)  # the benchmark and whatever it started in its group
            os.kill(p, signo)
        except OSError:
            pass  # already gone


def reap(grace: float = 2.0) -> list[int]:
    """Terminate every process below this one (SIGTERM, then SIGKILL after ``grace`` s); the ids."""
    left = descendants()
    if not left:
        return []
    _signal_tree(left, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _wait_any()
        if not descendants():
            return left
        time.sleep(0.05)
    _signal_tree(descendants(), signal.SIGKILL)
    for _ in range(40):
        _wait_any()
        if not descendants():
            break
        time.sleep(0.05)
    return left


def _wait_any() -> None:
    """Collect exited children (ours and the orphans handed to us), so they leave the table."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def show_progress(every: float = 10.0) -> None:
    """A line every ``every`` seconds while asv works through a parametrised benchmark.

    asv prints a benchmark's name when it starts and its table when every parameter combination
    is done, nothing in between: minutes of silence for the cliff suite's cells. This wraps asv's
    runner of one combination (each is its own process) to print how far it is.
    """
    import itertools

    from asv import runner

    original = runner._run_benchmark_single_param
    state = {"name": None, "done": 0, "last": 0.0, "start": 0.0}

    def run_one(benchmark, spawner, param_idx, **kwargs):
        now = time.monotonic()
        if state["name"] != benchmark["name"]:
            state.update(name=benchmark["name"], done=0, last=now, start=now)
        result = original(benchmark, spawner, param_idx, **kwargs)
        state["done"] += 1
        now = time.monotonic()
        if now - state["last"] >= every:
            state["last"] = now
            total = len(list(itertools.product(*benchmark["params"]))) if benchmark["params"] else 1
            params = ", ".join(list(itertools.product(*benchmark["params"]))[param_idx]) if benchmark["params"] else ""
            print(
                f"\n    asv_run: {benchmark['name']}: {state['done']} combinations run in "
                f"{now - state['start']:.0f} s, now at #{param_idx + 1} of {total} ({params})",
                flush=True,
            )
        return result

    runner._run_benchmark_single_param = run_one


def _interrupt(signo, frame):
    raise KeyboardInterrupt(f"signal {signo}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    become_subreaper()
    # SIGINT too: a shell starts background jobs with it ignored, and Python keeps that
    for signo in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signo, _interrupt)
    from asv.main import main as asv_main

    if os.environ.get("ASV_RUN_PROGRESS", "10") != "0":
        show_progress(float(os.environ.get("ASV_RUN_PROGRESS", "10")))
    sys.argv = ["asv", *argv]
    status = 0
    try:
        status = asv_main() or 0
    except KeyboardInterrupt:
        print("\nasv_run: interrupted; stopping the benchmark processes", file=sys.stderr, flush=True)
        status = 130
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        for signo in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signo, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        stopped = reap()
        if stopped:
            print(f"asv_run: stopped {len(stopped)} leftover process(es): {stopped}", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
