"""# noqa suppression (ruff-compatible), --add-noqa, and the opt-in unused-noqa rule NPU005."""

from __future__ import annotations

import json

import pytest
from cli_helpers import cli, cuda2npu
from helpers import dedent, migrate_text

from cuda2npu.core.noqa import NoqaMap, add_noqa, may_concern_us, parse_comment
from cuda2npu.core.options import Options


@pytest.mark.parametrize(
    ("comment", "codes"),
    [
        ("# noqa", None),
        ("# NOQA", None),
        ("#noqa", None),
        ("# noqa: NPU101", ("NPU101",)),
        ("# noqa:NPU101,NPU2", ("NPU101", "NPU2")),
        ("# noqa: NPU101 NPU103, E501", ("NPU101", "NPU103", "E501")),
        ("# noqa: NPU101 because the device is set elsewhere", ("NPU101",)),
        ("# a reason  # noqa: NPU101", ("NPU101",)),
        ("# type: ignore # noqa", None),
        ("# noqa : NPU101", ("NPU101",)),  # ruff 0.17 reads it as a directive with codes
    ],
)
def test_directives_parse_like_ruff(comment, codes):
    directive = parse_comment(comment)
    assert directive is not None and directive.codes == codes


@pytest.mark.parametrize(
    ("text", "concerns_us"),
    [
        (b"import x  # noqa: F401\nimport y  # NOQA:E402\n", False),
        (b"s = '# noqa '\n", True),  # a blanket directive's look-alike: the tokenizer decides
        (b"x = y.cuda()  # noqa: E501 NPU103\n", True),
        (b"x = y.cuda()  # noqa: N\n", True),  # a prefix of every NPU code
        (b"x = 1  # noqa: F401 # noqa: NPU1\n", True),  # each "# noqa" read: the tokenizer decides
        (b"s = '# noqa: F401 x'  # noqa: NPU1\n", True),  # a string's look-alike hides no comment
        (b"x = 1  # reason # noqa\r", True),
        (b"x = 1  # noqa: F401 \xc3\xa9\n", True),  # not ASCII: taken to matter
        (b"x = 1  # noqa123\n", False),
        (b"# cuda2npu: noqa\n", True),  # a file-level exemption
        (b"# ruff: noqa\n", False),  # blanket for ruff's rules: not ours
        (b"# flake8: noqa: F401\n", False),
        (b"x = 1\n", False),
    ],
)
def test_only_directives_that_may_concern_our_codes_are_tokenized(text, concerns_us):
    assert may_concern_us(text) is concerns_us


def test_foreign_directives_leave_findings_reported():
    _, result = migrate_text("import torch\nx = torch.cuda.is_available()  # noqa: E501\n")
    _, blanket = migrate_text("import torch\nx = torch.cuda.is_available()  # noqa\n")
    assert [f.code for f in result.findings] == ["NPU103"] and not blanket.findings


@pytest.mark.parametrize("comment", ["# noqa123", "# noqa:", "# noqanything", "# not a directive", "# noqa: lowercase"])
def test_non_directives(comment):
    assert parse_comment(comment) is None


def test_suppressed_findings_are_neither_reported_nor_fixed():
    source = dedent(
        """
        import torch
        a = torch.zeros(1).cuda()  # noqa: NPU101
        b = torch.zeros(1).cuda()  # noqa: NPU1
        c = torch.zeros(1).cuda()  # noqa
        d = torch.zeros(1).cuda()  # noqa: NPU103
        s = "# noqa"; e = torch.zeros(1).cuda()
        """
    )
    after, result = migrate_text(source, Options())
    lines = after.splitlines()
    assert [f.line for f in result.findings] == [5, 6]
    assert lines[2:5] == source.splitlines()[1:4]  # a, b, c untouched (import torch_npu added above)
    assert lines[5] == "d = torch.zeros(1).npu()  # noqa: NPU103"
    assert lines[6].endswith("e = torch.zeros(1).npu()")


def test_a_bare_noqa_on_a_failing_import_still_marks_it():
    """`import transformer_engine as te  # noqa` silences flake8's unused import; the import still
    fails on an NPU host, so its manual finding stays (and its marker); `# noqa: NPU606` hides it."""
    source = dedent(
        """
        import torch
        import transformer_engine as te  # noqa
        x = torch.zeros(1).cuda()  # noqa
        """
    )
    after, result = migrate_text(source, Options())
    assert [(f.line, f.code) for f in result.findings] == [(2, "NPU606")]
    assert "# TODO(cuda2npu): NPU606" in after and "x = torch.zeros(1).cuda()  # noqa" in after
    _, result = migrate_text(source.replace("te  # noqa", "te  # noqa: NPU606"), Options())
    assert "NPU606" not in {f.code for f in result.findings}


def test_multi_line_statements_use_the_line_of_the_finding():
    source = dedent(
        '''
        import torch
        model = build(
            torch.zeros(1).cuda(),  # noqa: NPU101
            torch.zeros(2).cuda(),
        )
        text = f"""
        {torch.zeros(3).cuda()}
        """  # noqa: NPU101
        '''
    )
    _, result = migrate_text(source, Options(fix=False))
    assert [(f.code, f.line) for f in result.findings] == [("NPU101", 4)]


def test_unused_noqa_is_opt_in_and_reports_only_our_codes():
    source = dedent(
        """
        import torch
        x = torch.zeros(1).cuda()  # noqa: NPU101
        y = torch.zeros(1)  # noqa: NPU101, E501
        z = torch.zeros(1)  # noqa: NPU2
        w = torch.zeros(1)  # noqa
        v = torch.zeros(1)  # noqa: F401
        u = torch.zeros(1)  # noqa: NPU101, NPU005
        """
    )
    _, default = migrate_text(source, Options(fix=False))
    assert "NPU005" not in {f.code for f in default.findings}
    _, result = migrate_text(source, Options(select=("NPU", "NPU005"), ignore=("NPU2",), fix=False))
    unused = [(f.line, f.column, f.message) for f in result.findings if f.code == "NPU005"]
    assert unused == [
        (3, 21, "Unused `noqa` directive (unused: NPU101)"),
        (4, 21, "Unused `noqa` directive (non-enabled: NPU2)"),
    ]


def test_add_noqa_text_edits():
    text = "import torch\r\nx = a.cuda()  # keep me\r\ny = b.cuda()  # noqa: E501\r\nz = c.cuda()  # noqa\r\ns = '''\r\n''' + d.cuda()\r\n"
    new, count = add_noqa(text, {2: {"NPU101"}, 3: {"NPU101", "NPU103"}, 4: {"NPU101"}, 5: {"NPU101"}})
    assert new.split("\r\n") == [
        "import torch",
        "x = a.cuda()  # keep me  # noqa: NPU101",
        "y = b.cuda()  # noqa: E501, NPU101, NPU103",
        "z = c.cuda()  # noqa",
        "s = '''",
        "''' + d.cuda()  # noqa: NPU101",  # a line inside a string: the directive goes where it ends
        "",
    ]
    assert count == 3
    assert NoqaMap.from_text(new).suppresses(5, "NPU101") is not None
    assert add_noqa(new, {2: {"NPU101"}, 5: {"NPU101"}})[1] == 0  # idempotent


def test_add_noqa_command_then_check_is_clean_and_migrate_changes_nothing(tmp_path):
    (tmp_path / "a.py").write_bytes(
        "\ufeffimport torch\nx = torch.zeros(1).cuda(); torch.cuda.synchronize()\nname = 'café'\n".encode("utf-8")
    )
    (tmp_path / "b.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\ny = torch.ones(1).cuda()  # caf\xe9\n")
    result = cli("check", tmp_path, "--add-noqa")
    assert result.exit_code == 0
    assert "Added 2 noqa directives in 2 files." in result.stderr
    assert (tmp_path / "a.py").read_bytes().startswith(b"\xef\xbb\xbfimport torch\n")
    assert "x = torch.zeros(1).cuda(); torch.cuda.synchronize()  # noqa: NPU101, NPU103\n" in (
        tmp_path / "a.py"
    ).read_text("utf-8-sig")
    assert (tmp_path / "b.py").read_bytes().endswith(b"# caf\xe9  # noqa: NPU101\n")
    assert cli("check", tmp_path).exit_code == 0
    assert cli("migrate", tmp_path, "--check").exit_code == 0
    data = json.loads(cli("check", tmp_path, "--format", "json", "--extend-select", "NPU005").stdout)
    assert data["diagnostics"] == []


@pytest.mark.parametrize("comment", ["# noqa:", "# noqa: npu101", "# noqa123"])
def test_malformed_directives_suppress_nothing(comment):
    assert parse_comment(comment) is None
    _, result = migrate_text(f"import torch\nx = torch.cuda.is_available()  {comment}\n")
    assert [f.code for f in result.findings] == ["NPU103"]


@pytest.mark.parametrize(
    ("header", "left"),
    [
        ("# cuda2npu: noqa\n", []),
        ("# ruff: noqa\n", ["NPU101", "NPU103"]),  # blanket, for ruff's own rules: not ours
        ("# flake8: noqa\n", ["NPU101", "NPU103"]),
        ("# flake8: noqa: NPU1\n", []),
        ("# ruff: noqa: NPU101\n", ["NPU103"]),
        ("# cuda2npu: noqa: NPU103\n", ["NPU101"]),
        ("# ruff: noqa: npu103\n", ["NPU101", "NPU103"]),  # lowercase: not a directive
        ("x = 1  # ruff: noqa\n", ["NPU101", "NPU103"]),  # not on a line of its own
    ],
)
def test_file_level_exemptions(header, left):
    text = f"{header}import torch\nx = torch.cuda.is_available()\ny = x.cuda()\n"
    _, result = migrate_text(text)
    assert sorted(f.code for f in result.findings) == left


def test_unknown_codes_are_reported_as_unknown(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(1)  # noqa: NPU999, NPU103\n")
    result = cli("check", tmp_path, "--select", "NPU005", "--no-cache", "--output-format", "concise")
    assert "Unused `noqa` directive (non-enabled: NPU103; unknown: NPU999)" in result.output


def test_ignore_noqa_reports_what_directives_hide(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.cuda.is_available()  # noqa: NPU103\n")
    (tmp_path / "requirements.txt").write_text("torch\nflash-attn  # noqa: NPU701\n")
    (tmp_path / "run.sh").write_text("export CUDA_VISIBLE_DEVICES=0  # noqa\n")

    def codes(*extra):
        data = json.loads(cli("check", tmp_path, "--no-cache", "--output-format", "json", *extra).stdout)
        return sorted(d["code"] for d in data["diagnostics"])

    assert codes() == []
    assert codes("--ignore-noqa") == ["NPU103", "NPU701", "NPU703", "NPU711"]  # NPU703: a.py now needs torch_npu
    cli("migrate", tmp_path, "--ignore-noqa", "--no-cache")
    assert "torch.npu.is_available()" in (tmp_path / "a.py").read_text()


def test_malformed_directives_are_warned_about_on_stderr_and_ignored(tmp_path):
    """ruff's warnings: `# noqa:` without codes (or with lowercase ones) and `# noqa` glued to other
    text are no directives; each is named with its file and line on stderr, once."""
    source = (
        "import torch\n"
        "a = torch.ones(1).cuda()  # noqa:\n"
        "b = torch.ones(1).cuda()  # noqa: npu101\n"
        "c = torch.ones(1).cuda()  # noqa'd by hand\n"
        "d = torch.ones(1).cuda()  # noqa: NPU101\n"
        "e = torch.ones(1).cuda()  # noqa\n"
        "s = '# noqa:'\n"
    )
    (tmp_path / "m.py").write_text(source)
    result = cuda2npu("check", "m.py", "--output-format", "concise", cwd=tmp_path)
    assert [line.split(":")[1] for line in result.stdout.splitlines() if "NPU101" in line] == ["2", "3", "4"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: Invalid `# noqa` directive on m.py:2: expected a comma-separated list of codes (e.g., `# noqa: NPU101, NPU103`)",
        "warning: Invalid `# noqa` directive on m.py:3: expected a comma-separated list of codes (e.g., `# noqa: NPU101, NPU103`)",
        "warning: Invalid `# noqa` directive on m.py:4: expected `:` followed by a comma-separated list of codes (e.g., `# noqa: NPU101, NPU103`)",
    ]
    migrated = cuda2npu("migrate", "m.py", "--diff", cwd=tmp_path)
    assert migrated.stderr.count("warning: Invalid `# noqa` directive") == 3
    assert "warning" not in cuda2npu("check", "m.py", "--ignore-noqa", cwd=tmp_path).stderr
    assert "warning" not in cuda2npu("check", "m.py", "-q", cwd=tmp_path).stderr
