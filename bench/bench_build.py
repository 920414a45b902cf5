"""Cold (empty cache) vs warm (unchanged, cached) ``gen-repo build`` of the example manifest.

Both in-process (``generator.building.pipeline.build_repository``) and through the CLI (``gen-repo build`` in a
subprocess, so interpreter start-up and imports count). Every cold run gets a fresh cache folder and output folder;
every warm run rebuilds the same output from the cache a cold run filled. Prints per-mode medians and spread (min..max)
over the repetitions, and the cold/warm ratio last.

    python bench/bench_build.py [--repeat 3] [--target python]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "examples" / "gen-repo.yaml"


def _in_process(output: Path, cache: Path, target: str) -> float:
    from generator.building.pipeline import BuildOptions, build_repository

    started = time.perf_counter()
    report = build_repository(MANIFEST, BuildOptions(allow_code=True, target=target, cache_dir=cache), output)
    elapsed = time.perf_counter() - started
    assert report.ok, report.to_dict()
    return elapsed


def _gen_repo() -> str:
    """The ``gen-repo`` console script of this interpreter's environment."""
    beside = Path(sys.executable).parent / "gen-repo"
    return str(beside) if beside.is_file() else (shutil.which("gen-repo") or "gen-repo")


def _cli(output: Path, cache: Path, target: str) -> float:
    command = [_gen_repo(), "build", str(MANIFEST), "-o", str(output), "--target", target,
               "--allow-code", "--cache-dir", str(cache), "--plain"]
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _summary(label: str, values: list[float]) -> str:
    return (f"{label:<22} median {statistics.median(values):7.3f} s   spread {min(values):7.3f}..{max(values):7.3f} s"
            f"   (n={len(values)})")


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default="python", choices=["python", "onnx"])
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        base = Path(tmp)
        # Warm the process once (torch/onnx imports) so in-process cold runs measure building, not first imports.
        _in_process(base / "warmup-out", base / "warmup-cache", args.target)
        for mode, run in (("in-process", _in_process), ("cli", _cli)):
            for i in range(args.repeat):
                output, cache = base / f"{mode}-{i}" / "model_repository", base / f"{mode}-{i}" / "cache"
                results.setdefault(f"{mode} cold", []).append(run(output, cache, args.target))
                results.setdefault(f"{mode} warm", []).append(run(output, cache, args.target))
    print(f"gen-repo build {MANIFEST.relative_to(ROOT)} --target {args.target} ({args.repeat} repetitions)")
    for label, values in results.items():
        print(_summary(label, values))
    for mode in ("in-process", "cli"):
        ratio = statistics.median(results[f"{mode} cold"]) / statistics.median(results[f"{mode} warm"])
        print(f"ratio cold/warm ({mode}): {ratio:.1f}x")


if __name__ == "__main__":
    main()
