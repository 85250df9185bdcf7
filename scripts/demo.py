#!/usr/bin/env python3
"""The rwkvd demo: shows each part of the service that exists so far on a model."""
import argparse
import subprocess
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", required=True)
    ap.add_argument("model", nargs="?")
    args = ap.parse_args()
    rwkvd = Path(args.build) / "tools" / "rwkvd"
    if args.model is None:
        print("demo: no model given; synthesising a random-weight model is not implemented yet")
        return 0
    subprocess.run([str(rwkvd), "inspect", args.model], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
