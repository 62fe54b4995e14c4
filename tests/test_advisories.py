"""NPU advisories (NPU80x): opt-in for check (outside its default selection, issue 33), reported at
the right lines when selected, never rewritten or marked, off with NPU8."""

from __future__ import annotations

import json

from cli_helpers import REPO, cuda2npu

CASE = REPO / "fixtures" / "rules" / "advisories" / "train_loop.py"
ADVICE_ONLY = """import torch

model = torch.compile(torch.nn.Linear(2, 2))


def train(model, batches, optimizer):
    for batch in batches:
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


def _findings(*args):
    result = cuda2npu("check", "--format", "json", "--no-cache", *args)
    return {(d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"] if d["code"].startswith("NPU8")}


def _check(path, *args):
    return cuda2npu("check", "--no-cache", "--output-format", "concise", path, *args, cwd=path.parent)


def test_each_advisory_at_its_line(tmp_path):
    target = tmp_path / CASE.name  # its own project: not the whole repository's facts
    target.write_text(CASE.read_text())
    lines = CASE.read_text().splitlines()
    found = _findings(str(target), "--select", "NPU8")
    assert {code for code, _ in found} == {"NPU801", "NPU802", "NPU803", "NPU804", "NPU805", "NPU806"}
    by_code = {code: lines[line - 1] for code, line in found}
    # per step, not the per-epoch read below it nor the one under `if step % 10 == 0:`
    assert "loss.detach().cpu().numpy()" in by_code["NPU804"]
    assert len([code for code, _ in found if code == "NPU804"]) == 1
    assert ".double()" in by_code["NPU802"] and "np.float64" not in by_code["NPU802"]
    assert _findings(str(target)) == set()  # not in check's default selection


def test_the_family_is_turned_off_by_its_prefix(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cuda2npu]\nignore = ["NPU8"]\n')
    target = tmp_path / "train_loop.py"
    target.write_text(CASE.read_text())
    assert _findings(str(target), "--extend-select", "NPU8") == set()  # ignore wins the tie


# issue 33, 5: advisories are opt-in, as ruff's rules outside its default set


def test_advisories_do_not_fail_check_by_default(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(ADVICE_ONLY)
    default = _check(target)
    assert default.returncode == 0 and default.stdout == "All checks passed!\n", default.stdout + default.stderr
    for selection in (["--select", "NPU8"], ["--extend-select", "NPU8"], ["--select", "ALL"], ["--select", "NPU80"]):
        selected = _check(target, *selection)
        assert selected.returncode == 1, selection
        assert "train.py:3:9: NPU801" in selected.stdout and "train.py:11:15: NPU804" in selected.stdout, selection
    only_one = _check(target, "--select", "NPU804")
    assert only_one.returncode == 1 and "NPU804" in only_one.stdout and "NPU801" not in only_one.stdout


def test_configuration_selects_the_advisories(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(ADVICE_ONLY + "x = torch.ones(1).cuda()\n")
    (tmp_path / "cuda2npu.toml").write_text('extend-select = ["NPU8"]\n')
    extended = _check(target)
    assert extended.returncode == 1 and {"NPU101", "NPU801", "NPU804"} <= _codes(extended.stdout)
    (tmp_path / "cuda2npu.toml").write_text('select = ["ALL"]\n')
    assert {"NPU101", "NPU801", "NPU804"} <= _codes(_check(target).stdout)
    (tmp_path / "cuda2npu.toml").write_text('select = ["NPU8"]\n')
    assert _codes(_check(target).stdout) == {"NPU801", "NPU804"}
    (tmp_path / "cuda2npu.toml").write_text('select = ["NPU1"]\n')
    assert _codes(_check(target, "--extend-select", "NPU8").stdout) == {"NPU101", "NPU801", "NPU804"}
    (tmp_path / "cuda2npu.toml").unlink()
    assert _codes(_check(target).stdout) == {"NPU101"}


def _codes(concise: str) -> set[str]:
    return {line.split()[1] for line in concise.splitlines() if ": NPU" in line}


def test_every_n_steps_reads_are_not_reported(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(
        "import torch\n\n\n"
        "def train(model, batches, optimizer, log_interval, master):\n"
        "    for step, batch in enumerate(batches):\n"
        "        loss = model(batch).sum()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        if step % log_interval == 0:\n"
        "            print(loss.item())\n"
        "        if step % 100 == 0 and master:\n"
        "            print(loss.item())\n"
        "        elif (step + 1) % 7 == 0:\n"
        "            print(loss.cpu().numpy())\n"
        "        else:\n"
        "            print(loss.tolist())\n"  # line 16: the other steps, every step
        "        if not step % 5:\n"
        "            print(loss.item())\n"
        "        if step % 5:\n"
        "            print(loss.item())\n"  # line 20: 4 steps in 5
        "        last = loss.item() if step % 10 == 0 else None\n"
    )
    result = _check(target, "--select", "NPU804")
    assert result.returncode == 1
    assert [line.split(": ")[0] for line in result.stdout.splitlines() if "NPU804" in line] == [
        "train.py:16:19",
        "train.py:20:19",
    ]


def test_one_finding_per_expression(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(
        "import torch\n\n\n"
        "def train(model, batches, optimizer):\n"
        "    for batch in batches:\n"
        "        loss = model(batch).sum()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        value = loss.detach().cpu().numpy()\n"
        "        values = loss.cpu().float().tolist()\n"
        "        print(loss.item(), value.item())\n"
    )
    result = _check(target, "--select", "NPU804")
    found = [line for line in result.stdout.splitlines() if "NPU804" in line]
    assert [line.split(": ")[0] for line in found] == [
        "train.py:9:17",
        "train.py:10:18",
        "train.py:11:15",
        "train.py:11:28",
    ]
    assert "`.cpu().numpy()` inside the training loop" in found[0]
    assert "`.cpu().float().tolist()` inside the training loop" in found[1]


def test_rules_say_the_advisories_are_opt_in():
    table = cuda2npu("rules", "NPU8").stdout.splitlines()[1:]
    assert len(table) == 6 and all("(opt-in: `--select NPU8`)" in line for line in table)
    data = json.loads(cuda2npu("rules", "--format", "json").stdout)
    assert {d["code"] for d in data if d["opt_in"]} == {f"NPU80{i}" for i in range(1, 7)} | {"NPU005", "NPU406"}
    assert "(opt-in: `--select NPU8`)" in (REPO / "rules" / "INDEX.md").read_text()


def test_sarif_marks_the_advisories_off_by_default(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    sarif = json.loads(cuda2npu("check", "--output-format", "sarif", "a.py", cwd=tmp_path).stdout)
    enabled = {r["id"]: r["defaultConfiguration"]["enabled"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert not enabled["NPU801"] and not enabled["NPU406"] and enabled["NPU101"]
