"""``gen-repo diff`` and ``gen-repo report`` at release scale: 1,000, 3,000 and 10,000 inputs, renamed, process start
included, and how their time grows with the inputs.

    python bench/bench_release_scale.py [--sizes 1000 3000 10000] [--repeats 3] [--shapes one-model many-models]
                                        [--checkout DIR] [--only diff|report]

The repositories are synthesised from a real one: ``gen-repo config examples/gen-repo.yaml`` writes the example
models' config.pbtxt and gen_repo/contract.json; the text model's first input (INT64, ``[-1]``, its profile and value
range) is then repeated to the size:

- ``one-model``: the text model with N inputs (``input_<i>`` in the old repository, ``renamed_<i>`` in the new one:
  N renames for diff to find), beside the example's mlp;
- ``many-models``: N inputs over N/100 copies of the text model (``text_<j>``), 100 inputs each, renamed likewise.

Timed in fresh processes (the console script's entry on ``--checkout``, default this one), alternating: ``gen-repo
diff OLD NEW --json`` (exit 1: every rename is breaking) and ``gen-repo report OLD -o page.html``. The same commands
on the unscaled example repository are the fixed cost (interpreter, imports, the two small models); the last lines
give what each size adds over it, per 1,000 inputs (constant when the cost is linear) and as a multiple of what the
smallest size adds (linear: 3.0x from 1,000 to 3,000 inputs, 10.0x from 1,000 to 10,000).
Every timing is repeated; the table shows the median and the min..max spread, with the machine's load before and
after.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_cli import alternate, machine_state, row  # noqa: E402

#: Inputs per model in the many-models shape.
PER_MODEL = 100
#: The example input repeated, and the example model it belongs to.
MODEL = "text"
_INPUT_BLOCK = re.compile(r'input \{\n  name: "[^"]*"\n.*?\n\}\n', re.DOTALL)


def gen_repo(checkout: Path) -> list[str]:
    """What the ``gen-repo`` console script runs, on ``checkout``."""
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(checkout)!r}); from generator.cli import main; "
            "sys.exit(main(prog_name='gen-repo'))"]


def example_repository(folder: Path) -> Path:
    """The example models' configs and contracts, as ``gen-repo config`` writes them (no weights needed)."""
    out = folder / "example"
    done = subprocess.run([*gen_repo(REPO), "config", str(REPO / "examples" / "gen-repo.yaml"), "-o", str(out)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"gen-repo config failed: {done.stderr[-2000:]}")
    return out


def _scaled_model(source: Path, target: Path, name: str, inputs: list[str]) -> None:
    """``source`` (the example text model) copied to ``target`` as model ``name`` with these inputs, each a copy of
    its first input, in config.pbtxt and contract.json alike."""
    shutil.copytree(source, target)
    contract_path = target / "1" / "gen_repo" / "contract.json"
    contract = json.loads(contract_path.read_text(encoding="utf-8"))
    first = contract["inputs"][0]
    contract.update(model=name, inputs=[{**first, "name": input_name} for input_name in inputs])
    contract_path.write_text(json.dumps(contract, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    config_path = target / "config.pbtxt"
    config = config_path.read_text(encoding="utf-8")
    block = _INPUT_BLOCK.search(config)
    assert block is not None, "the example config has no input block"
    repeated = "".join(block[0].replace(f'"{first["name"]}"', json.dumps(n), 1) for n in inputs)
    config = _INPUT_BLOCK.sub("", config).replace("output {", repeated + "output {", 1)
    config_path.write_text(config.replace(f'name: "{MODEL}"', f'name: "{name}"', 1), encoding="utf-8")


def scaled_repository(example: Path, out: Path, shape: str, size: int, prefix: str) -> Path:
    """``example`` with ``size`` inputs named ``<prefix><i>``, in one model or over ``size // PER_MODEL`` models."""
    shutil.copytree(example, out, ignore=shutil.ignore_patterns(MODEL))
    if shape == "one-model":
        _scaled_model(example / MODEL, out / MODEL, MODEL, [f"{prefix}{i}" for i in range(size)])
    else:
        for j in range(size // PER_MODEL):
            _scaled_model(example / MODEL, out / f"{MODEL}_{j}", f"{MODEL}_{j}",
                          [f"{prefix}{i}" for i in range(PER_MODEL)])
    return out


def timed(command: list[str], accept: tuple[int, ...]) -> float:
    """Wall time of one process, start to exit; its exit status must be one of ``accept``."""
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in accept:
        raise SystemExit(f"{' '.join(command[-4:])} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", choices=["one-model", "many-models"],
                        default=["one-model", "many-models"])
    parser.add_argument("--checkout", type=Path, default=REPO, help="the gen-repo checkout to time (default: this)")
    parser.add_argument("--only", choices=["diff", "report"], default=None)
    args = parser.parse_args()
    command = gen_repo(args.checkout.resolve())
    print(f"checkout {args.checkout}; machine before: {machine_state()}")
    with tempfile.TemporaryDirectory(prefix="bench-release-") as tmp:
        folder = Path(tmp)
        example = example_repository(folder)
        medians: dict[tuple[str, str, int], float] = {}
        for shape in args.shapes:
            sides = {0: (example, example)}
            for size in args.sizes:
                sides[size] = (scaled_repository(example, folder / f"{shape}-{size}-old", shape, size, "input_"),
                               scaled_repository(example, folder / f"{shape}-{size}-new", shape, size, "renamed_"))
            runs = {}
            for size, (old, new) in sides.items():
                label = f"{shape} {size} inputs" if size else f"{shape} fixed cost (the example)"
                if args.only in (None, "diff"):
                    runs[f"diff {label}"] = (lambda o=old, n=new: timed(
                        [*command, "diff", str(o), str(n), "--json"], (0, 1)))
                if args.only in (None, "report"):
                    runs[f"report {label}"] = (lambda o=old, s=size: timed(
                        [*command, "report", str(o), "-o", str(folder / f"page-{s}.html")], (0,)))
            times = alternate(runs, args.repeats)
            print(f"\n{shape}: seconds, fresh process per run (median, min..max)")
            for name, values in times.items():
                print(row(name, values))
            for name, values in times.items():
                size = int(name.split()[2]) if name.split()[2].isdigit() else 0
                medians[(shape, name.split()[0], size)] = statistics.median(values)
        print()
        for (shape, what, size), seconds in sorted(medians.items()):
            base, first = medians.get((shape, what, 0)), medians.get((shape, what, args.sizes[0]))
            if size == 0 or base is None or first is None:
                continue
            line = f"{shape} {what}: {size} inputs add {seconds - base:.2f} s over the fixed cost, " \
                   f"{(seconds - base) / size * 1000:.3f} s per 1,000 inputs"
            if size != args.sizes[0] and first > base:
                line += f"; {(seconds - base) / (first - base):.1f}x what {args.sizes[0]} add (linear: " \
                        f"{size / args.sizes[0]:.1f}x)"
            print(line)
    print(f"machine after: {machine_state()}")


if __name__ == "__main__":
    main()
