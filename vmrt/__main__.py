"""`python -m vmrt`: the `vmrt` command."""

import sys

from vmrt.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
