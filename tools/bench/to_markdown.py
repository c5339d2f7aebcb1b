#!/usr/bin/python3
"""Renders a q4m-bench --json-out file as Markdown tables: per sync mode, the two ceilings
(SELECT 1, and the consume statement on an empty queue), then per scenario QUEUE msg/s,
InnoDB msg/s, their ratio, and QUEUE against both ceilings.
Usage: tools/bench/to_markdown.py results.json"""
import json
import sys


def main(path):
    doc = json.load(open(path))
    runs = doc["runs"]
    find = {(r["scenario"], r["engine"], r["sync"], r["concurrency"]): r for r in runs}
    concs = sorted({r["concurrency"] for r in runs})
    syncs = [s for s in ("none", "durable") if any(r["sync"] == s for r in runs)]
    scen = [s for s in ("multireader", "multirw", "multiwait") if any(r["scenario"] == s for r in runs)]
    m = doc.get("machine", {})
    print(f"Machine: {m.get('cpu_model', '?')} x {m.get('cpus', '?')}, {m.get('uname', '')}; "
          f"server {doc.get('server', {}).get('version', '?')}; {doc['options']['messages']} messages per run, "
          f"median of {doc['options']['repeat']}; all runs verified: {'yes' if doc.get('ok') else 'NO'}.\n")
    for sync in syncs:
        print(f"**ceilings, sync={sync}**\n")
        print("| conc | SELECT 1 q/s | empty-queue poll q/s | poll/SELECT 1 |")
        print("|---:|---:|---:|---:|")
        for c in concs:
            s1, poll = find.get(("select1", "server", sync, c)), find.get(("poll-empty", "server", sync, c))
            if not s1 and not poll:
                continue
            cell = lambda r: f"{r['rate']:,.0f}" if r else "–"
            rp = f"{poll['rate'] / s1['rate']:.2f}" if s1 and poll and s1["rate"] else "–"
            print(f"| {c} | {cell(s1)} | {cell(poll)} | {rp} |")
        print()
        for sc in scen:
            print(f"**{sc}, sync={sync}**\n")
            print("| conc | QUEUE msg/s | InnoDB msg/s | QUEUE/InnoDB | QUEUE/SELECT 1 | QUEUE/poll | QUEUE get p50/p99 µs | syncs/msg QUEUE / InnoDB |")
            print("|---:|---:|---:|---:|---:|---:|---:|---:|")
            for c in concs:
                q, i, s1, poll = (find.get((sc, "queue", sync, c)), find.get((sc, "innodb", sync, c)),
                                  find.get(("select1", "server", sync, c)), find.get(("poll-empty", "server", sync, c)))
                if not q:
                    continue
                fmt = lambda r, k="rate": f"{r[k]:,.0f}" if r and r.get(k) is not None else "–"
                ratio = lambda a, b: f"{a['rate'] / b['rate']:.1f}x" if a and b and b["rate"] else "–"
                r1 = f"{q['rate'] / s1['rate']:.2f}" if s1 and s1["rate"] else "–"
                rp = f"{q['rate'] / poll['rate']:.2f}" if poll and poll["rate"] else "–"
                get = q.get("get") or {}
                lat = f"{get.get('p50_us', 0):,.0f} / {get.get('p99_us', 0):,.0f}" if get else "–"
                spm = lambda r: f"{r['syncs_per_message']:.3f}" if r and r.get("syncs_per_message") is not None else "–"
                print(f"| {c} | {fmt(q)} | {fmt(i)} | {ratio(q, i)} | {r1} | {rp} | {lat} | {spm(q)} / {spm(i)} |")
            print()


if __name__ == "__main__":
    main(sys.argv[1])
