"""check --format sarif (validated against the SARIF 2.1.0 schema), gitlab, junit; notebook locations."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import cli

from cuda2npu.core.catalogue import all_rules

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
NOTEBOOKS = Path(__file__).resolve().parent.parent / "fixtures" / "ci" / "notebooks"
SOURCE = "import torch\n\n\ndef f(x):\n    x = x.cuda()\n    torch.cuda.synchronize()\n    return x.cuda()\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pkg dir").mkdir()
    (tmp_path / "pkg dir" / "a.py").write_text(SOURCE)
    shutil.copy(NOTEBOOKS / "train.ipynb", tmp_path / "train.ipynb")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_sarif_validates_against_the_2_1_0_schema(project):
    result = cli("check", ".", "--format", "sarif")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)
    assert log["version"] == "2.1.0"
    driver = log["runs"][0]["tool"]["driver"]
    assert [r["id"] for r in driver["rules"]] == list(all_rules())
    for rule in driver["rules"]:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert "helpUri" not in rule  # no published rules page declared: no link that does not work
        assert rule["help"]["text"].endswith(f"cuda2npu rules {rule['id']}")
    results = log["runs"][0]["results"]
    assert len(results) == 8  # 3 in a.py, 5 in the notebook (its `!nvidia-smi` shell escape included)
    first = results[0]
    assert first["ruleId"] == "NPU101" and driver["rules"][first["ruleIndex"]]["id"] == "NPU101"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "pkg%20dir/a.py"
    assert location["region"] == {"startLine": 5, "startColumn": 11, "endLine": 5, "endColumn": 15}
    notebook = [r for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.ipynb"]
    assert [r["properties"]["cell"] for r in notebook] == [2, 3, 3, 3, 5]
    assert (
        notebook[1]["properties"]["cell"] == 3
        and notebook[1]["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    )
    assert len({r["partialFingerprints"]["cuda2npu/v1"] for r in results if "a.py" in str(r["locations"])}) == 3
    levels = {rule["id"]: rule["defaultConfiguration"]["level"] for rule in driver["rules"]}
    assert (levels["NPU101"], levels["NPU601"], levels["NPU109"], levels["NPU801"]) == (
        "error",
        "error",
        "warning",
        "note",
    )
    assert all(r["level"] == levels[r["ruleId"]] or r["properties"]["tier"] == "review" for r in results)


def test_sarif_with_no_findings_is_valid(tmp_path):
    (tmp_path / "clean.py").write_text("import torch\n")
    log = json.loads(cli("check", tmp_path, "--format", "sarif").stdout)
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(log)
    assert log["runs"][0]["results"] == []


def test_gitlab_code_quality_fingerprints_are_unique_and_survive_edits_above(project):
    first = json.loads(cli("check", ".", "--format", "gitlab").stdout)
    assert {i["check_name"] for i in first} == {"NPU101", "NPU103", "NPU104", "NPU712"}
    assert len({i["fingerprint"] for i in first}) == len(first) == 8
    issue = first[0]
    assert issue["location"] == {"path": "pkg dir/a.py", "lines": {"begin": 5}}
    assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
    assert issue["description"].startswith("NPU101 ")
    (project / "pkg dir" / "a.py").write_text('"""Docs."""\n\nimport os\n' + SOURCE)
    second = json.loads(cli("check", ".", "--format", "gitlab").stdout)
    assert {i["fingerprint"] for i in second} == {i["fingerprint"] for i in first}
    assert second[0]["location"]["lines"]["begin"] == 8


def test_junit(project):
    result = cli("check", ".", "--format", "junit")
    root = ET.fromstring(result.stdout)
    assert root.tag == "testsuites" and root.get("failures") == "8"
    suites = {s.get("name"): s for s in root}
    assert set(suites) == {"pkg dir/a.py", "train.ipynb"}
    case = suites["pkg dir/a.py"][0]
    assert case.get("name") == "cuda2npu.NPU101" and case.get("line") == "5"
    assert case.find("failure").get("message").startswith("NPU101 ")
    assert "train.ipynb:cell 2:2:2" in suites["train.ipynb"][0].find("failure").text  # `!nvidia-smi`
    assert "train.ipynb:cell 3:1:25" in suites["train.ipynb"][1].find("failure").text
    clean = ET.fromstring(cli("check", project / "train.ipynb", "--format", "junit", "--select", "NPU6").stdout)
    assert clean.get("failures") == "0" and clean[0][0].get("name") == "No errors found"


def test_notebook_locations_in_text_json_and_github(project):
    text = cli("check", "train.ipynb").stdout
    assert "train.ipynb:cell 3:1:25: NPU101" in text
    assert "    1 | model = nn.Linear(4, 2).cuda()" in text
    data = json.loads(cli("check", "train.ipynb", "--format", "json").stdout)
    assert [(d["cell"], d["line"], d["code"]) for d in data["diagnostics"]] == [
        (2, 2, "NPU712"),
        (3, 1, "NPU101"),
        (3, 2, "NPU104"),
        (3, 4, "NPU103"),
        (5, 2, "NPU101"),
    ]
    github = cli("check", "train.ipynb", "--format", "github").stdout.splitlines()
    assert github[1].startswith("::error title=cuda2npu NPU101,file=train.ipynb,line=1,col=25::NPU101 ")
    assert github[1].endswith("(cell 3)")


def test_output_file(project):
    out = project / "report.sarif"
    assert cli("check", ".", "--format", "sarif", "-o", out, "--exit-zero").exit_code == 0
    assert json.loads(out.read_text())["version"] == "2.1.0"


def test_sarif_links_each_rule_to_the_declared_rules_page(project, monkeypatch):
    from cuda2npu.output import formatters

    monkeypatch.setattr(formatters, "_rules_url", lambda: "https://example.org/cuda2npu/rules/INDEX.md")
    driver = json.loads(cli("check", ".", "--format", "sarif").stdout)["runs"][0]["tool"]["driver"]
    rule = next(r for r in driver["rules"] if r["id"] == "NPU101")
    assert rule["helpUri"] == "https://example.org/cuda2npu/rules/INDEX.md#npu101-cuda-method-call"
    assert "## NPU101 cuda-method-call" in (Path(__file__).resolve().parent.parent / "rules" / "INDEX.md").read_text()
