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
