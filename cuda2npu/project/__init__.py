"""Running over a project: discovery, the process pool, the result cache, generated companions."""
