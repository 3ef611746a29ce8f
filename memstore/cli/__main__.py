"""`python -m memstore.cli`, as the `memstore` command."""

from memstore.cli import main

main()
