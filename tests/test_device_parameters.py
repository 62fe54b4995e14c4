"""A project's callables whose device parameter defaults to CUDA (a project fact): their calls in
other files pass a device too (lingua's `GPUMemoryMonitor("cuda")`, NPU104)."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import cli, write

from cuda2npu.families.device.device_parameters import device_parameters

MONITOR = '''
import torch


class GPUMemoryMonitor:
    """Memory of one device."""

    def __init__(self, device: str = "cuda:0"):
        self.device = torch.device(device)
        self.name = torch.cuda.get_device_name(self.device)
'''


def test_the_fact_reads_defaults_of_functions_and_constructors():
    texts = {
        Path("a.py"): MONITOR.encode(),
        Path("b.py"): b'def move(x, target_device="cuda"):\n    pass\n\n\ndef scale(x, device=None):\n    pass\n',
        Path("c.py"): b'class Twice:\n    def __init__(self, device="cuda"):\n        pass\n',
        Path("d.py"): b'class Twice:\n    def __init__(self, n, device="cuda"):\n        pass\n',
        Path("e.py"): b'def keyword_only(x, *, device="cuda"):\n    pass\n',
    }
    assert device_parameters(texts) == (("GPUMemoryMonitor", 0, "device"), ("move", 1, "target_device"))


def test_a_call_in_another_file_passes_its_device_like_the_default(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "metrics.py", MONITOR)
    train = write(
        tmp_path / "train.py",
        "from pkg.metrics import GPUMemoryMonitor\n\n"
        'monitor = GPUMemoryMonitor("cuda")\nother = GPUMemoryMonitor(device="cuda:1")\nlabel = str("cuda")\n',
    )
    cli("migrate", tmp_path)
    text = train.read_text()
    assert 'GPUMemoryMonitor("npu")' in text and 'GPUMemoryMonitor(device="npu:1")' in text
    assert 'label = str("cuda")' in text
    assert 'def __init__(self, device: str = "npu:0")' in (tmp_path / "pkg" / "metrics.py").read_text()
