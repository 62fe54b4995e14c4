"""Notebooks: code cells only, magics untouched, JSON formatting preserved, findings per cell."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import cli

from cuda2npu.core.options import Options
from cuda2npu.filekinds.notebooks import process_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent / "fixtures" / "ci" / "notebooks"


@pytest.fixture
def notebooks(tmp_path):
    shutil.copytree(NOTEBOOKS, tmp_path / "nb")
    return tmp_path / "nb"


def _without_sources(notebook: dict) -> dict:
    return {**notebook, "cells": [{k: v for k, v in c.items() if k != "source"} for c in notebook["cells"]]}


def test_migrate_changes_only_code_cell_sources(notebooks):
    before_text = (NOTEBOOKS / "train.ipynb").read_text(encoding="utf-8")
    assert cli("migrate", notebooks).exit_code == 0
    after_text = (notebooks / "train.ipynb").read_text(encoding="utf-8")
    before, after = json.loads(before_text), json.loads(after_text)
    assert _without_sources(after) == _without_sources(before)  # outputs, metadata, counts untouched
    assert after_text == json.dumps(after, indent=1, sort_keys=True, ensure_ascii=False) + "\n"  # nbformat style kept
    sources = [c["source"] for c in after["cells"]]
    assert sources[0] == before["cells"][0]["source"]  # markdown mentioning x.cuda() is not code
    assert sources[1][0] == "%matplotlib inline\n"  # shell escapes are shell script: marked above
    assert sources[1][1].startswith("# TODO(cuda2npu): NPU712 `nvidia-smi` is not installed on an Ascend host")
    assert sources[1][2:] == [
        "!nvidia-smi -L | wc -l\n",
        "import torch\n",
        "import torch_npu\n",
        "import torch.nn as nn",
    ]
    assert sources[2] == [
        "model = nn.Linear(4, 2).npu()\n",
        'x = torch.randn(8, 4, device="npu")\n',
        "files = !ls\n",
        "torch.npu.synchronize()\n",
    ]
    assert sources[3] == "%%bash\necho x.cuda()\n"  # a shell cell is not Python
    assert sources[4] == ["%%time\n", "y = model(x).npu()"]
    assert sources[5] == []
    # idempotent, and check is clean afterwards
    assert cli("migrate", notebooks, "--check").exit_code == 0
    left = json.loads(cli("check", notebooks / "train.ipynb", "--format", "json").stdout)["diagnostics"]
    assert [(d["cell"], d["code"], d["tier"]) for d in left] == [(2, "NPU712", "manual")]  # nvidia-smi stays


def test_untouched_notebooks_round_trip_byte_for_byte(notebooks):
    cli("migrate", notebooks)
    assert (notebooks / "clean.ipynb").read_bytes() == (NOTEBOOKS / "clean.ipynb").read_bytes()
    data = (NOTEBOOKS / "train.ipynb").read_bytes()
    result = process_notebook(data, Path("train.ipynb"), "train.ipynb", Options(select=("NPU6",)))
    assert result.status in ("unchanged", "skipped") and result.new_source is None


def test_foreign_formatting_is_preserved(notebooks):
    """indent 2, insertion key order, ASCII escapes, no trailing newline, a string source."""
    cli("migrate", notebooks)
    before = (NOTEBOOKS / "other_style.ipynb").read_text()
    after = (notebooks / "other_style.ipynb").read_text()
    assert after == before.replace(
        '"import torch\\nt = torch.zeros(3).cuda()  # caf\\u00e9\\n"',
        '"import torch\\nimport torch_npu\\nt = torch.zeros(3).npu()  # caf\\u00e9\\n"',
    )
    assert not after.endswith("\n")


def test_r48_colabs_spread_empty_lists_are_kept(tmp_path):
    """StyleTTS2's Colab notebook (round 48): Colab writes some empty lists over lines (`"text": [\n\n   ]`),
    which json.dumps writes `[]`; the notebook was left unmigrated. Each stays as written, the `[]` ones too,
    and a `[]` inside a source string is no list."""
    text = (
        '{\n  "cells": [\n    {\n      "cell_type": "code",\n      "source": [\n        "import torch\\n",\n'
        '        "x = []\\n",\n        "y = torch.ones(1).cuda()"\n      ],\n      "metadata": {},\n'
        '      "execution_count": null,\n      "outputs": [\n        {\n          "name": "stdout",\n'
        '          "output_type": "stream",\n          "text": [\n\n          ]\n        }\n      ]\n    },\n'
        '    {\n      "cell_type": "code",\n      "source": [],\n      "metadata": {},\n      "outputs": []\n    }\n'
        '  ],\n  "metadata": {\n    "colab": {\n      "provenance": []\n    }\n  },\n  "nbformat": 4,\n'
        '  "nbformat_minor": 0\n}\n'
    )
    assert json.loads(text)["cells"][0]["outputs"][0]["text"] == []
    for newline in ("\n", "\r\n"):
        data = text.replace("\n", newline).encode()
        result = process_notebook(data, Path("colab.ipynb"), "colab.ipynb", Options())
        assert result.status == "changed", result.reason
        expected = text.replace('"import torch\\n",', '"import torch\\n",\n        "import torch_npu\\n",')
        expected = expected.replace("torch.ones(1).cuda()", "torch.ones(1).npu()").replace("\n", newline)
        assert result.new_source.decode() == expected


def test_crlf_notebook_keeps_its_newlines(tmp_path):
    text = (NOTEBOOKS / "train.ipynb").read_text(encoding="utf-8").replace("\n", "\r\n")
    result = process_notebook(text.encode(), Path("nb.ipynb"), "nb.ipynb", Options())
    assert result.status == "changed"
    assert result.new_source.count(b"\r\n") == result.new_source.count(b"\n")


def test_findings_point_at_cell_and_line(notebooks):
    data = json.loads(cli("check", notebooks / "train.ipynb", "--format", "json").stdout)
    assert [(d["cell"], d["line"], d["column"], d["code"]) for d in data["diagnostics"]] == [
        (2, 2, 2, "NPU712"),  # `!nvidia-smi -L | wc -l`: the shell escape is shell script
        (3, 1, 25, "NPU101"),
        (3, 2, 30, "NPU104"),
        (3, 4, 1, "NPU103"),
        (5, 2, 14, "NPU101"),
    ]


def test_bad_and_foreign_notebooks(tmp_path):
    bad = process_notebook(b"{not json", Path("bad.ipynb"), "bad.ipynb", Options())
    assert bad.status == "failed" and bad.findings[0].code == "NPU001" and "notebook JSON" in bad.reason
    r_notebook = {
        "cells": [{"cell_type": "code", "source": "x <- 1", "metadata": {}, "outputs": []}],
        "metadata": {"kernelspec": {"language": "R"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    assert process_notebook(json.dumps(r_notebook).encode(), Path("r.ipynb"), "r.ipynb", Options()).status == "skipped"
    broken = {
        "cells": [
            {"cell_type": "code", "source": ["import torch\n", "x = (\n"], "metadata": {}, "outputs": []},
            {"cell_type": "code", "source": ["y.cuda()"], "metadata": {}, "outputs": []},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    result = process_notebook(json.dumps(broken, indent=1).encode(), Path("broken.ipynb"), "broken.ipynb", Options())
    # OmniQuant's MLC notebook (round 21): a cell that is not Python is left as written and reported; the
    # other cells are migrated
    assert result.status == "changed" and [(f.code, f.cell) for f in result.findings][0] == ("NPU001", 1)
    assert "cell 1 is not Python" in result.findings[0].message
    cells = json.loads(result.new_source)["cells"]
    assert cells[0]["source"] == broken["cells"][0]["source"] and "y.npu()" in "".join(cells[1]["source"])


def test_notebook_gets_the_generated_te_module_with_an_absolute_import(tmp_path):
    """A notebook is never imported as a package module, so even next to an __init__.py it imports
    te_npu_modules absolutely; the generated file goes next to it."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": "c1",
        "metadata": {},
        "outputs": [],
        "source": ["import torch\n", "import transformer_engine.pytorch as te\n", "mlp = te.LayerNormMLP(64, 256)"],
    }
    notebook = {
        "cells": [cell],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (package / "explore.ipynb").write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")
    result = cli("migrate", package, "--allow-dirty", "--no-cache")
    assert result.exit_code == 0, result.output
    source = "".join(json.loads((package / "explore.ipynb").read_text(encoding="utf-8"))["cells"][0]["source"])
    assert "import te_npu_modules\n" in source and "from . import" not in source
    assert "mlp = te_npu_modules.LayerNormMLP(64, 256)" in source
    assert (package / "te_npu_modules.py").is_file()


def _notebook(*sources: str) -> dict:
    cells = [
        {"cell_type": "code", "source": s, "metadata": {}, "outputs": [], "execution_count": None} for s in sources
    ]
    return {"cells": cells, "metadata": {"kernelspec": {"language": "python"}}, "nbformat": 4, "nbformat_minor": 5}


def test_whatever_ipython_runs_is_accepted(tmp_path):
    """Shell escapes and %run continued with a backslash, magics continued inside a block, and a
    cell indented as a whole (IPython strips the first line's indentation) all parse; the rewrite
    keeps them and the cell's indentation, and the finding's column is the cell's own."""
    sources = [
        "import torch\n!pip install a \\\n    b\nx = torch.zeros(1).cuda()\n",
        "%run train.py \\\n  --device cuda\n",
        "files = !ls \\\n  -la\n",
        "if True:\n    !nvidia-smi \\\n  -L | wc -l\n    %time y = 1\n",
        "  !echo hi\n  z = torch.zeros(1).cuda()\n\n  w = 1\n",
    ]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(_notebook(*sources), indent=1) + "\n", encoding="utf-8")
    data = json.loads(cli("check", path, "--format", "json").stdout)
    assert [(d["cell"], d["line"], d["column"], d["code"]) for d in data["diagnostics"]] == [
        (1, 4, 20, "NPU101"),
        (4, 2, 6, "NPU712"),  # the shell escape's nvidia-smi (after `    !`)
        (5, 2, 22, "NPU101"),
    ]
    assert cli("migrate", path).exit_code == 0
    after = [c["source"] for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    marker = after[3].split("\n")[1]
    assert marker.startswith("    # TODO(cuda2npu): NPU712 `nvidia-smi` is not installed")  # indented as the escape
    assert after == [
        "import torch\nimport torch_npu\n!pip install a \\\n    b\nx = torch.zeros(1).npu()\n",
        *sources[1:3],
        sources[3].replace("if True:\n", f"if True:\n{marker}\n"),
        "  !echo hi\n  z = torch.zeros(1).npu()\n\n  w = 1\n",
    ]


def test_migrate_names_the_cell_of_a_failure_as_check_does(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(_notebook("import torch\n", "x = torch.ones(1).cuda()\ny = (\n")), encoding="utf-8")
    check = cli("check", path)
    migrate = cli("migrate", path, "--diff")
    assert "nb.ipynb:cell 2:2:5: NPU001 cell 2 is not Python ('(' was never closed)" in check.stdout
    assert "nb.ipynb:cell 2:2:5 NPU001" in migrate.stdout + migrate.stderr  # the cell is left, the rest migrates


def test_r16_shell_escapes_and_shell_cells_are_migrated_as_shell_script(tmp_path):
    """MedicalGPT's `! CUDA_VISIBLE_DEVICES=0 python training/ppo_training.py`, a `%%bash` cell, and
    BELLE's Colab notebook whose only CUDA text is `!nvidia-smi` (no longer skipped by the prefilter):
    renamed in place, idempotent; a bare `!nvidia-smi` only prints (round 33), so it is left unmarked,
    and `nvidia-smi` in a cell that stops at a failure (`set -e`) is marked above."""
    sources = [
        "! CUDA_VISIBLE_DEVICES=0 python training/ppo_training.py --model_name_or_path m\n",
        "%%bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py\n",
        "!nvidia-smi\n!pip install -r requirements.txt\n",
        "%%bash\nset -e\nnvidia-smi -L\n",
    ]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(_notebook(*sources), indent=1) + "\n", encoding="utf-8")
    data = json.loads(cli("check", path, "--format", "json").stdout)
    assert [(d["cell"], d["line"], d["column"], d["code"]) for d in data["diagnostics"]] == [
        (1, 1, 3, "NPU711"),
        (2, 2, 8, "NPU711"),
        (4, 3, 1, "NPU712"),
    ]
    assert cli("migrate", path).exit_code == 0
    after = [c["source"] for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    assert after[0] == sources[0].replace("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")
    assert after[1] == sources[1].replace("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")
    assert after[2] == sources[2]
    assert after[3] == "%%bash\nset -e\n# TODO(cuda2npu): NPU712 " + after[3].split("NPU712 ", 1)[1]
    assert after[3].endswith("\nnvidia-smi -L\n")
    assert cli("migrate", path, "--check").exit_code == 0  # idempotent: the marker above is seen


def test_r22_jupyters_autosave_copies_are_not_read(notebooks):
    """EasyEdit commits `tutorial-notebooks/.ipynb_checkpoints/`: Jupyter's copies, not the project's."""
    checkpoints = notebooks / ".ipynb_checkpoints"
    checkpoints.mkdir()
    shutil.copy(notebooks / "train.ipynb", checkpoints / "train-checkpoint.ipynb")
    before = (checkpoints / "train-checkpoint.ipynb").read_bytes()
    assert cli("migrate", notebooks).exit_code == 0
    assert (checkpoints / "train-checkpoint.ipynb").read_bytes() == before
    assert (notebooks / "train.ipynb").read_bytes() != (NOTEBOOKS / "train.ipynb").read_bytes()


def test_r24_package_magics_are_read_as_the_shell_command_they_run(tmp_path):
    """llama-recipes' `%pip install -qU ... faiss-gpu` (continued with backslashes): the install of a
    CUDA-only distribution is marked above the magic, which stays as written; idempotent."""
    sources = ["# Install dependencies\n%pip install -qU \\\n    replicate \\\n    faiss-gpu\n", "%conda list\n"]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(_notebook(*sources), indent=1) + "\n", encoding="utf-8")
    data = json.loads(cli("check", path, "--format", "json").stdout)
    assert [(d["cell"], d["line"], d["code"]) for d in data["diagnostics"]] == [(1, 4, "NPU701")]  # at `faiss-gpu`
    assert cli("migrate", path).exit_code == 0
    after = [c["source"] for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    first, marker, *rest = after[0].splitlines(keepends=True)
    assert first == "# Install dependencies\n" and marker.startswith(
        "# TODO(cuda2npu): NPU701 review: `pip install faiss-gpu`"
    )
    assert "".join([first, *rest]) == sources[0] and after[1] == sources[1]
    assert cli("migrate", path, "--check").exit_code == 0
