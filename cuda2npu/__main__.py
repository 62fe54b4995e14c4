"""Entry point for ``python -m cuda2npu``."""

from cuda2npu.commands.cli import main

if __name__ == "__main__":
    main()
