"""The core: diagnostics, the rule catalogue, options and configuration, libcst helpers, the rule base."""
