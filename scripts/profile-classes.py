#!/usr/bin/env python3
"""µs of CPU per message by class, from `perf script -F comm,ip,sym` of a whole-machine
`perf record -a -g -F 999` (scripts/profile-bench.sh). Each sample goes to the first class
below with a function on its stack; one sample = 1/999 s of one CPU.
usage: profile-classes.py STACKS MSG_PER_S SECONDS"""
import collections
import re
import sys

CLASSES = [
    ("the binary log's fsync", ["MYSQL_BIN_LOG::flush_and_sync"]),
    ("the binary log's leader (write, commit order)", ["MYSQL_BIN_LOG::trx_group_commit_leader"]),
    ("the binary log's queue", ["MYSQL_BIN_LOG::write_transaction_to_binlog_events", "MYSQL_BIN_LOG::log_and_order"]),
    ("QUEUE's prepare", ["q4m_engine::(anonymous namespace)::prepare"]),
    ("QUEUE's commit", ["q4m_engine::(anonymous namespace)::commit"]),
    ("the rest of ha_commit_trans (other engines)", ["ha_commit_trans"]),
    ("QUEUE's own fsync", ["fdatasync"]),
    ("queue_wait() (claim, end, removal statement)", ["q4m_functions::(anonymous namespace)::Item_func_queue_wait::run"]),
    ("send to the client", ["__send", "net_flush"]),
    ("read from the client", ["__libc_recv", "vio_read", "my_net_read_packet"]),
    ("parse", ["parse_sql"]),
    ("the rest of the statement", ["mysql_parse", "dispatch_command", "do_command"]),
    ("QUEUE, no statement on the stack", ["q4m::"]),
]


def main():
    path, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    counts = collections.Counter()
    for sample in open(path, errors="replace").read().split("\n\n"):
        lines = [l for l in sample.strip().split("\n") if l.strip()]
        if not lines:
            continue
        comm = lines[0].split()[0]
        frames = {re.sub(r"\+0x[0-9a-f]+$", "", (l.strip().split(None, 1) + ["?"])[1]) for l in lines[1:]}
        if comm == "swapper":
            counts["idle"] += 1
        elif comm == "q4m-bench":
            counts["the bench client"] += 1
        elif comm != "mariadbd":
            counts["other processes (kernel I/O threads)"] += 1
        else:
            name = next((n for n, keys in CLASSES if any(k in frames for k in keys)), "other server frames (futex, malloc)")
            counts[name] += 1
    total = sum(counts.values())
    per_msg = 1e6 / 999 / (rate * seconds)
    for name, n in counts.most_common():
        print(f"{name:48s} {n * per_msg:7.1f} us/msg  ({100 * n / total:4.1f} %)")
    print(f"{'busy':48s} {(total - counts['idle']) * per_msg:7.1f} us/msg")


if __name__ == "__main__":
    main()
