"""Exits 0 when every `name==version` pin of a requirements file is installed in the running
Python's environment, 1 otherwise: the scripts' check that a virtualenv needs no `pip install`.

Usage: VENV/bin/python scripts/pins-installed.py REQUIREMENTS
"""

import importlib.metadata as md
import sys

for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, want = line.partition("==")
    try:
        if md.version(name.strip()) != want.strip():
            sys.exit(1)
    except md.PackageNotFoundError:
        sys.exit(1)
