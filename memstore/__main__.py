"""`python -m memstore`: the command line, for when the console script is not on PATH."""

from memstore.cli import main

main()
