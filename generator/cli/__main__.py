"""``python -m generator.cli``: the ``gen-repo`` command without the console script (tests, benchmarks, a checkout)."""

from generator.cli import main

main(prog_name="gen-repo")
