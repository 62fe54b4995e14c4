"""A project's callables with a parameter named like a device (a project fact): their calls in
other files pass a device there (lingua's `GPUMemoryMonitor("cuda")`, LatentSync's
`VideoProcessor(resolution, f"cuda:{device_id}")` whose default is "cpu", NPU104)."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import cli, write

from cuda2npu.analysis.device_parameters import device_keywords, device_parameters

MONITOR = '''
import torch


class GPUMemoryMonitor:
    """Memory of one device."""

    def __init__(self, device: str = "cuda:0"):
        self.device = torch.device(device)
        self.name = torch.cuda.get_device_name(self.device)
'''

CLIP = (
    b'class Clip:\n    def __init__(self, size: Tuple[int, int] = None, sep=",", device: str = "cpu"):\n        pass\n'
)


def test_the_fact_reads_device_parameters_of_functions_and_constructors():
    texts = {
        Path("a.py"): MONITOR.encode(),
        Path("b.py"): b'def move(x, target_device="cuda"):\n    pass\n\n\ndef scale(x, device=None):\n    pass\n',
        Path("c.py"): b'class Twice:\n    def __init__(self, device="cuda"):\n        pass\n',
        Path("d.py"): b'class Twice:\n    def __init__(self, n, device="cuda"):\n        pass\n',
        Path("e.py"): b'def keyword_only(x, *, device="cuda"):\n    pass\n',
        Path("f.py"): CLIP,
        Path("g.py"): b"def place(a, /, b, src_device, dst_device):\n    pass\n",
        Path("h.py"): b'def label(impl="cuda"):\n    pass\n',
    }
    assert device_parameters(texts) == (
        ("Clip", 2, "device"),
        ("GPUMemoryMonitor", 0, "device"),
        ("move", 1, "target_device"),
        ("place", 2, "src_device"),
        ("place", 3, "dst_device"),
        ("scale", 1, "device"),
    )


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


def test_a_callable_imported_in_a_function_passes_its_device_too(tmp_path):
    """FlexLLMGen's ``ExecutionEnv.create`` imports ``TorchDevice`` in the method (a circular import
    otherwise): ``TorchDevice("cuda:0")`` there is the same device as at module level (round 27)."""
    write(tmp_path / "pkg" / "__init__.py", "")
    write(
        tmp_path / "pkg" / "backend.py",
        "import torch\n\n\nclass TorchDevice:\n    def __init__(self, name):\n        self.dev = torch.device(name)\n",
    )
    utils = write(
        tmp_path / "pkg" / "utils.py",
        "class ExecutionEnv:\n    @classmethod\n    def create(cls):\n"
        "        from pkg.backend import TorchDevice\n\n"
        '        return TorchDevice("cuda:0"), TorchDevice("cpu")\n',
    )
    cli("migrate", tmp_path)
    assert 'TorchDevice("npu:0"), TorchDevice("cpu")' in utils.read_text()


def test_a_positional_device_after_another_argument_whatever_the_default(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(
        tmp_path / "pkg" / "frames.py",
        "import torch\n\n\nclass FrameScaler:\n"
        '    def __init__(self, size: int = 512, device: str = "cpu"):\n'
        "        self.grid = torch.zeros(size, device=device)\n",
    )
    job = write(
        tmp_path / "job.py",
        "from pkg.frames import FrameScaler\n\n\ndef work(rank, size):\n"
        '    one = FrameScaler(size, f"cuda:{rank}")\n    two = FrameScaler(size, "cuda")\n'
        '    three = FrameScaler("cuda")\n    return one, two, three\n',
    )
    cli("migrate", tmp_path)
    text = job.read_text()
    assert 'FrameScaler(size, f"npu:{rank}")' in text and 'FrameScaler(size, "npu")' in text
    assert 'FrameScaler("cuda")' in text  # the size position: not a device


PIPELINE = """
import torch


class ImagePipeline:
    def __call__(
        self,
        prompt: str,
        # Randomness
        seed: int = None,
        rand_device: str = "cpu",
        size=(1024, 1024),
    ):
        generator = torch.Generator(rand_device).manual_seed(seed)
        return torch.randn(size, generator=generator, device=rand_device)
"""


def test_the_fact_reads_keyword_names_of_device_parameters_with_a_device_default():
    texts = {
        Path("pipe.py"): PIPELINE.encode(),
        Path("b.py"): b"async def load(path, *, map_device: str = 'cuda:0', cache_device=None):\n    pass\n",
        Path("c.py"): b'def place(x, device="cuda", device_map="auto", target_device_name="cuda"):\n    pass\n',
        Path("d.py"): b'def put(x, home_device=torch.device("cuda:0"), other_device=torch.device(name)):\n    pass\n',
        Path("cache.py"): (
            b"@dataclass\nclass TensorCache:\n    data: list = field(default_factory=list)\n"
            b'    orig_device: torch.device | str = torch.device("cpu")\n    spare_device: str = "cpu"  # kept\n'
            b'    device_name: str = "cpu"\n    last_device: str = None\n'
        ),
    }
    # `device` is a device keyword anyway; `cache_device` and `last_device` have no device default;
    # `device_map` is no device string; `target_device_name` is not named like a device;
    # `other_device`'s `torch.device(name)` names no device
    expected = ("device_name", "home_device", "map_device", "orig_device", "rand_device", "spare_device")
    assert device_keywords(texts) == expected


def test_a_device_keyword_of_a_method_called_through_an_instance(tmp_path):
    write(tmp_path / "pipelines" / "__init__.py", "")
    write(tmp_path / "pipelines" / "image.py", PIPELINE)
    example = write(
        tmp_path / "examples" / "generate.py",
        "from pipelines.image import ImagePipeline\n\npipe = ImagePipeline()\n"
        'image = pipe("a cat", seed=0, rand_device="cuda")\n'
        'other = load_offloaded("model", offload_device="cuda")\n',
    )
    cli("migrate", tmp_path)
    text = example.read_text()
    assert 'pipe("a cat", seed=0, rand_device="npu")' in text
    assert 'offload_device="cuda"' in text  # no function of the project takes it: not known to be a device


STREAM = """
import torch


def generate_stream(
    model, tokenizer, params, device, context_len=8192, stream_interval=2, force_generate=False
):
    input_ids = tokenizer(params["prompt"]).input_ids
    out = model(torch.as_tensor([input_ids], device=device), use_cache=True)
    if device == "mps":
        out = out.cpu()
    return out
"""


def test_the_fact_reads_what_the_body_does_with_a_parameter():
    texts = {
        Path("utils.py"): STREAM.encode(),  # ToolBench's: no default, passed as `device=`
        Path("frames.py"): b'def resize(image, size=(512, 512), device="cpu"):\n    return image.to(device)\n',
        Path("io.py"): b"async def fetch(url, device):\n    return torch.load(url, map_location=device)\n",
        Path("batch.py"): b"def move(batch, dev, dtype):\n    return batch.to(dev).to(dtype)\n",
        Path("ranks.py"): b'def place(x, device, rank):\n    return x.to(f"{device}:{rank}")\n',
        # near misses: a device-named parameter only used as a label (a key, a log argument, a
        # formatted file name); one otherwise named that the body also tests against a string
        Path("labels.py"): (
            b"def record(table, device, ms):\n    table[device] = ms\n\n\n"
            b'def log_env(step, device):\n    """The device: a label."""\n    print("step", step, "on", device)\n\n\n'
            b'def out_path(root, device):\n    return f"{root}/bench_{device}.json"\n\n\n'
            b'def kernel(x, backend):\n    if backend == "cuda":\n        return x\n    return x.to(backend)\n'
        ),
    }
    assert device_parameters(texts) == (
        ("fetch", 1, "device"),
        ("generate_stream", 3, "device"),
        ("move", 1, "dev"),
        ("place", 1, "device"),
        ("resize", 2, "device"),
    )


def test_a_positional_device_through_an_alias_or_a_relative_import(tmp_path):
    """ToolBench's ``generate_stream_func = generate_stream`` … ``generate_stream_func(self.model,
    self.tokenizer, gen_params, "cuda", ...)`` in another module than the function's."""
    write(tmp_path / "toolbench" / "__init__.py", "")
    write(tmp_path / "toolbench" / "utils.py", STREAM)
    write(tmp_path / "toolbench" / "labels.py", "def record(table, device, ms):\n    table[device] = ms\n")
    model = write(
        tmp_path / "toolbench" / "model.py",
        "from toolbench.utils import generate_stream\nfrom toolbench.labels import record\n"
        "from fastchat.serve.inference import generate\n\n\nclass ToolLLaMA:\n"
        "    def prediction(self, gen_params, table):\n"
        "        generate_stream_func = generate_stream\n"
        '        output = generate_stream_func(self.model, self.tokenizer, gen_params, "cuda", 4096, force_generate=True)\n'
        '        other = generate_stream(self.model, self.tokenizer, gen_params, device="cuda:0")\n'
        '        record(table, "cuda", 1.0)\n'
        '        third = generate(self.model, self.tokenizer, gen_params, "cuda")\n'
        '        fourth = generate_stream(self.model, "cuda", gen_params, "cpu")\n'
        "        return output, other, third, fourth\n",
    )
    relative = write(
        tmp_path / "toolbench" / "serve.py",
        'from .utils import generate_stream\n\n\ndef serve(m, t, p):\n    return generate_stream(m, t, p, "cuda")\n',
    )
    cli("migrate", tmp_path)
    text = model.read_text()
    assert 'generate_stream_func(self.model, self.tokenizer, gen_params, "npu", 4096, force_generate=True)' in text
    assert 'device="npu:0"' in text
    assert 'record(table, "cuda", 1.0)' in text  # `device` there is a key: a label
    assert 'generate(self.model, self.tokenizer, gen_params, "cuda")' in text  # no project function
    assert 'generate_stream(self.model, "cuda", gen_params, "cpu")' in text  # the tokenizer's position
    assert 'generate_stream(m, t, p, "npu")' in relative.read_text()


def test_a_device_field_of_a_dataclass_passed_by_keyword(tmp_path):
    """lmquant (round 31): ``TensorCache(..., orig_device="cuda")`` where ``data/cache.py`` declares the
    dataclass field ``orig_device: torch.device | str = torch.device("cpu")``, later ``.to(orig_device)``."""
    write(
        tmp_path / "data" / "cache.py",
        "from dataclasses import dataclass, field\n\nimport torch\n\n\n@dataclass\nclass TensorCache:\n"
        '    data: list = field(default_factory=list)\n    orig_device: torch.device | str = torch.device("cpu")\n',
    )
    example = write(
        tmp_path / "quant" / "reorder.py",
        "from data.cache import TensorCache\n\n\ndef cache(xs):\n"
        '    return TensorCache(xs, orig_device="cuda"), TensorCache(xs, label="cuda")\n',
    )
    cli("migrate", tmp_path)
    text = example.read_text()
    assert 'TensorCache(xs, orig_device="npu")' in text
    assert 'TensorCache(xs, label="cuda")' in text


def test_a_device_parameter_of_a_classmethod_called_on_its_class(tmp_path):
    """vllm-ltr (round 31): `LoRAModel.from_lora_tensors(1, 8, 16, tensors, "cuda", ...)` in a test, where
    `vllm/lora/models.py` defines the classmethod with a `device: str` parameter it moves tensors to."""
    write(tmp_path / "lora" / "__init__.py", "")
    write(
        tmp_path / "lora" / "models.py",
        "import torch\n\n\nclass LoRAModel:\n    def __init__(self, rank):\n        self.rank = rank\n\n"
        "    @classmethod\n    def from_lora_tensors(cls, lora_id, rank, alpha, tensors, device, dtype=None):\n"
        "        return cls(rank), {k: t.to(device) for k, t in tensors.items()}\n",
    )
    test = write(
        tmp_path / "tests" / "test_lora.py",
        "from lora.models import LoRAModel\n\n\ndef test_from_tensors(tensors):\n"
        '    model = LoRAModel.from_lora_tensors(1, 8, 16, tensors, "cuda", dtype=None)\n'
        '    other = LoRAModel(8).from_lora_tensors(1, 8, 16, tensors, "cuda")\n',
    )
    texts = {path: path.read_bytes() for path in tmp_path.rglob("*.py")}
    assert ("LoRAModel.from_lora_tensors", 4, "device") in device_parameters(texts)
    cli("migrate", tmp_path)
    text = test.read_text()
    assert 'LoRAModel.from_lora_tensors(1, 8, 16, tensors, "npu", dtype=None)' in text
    assert 'LoRAModel(8).from_lora_tensors(1, 8, 16, tensors, "cuda")' in text  # through an instance: not followed


def test_a_device_parameter_of_a_function_called_through_its_module(tmp_path):
    """SpinQuant (round 33): `gptq_utils.rtn_fwrd(model, "cuda", args)` after `from eval_utils import
    gptq_utils`, where `eval_utils/gptq_utils.py` defines `rtn_fwrd(model, dev, args)` moving layers to
    `dev`; a library module's function of the same name is not the project's."""
    write(tmp_path / "eval_utils" / "__init__.py", "")
    write(
        tmp_path / "eval_utils" / "gptq_utils.py",
        "import torch\n\n\ndef rtn_fwrd(model, dev, args):\n    return model.to(dev)\n",
    )
    main = write(
        tmp_path / "eval_utils" / "main.py",
        "import numpy as np\n\nfrom eval_utils import gptq_utils\n\n\ndef ptq(model, args):\n"
        '    quantized = gptq_utils.rtn_fwrd(model, "cuda", args)\n    np.rtn_fwrd(model, "cuda", args)\n'
        "    return quantized\n",
    )
    cli("migrate", tmp_path)
    text = main.read_text()
    assert 'gptq_utils.rtn_fwrd(model, "npu", args)' in text and 'np.rtn_fwrd(model, "cuda", args)' in text


def test_a_device_parameter_of_a_function_called_through_a_module_of_a_directory_without_init(tmp_path):
    """GuidedQuant (round 34): `spin_quant/train_utils/` has no `__init__.py`; `main.py` there runs
    `from train_utils import rtn_utils` (from `spin_quant/`) and `rtn_utils.rtn_fwrd(model, "cuda", args)`."""
    write(
        tmp_path / "spin_quant" / "train_utils" / "rtn_utils.py",
        "import torch\n\n\ndef rtn_fwrd(model, dev, args):\n    return model.to(dev)\n",
    )
    main = write(
        tmp_path / "spin_quant" / "train_utils" / "main.py",
        "import torch\n\nfrom train_utils import rtn_utils\n\n\ndef train(model, args):\n"
        '    return rtn_utils.rtn_fwrd(model, "cuda", args)\n',
    )
    write(tmp_path / "spin_quant" / "ptq.py", "import torch\n")
    cli("migrate", tmp_path)
    assert 'rtn_utils.rtn_fwrd(model, "npu", args)' in main.read_text()
