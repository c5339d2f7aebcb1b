#!/usr/bin/python3
"""Checks an SDK's headers against the server version's own compiled code: the classes the
plugin uses must have the same data members at the same offsets and the same virtual methods in
the same order (the vtable the server calls through) as in that version's libmariadbd.a, whose
objects carry DWARF (Debian's 10.11.19 build does; 10.11.18's is stripped).

The struct probe (probe.sh) compares two header sets with each other; this compares headers with
the binary, which is what catches a source package of another version: 10.11.18's sql/item.h
lacks the virtual Item::unmark_as_eliminated_processor() that 10.11.19 added.

  tools/struct-probe/abi-check.py SDK_DIR [LIBMARIADBD_A]
Both sides are compiled as the embedded library is (-DEMBEDDED_LIBRARY), so a difference is one of
the sources, not of the build. Exit status 0: same; 1: differences (listed); 2: cannot check.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tools" / "struct-probe" / "struct_probe.cc"
# class -> the libmariadbd.a members that define it (its full DWARF is where its key function is).
CLASSES = {
    "Item": ["item.cc.o"], "Item_func": ["item_func.cc.o"], "Item_int_func": ["item_func.cc.o"],
    "Item_str_func": ["item_strfunc.cc.o", "item_func.cc.o"], "Item_args": ["item.cc.o", "item_func.cc.o"],
    "Field": ["field.cc.o"], "Field_blob": ["field.cc.o"], "Field_varstring": ["field.cc.o"],
    "handler": ["handler.cc.o"], "handlerton": ["handler.cc.o"], "Handler_share": ["handler.cc.o"],
    "THD": ["sql_class.cc.o"], "Security_context": ["sql_class.cc.o"], "system_variables": ["sql_class.cc.o"],
    "TABLE": ["table.cc.o"], "TABLE_SHARE": ["table.cc.o"], "TABLE_LIST": ["table.cc.o"], "KEY": ["table.cc.o"],
    "LEX": ["sql_lex.cc.o"], "MDL_request": ["mdl.cc.o"], "MDL_context": ["mdl.cc.o"],
    "String": ["sql_string.cc.o"], "Diagnostics_area": ["sql_error.cc.o"],
    "HA_CREATE_INFO": ["sql_table.cc.o", "handler.cc.o"], "Create_native_func": ["item_create.cc.o"],
}


def gdb(obj, *commands):
    args = ["gdb", "-nx", "-batch"] + [a for c in commands for a in ("-ex", c)] + [str(obj)]
    return subprocess.run(args, capture_output=True, text=True, timeout=600).stdout


def member_key(line):
    """'/*  6148 |  4 */  <type> ssl;' -> '6148 4 ssl': what the ABI depends on, not how gdb
    spells the type."""
    m = re.match(r"/\*\s*(\d+)(?::\s*\d+)?\s*\|\s*(\d+)\s*\*/.*?(\w+)(\[\d+\])*;\s*$", line.strip())
    if m:
        return f"{m.group(1)} {m.group(2)} {m.group(3)}"
    m = re.search(r"total size \(bytes\):\s*(\d+)", line)
    return f"size {m.group(1)}" if m else None


def virtual_key(line):
    """'virtual Field::Copy_func * get_copy_func(const Field *) const;' -> 'get_copy_func/1 const':
    a vtable slot is a name, its overload (argument count) and constness."""
    m = re.search(r"(~?\w+)\((.*)\)\s*(const)?", line)
    if not m:
        return line.strip()
    args = m.group(2).strip()
    n = 0 if args in ("", "void") else args.count(",") + 1
    return f"{m.group(1)}/{n}" + (" const" if m.group(3) else "")


def layout(obj, cls):
    """(data member lines with offsets, virtual method lines in order), or None if obj has no
    complete definition of cls."""
    out = gdb(obj, f"ptype /o {cls}", "echo @@SPLIT@@\\n", f"ptype {cls}")
    offsets, _, methods = out.partition("@@SPLIT@@")
    if "total size" not in offsets or "type = " not in offsets or "incomplete type" in offsets.splitlines()[0]:
        return None
    # Top-level members only (nested types are expanded where the object defines them, declared
    # where it does not) and the class's own total size.
    lines = offsets.splitlines()
    top = [line for line in lines if re.match(r"/\*[^*]*\*/ {4}\S", line)]
    total = [line for line in lines if "total size" in line][-1:]
    members = [k for k in map(member_key, top + total) if k]
    virtuals = [virtual_key(line) for line in methods.splitlines() if "virtual " in line]
    return members, virtuals


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    sdk = Path(sys.argv[1])
    lib = Path(sys.argv[2]) if len(sys.argv) > 2 else sdk / "devroot/usr/lib/x86_64-linux-gnu/libmariadbd.a"
    if shutil.which("gdb") is None:
        print("abi-check: gdb is missing (apt-get install gdb)")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="q4m-abi-"))
    try:
        flags = subprocess.run(["make", "-s", "--no-print-directory", "plugin-cxxflags", "MARIADB_VERSION=probe",
                                f"SDK={sdk}"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
        probe = tmp / "probe.o"
        subprocess.run(["g++", *flags, "-DEMBEDDED_LIBRARY", "-Wno-invalid-offsetof", "-femit-class-debug-always",
                        "-fno-eliminate-unused-debug-types", "-c", str(PROBE), "-o", str(probe)], check=True)
        members = sorted({m for objs in CLASSES.values() for m in objs})
        subprocess.run(["ar", "x", str(lib.resolve()), *members], cwd=tmp, check=True)
        if not any("debug_info" in line for line in subprocess.run(
                ["readelf", "-S", str(tmp / "item.cc.o")], capture_output=True, text=True).stdout.splitlines()):
            print(f"abi-check: {lib} has no debug information: cannot check against it")
            return 2
        differ, unchecked = [], []
        for cls, objs in CLASSES.items():
            ours = layout(probe, cls)
            theirs = next((x for x in (layout(tmp / o, cls) for o in objs) if x), None)
            if ours is None or theirs is None:
                unchecked.append(cls)
                continue
            for what, a, b in (("members", ours[0], theirs[0]), ("virtual methods", ours[1], theirs[1])):
                if a != b:
                    import difflib
                    diff = [d for d in difflib.unified_diff(a, b, "headers", "server", n=1, lineterm="")]
                    differ.append(f"{cls}: {what} differ\n" + "\n".join(diff[:80]))
            print(f"{cls}: {len(ours[0])} member lines, {len(ours[1])} virtual methods: "
                  + ("DIFFER" if any(d.startswith(cls + ":") for d in differ) else "same"))
        for d in differ:
            print(d)
        if unchecked:
            print("not checked (no complete definition found): " + ", ".join(unchecked))
        return 1 if differ else 0
    finally:
        if not os.environ.get("Q4M_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
