"""The held-out architectures (tests/heldout): one manifest built, smoke-tested in a real Triton, ranges checked.

Prints one row per model (served / refused at plan / failed, with the stage and reason), the build seconds, the
smoke checks passed and the stored outputs inside their contract ranges, as a Markdown table; exit 1 when any model
failed. The work (cache, repository) goes to a temporary folder, removed at the end unless ``--keep``.

    python bench/heldout_zoo.py [--models bart qwen2 ...] [--jobs 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.heldout_run import run_heldout, table


def main(argv: list[str] | None = None) -> int:
    """Run the held-out set and print its table; 1 when a model failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None, help="a subset of tests/heldout/gen-repo.yaml")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="build into this new folder and keep it")
    args = parser.parse_args(argv)
    work = args.keep if args.keep is not None else Path(tempfile.mkdtemp(prefix="gen-repo-heldout-"))
    work.mkdir(parents=True, exist_ok=args.keep is None)
    started = time.perf_counter()
    try:
        rows = run_heldout(work, args.models, jobs=args.jobs)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    served = sum(r.outcome == "served" for r in rows)
    refused = sum(r.outcome == "refused at plan" for r in rows)
    print(f"\n{served} served, {refused} refused at plan, {len(rows) - served - refused} failed, of {len(rows)}; "
          f"{time.perf_counter() - started:.0f} s, load average {os.getloadavg()[0]:.1f}")
    return 0 if all(r.outcome != "failed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
