#!/usr/bin/env python3
"""The layers of the source tree and what each may include (docs/architecture.md).

Every quoted #include is written from the repository root ("core/table/queue_table.h").
A folder may include itself and the folders listed for it, nothing else; the rule list is
a DAG, so no include cycle between folders is possible. Prints one line per violation and
"N passed, N failed" last (the unit-test summary format); exit status 1 on a violation.
"""
import os
import re
import sys

ALLOWED = {
    "core/util": [],
    "core/row": ["core/util"],
    "core/file": ["core/util", "core/row"],
    "core/policy": ["core/util", "core/row", "core/file"],
    "core/table": ["core/util", "core/row", "core/file", "core/policy"],
    "cond": ["core/util", "core/row"],
    "engine": ["core/util", "core/row", "core/file", "core/policy", "core/table", "cond"],
    "functions": ["core/util", "core/row", "core/file", "core/policy", "core/table", "cond", "engine"],
    "plugin": ["core/table", "core/util", "engine", "functions"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SERVER = re.compile(r'^\s*#\s*include\s+<(my_global|handler|sql_\w+|mysql/\w+|table|field|item\w*)\.h>', re.M)


def layer_of(path):
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if path.startswith(layer + "/"):
            return layer
    return None


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(root)
    checked, problems = 0, []
    for layer in ALLOWED:
        for name in sorted(os.listdir(layer)) if os.path.isdir(layer) else []:
            path = layer + "/" + name
            if not name.endswith((".h", ".cc")):
                continue
            checked += 1
            text = open(path).read()
            for inc in INCLUDE.findall(text):
                target = layer_of(inc)
                if target is None:
                    if os.path.exists(inc) or os.path.exists(os.path.join(layer, inc)):
                        problems.append(f"{path}: includes \"{inc}\": write includes from the repository root")
                    continue  # a header of the server or the system
                if not os.path.exists(inc):
                    problems.append(f"{path}: includes \"{inc}\", which does not exist")
                elif target != layer and target not in ALLOWED[layer]:
                    problems.append(f"{path}: {layer}/ may not include {target}/ (\"{inc}\")")
            if layer.startswith("core/") or layer == "cond":
                for m in SERVER.findall(text):
                    problems.append(f"{path}: the core includes a MariaDB header <{m}.h>")
    for p in problems:
        print(p)
    print(f"{checked - len(problems) if checked >= len(problems) else 0} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
