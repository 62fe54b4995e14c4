"""One module per kind of file: Python sources, notebooks, dependency files, shell scripts."""
