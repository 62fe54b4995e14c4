"""What a run prints and writes: reports, output formats, baselines, rule documentation."""
