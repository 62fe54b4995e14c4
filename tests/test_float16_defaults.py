"""The project fact of files making float16 the default dtype of the models they build (LLaMA-Adapter's
`set_default_tensor_type(torch.cuda.HalfTensor)`, open_clip's `convert_weights_to_fp16`): it counts only
in the files reaching such a file through the project's imports (analysis/float16_models.py)."""

from __future__ import annotations

from cli_helpers import cli, write


def test_float16_weights_built_in_another_file_count_only_where_it_is_reached(tmp_path):
    """VGen (round 44): a vendored open_clip converts the reward model's weights to float16; the training
    entrance that never imports it builds float32 models, so its float16 autocast follows the BF16 policy,
    while the reward module importing open_clip keeps float16 (NPU340)."""
    write(tmp_path / "utils" / "__init__.py", "")
    write(
        tmp_path / "utils" / "open_clip.py", "def build(model):\n    convert_weights_to_fp16(model)\n    return model\n"
    )
    autocast = (
        "\n\ndef step(model, x):\n    with torch.cuda.amp.autocast(dtype=torch.float16):\n        return model(x)\n"
    )
    reward = write(tmp_path / "utils" / "reward.py", "import torch\nfrom utils.open_clip import build\n" + autocast)
    train = write(tmp_path / "train.py", "import torch\n" + autocast)
    cli("migrate", tmp_path)
    assert "NPU340" in reward.read_text() and "torch.float16" in reward.read_text()
    assert "dtype=torch.bfloat16" in train.read_text() and "NPU340" not in train.read_text()


def test_an_autocast_of_the_amp_mode_does_not_meet_the_fp16_modes_weights(tmp_path):
    """AudioLDM's CLAP trainer (round 56): open_clip converts the weights to float16 only where
    `precision == "fp16"`, while the trainer's autocast runs only where `args.precision == "amp"`: that
    autocast follows the BF16 policy; one not gated by the "amp" value keeps float16 (NPU340)."""
    write(tmp_path / "pkg" / "__init__.py", "")
    factory = 'def create(model, precision):\n    if precision == "fp16":\n        convert_weights_to_fp16(model)\n'
    write(tmp_path / "pkg" / "factory.py", factory)
    head = "from contextlib import suppress\n\nimport torch\n\nfrom pkg.factory import create\n\n\n"
    gated = (
        'def step(model, x, args):\n    autocast = torch.cuda.amp.autocast if args.precision == "amp" else suppress\n'
    )
    train = write(tmp_path / "train.py", head + gated + "    with autocast():\n        return model(x)\n")
    branch = 'def step(model, x, args):\n    if args.precision == "amp":\n        with torch.cuda.amp.autocast():\n'
    branched = write(tmp_path / "branched.py", head + branch + "            return model(x)\n")
    plain = write(
        tmp_path / "plain.py",
        head + "def step(model, x):\n    with torch.cuda.amp.autocast():\n        return model(x)\n",
    )
    cli("migrate", tmp_path)
    assert "dtype=torch.bfloat16" in train.read_text() and "NPU340" not in train.read_text()
    assert "dtype=torch.bfloat16" in branched.read_text() and "NPU340" not in branched.read_text()
    assert "NPU340" in plain.read_text() and "dtype=torch.bfloat16" not in plain.read_text()
