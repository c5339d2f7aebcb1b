#!/usr/bin/python3
"""Renders a q4m-bench --json-out file as Markdown tables: per sync mode, the two ceilings
(SELECT 1, and the consume statement on an empty queue) if the run measured them, then per
scenario QUEUE msg/s, InnoDB msg/s, their ratio, and QUEUE against both ceilings.
Usage: tools/bench/to_markdown.py results.json"""
import json
import sys


def rate(r):
    return f"{r['rate']:,.0f}" if r and r.get("rate") is not None else "–"


def share(a, b, fmt="{:.2f}"):
    return fmt.format(a["rate"] / b["rate"]) if a and b and b["rate"] else "–"


def print_ceilings(find, concs, sync):
    rows = [(c, find.get(("select1", "server", sync, c)), find.get(("poll-empty", "server", sync, c)))
            for c in concs]
    rows = [row for row in rows if row[1] or row[2]]
    if not rows:  # e.g. --scenarios multireader
        return
    print(f"**ceilings, sync={sync}**\n")
    print("| conc | SELECT 1 q/s | empty-queue poll q/s | poll/SELECT 1 |")
    print("|---:|---:|---:|---:|")
    for c, s1, poll in rows:
        print(f"| {c} | {rate(s1)} | {rate(poll)} | {share(poll, s1)} |")
    print()


def print_scenario(find, concs, sync, scenario):
    # enqueue takes nothing: its latency is that of one multi-row INSERT; the transactional
    # scenarios time whole transactions (outbox as a put, consume-txn as a get)
    timed, label = {"enqueue": ("put", "QUEUE INSERT p50/p99 µs"),
                    "outbox": ("put", "QUEUE transaction p50/p99 µs"),
                    "consume-txn": ("get", "QUEUE transaction p50/p99 µs")}.get(
                        scenario, ("get", "QUEUE get p50/p99 µs"))
    print(f"**{scenario}, sync={sync}**\n")
    print("| conc | QUEUE msg/s | InnoDB msg/s | QUEUE/InnoDB | QUEUE/SELECT 1 | QUEUE/poll |"
          f" {label} | syncs/msg QUEUE / InnoDB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in concs:
        q = find.get((scenario, "queue", sync, c))
        if not q:
            continue
        i = find.get((scenario, "innodb", sync, c))
        s1, poll = find.get(("select1", "server", sync, c)), find.get(("poll-empty", "server", sync, c))
        get = q.get(timed) or {}
        lat = f"{get.get('p50_us', 0):,.0f} / {get.get('p99_us', 0):,.0f}" if get else "–"
        spm = lambda r: f"{r['syncs_per_message']:.3f}" if r and r.get("syncs_per_message") is not None else "–"
        print(f"| {c} | {rate(q)} | {rate(i)} | {share(q, i, '{:.1f}x')} | {share(q, s1)} | {share(q, poll)} "
              f"| {lat} | {spm(q)} / {spm(i)} |")
    print()


def main(path):
    doc = json.load(open(path))
    runs = doc["runs"]
    find = {(r["scenario"], r["engine"], r["sync"], r["concurrency"]): r for r in runs}
    concs = sorted({r["concurrency"] for r in runs})
    syncs = [s for s in ("none", "durable", "durable-inserts") if any(r["sync"] == s for r in runs)]
    scenarios = [s for s in ("multireader", "multirw", "multiwait", "enqueue", "outbox", "consume-txn")
                 if any(r["scenario"] == s for r in runs)]
    m = doc.get("machine", {})
    print(f"Machine: {m.get('cpu_model', '?')} x {m.get('cpus', '?')}, {m.get('uname', '')}; "
          f"server {doc.get('server', {}).get('version', '?')}, binary log {doc.get('server', {}).get('binlog', '?')}; "
          f"{doc['options'].get('protocol', 'text')} protocol; "
          f"{doc['options']['messages']} messages per run, "
          f"{'InnoDB read view held during queue runs, ' if doc['options'].get('hold_read_view') else ''}"
          f"median of {doc['options']['repeat']}; all runs verified: {'yes' if doc.get('ok') else 'NO'}.\n")
    for sync in syncs:
        print_ceilings(find, concs, sync)
        for scenario in scenarios:
            print_scenario(find, concs, sync, scenario)


if __name__ == "__main__":
    main(sys.argv[1])
