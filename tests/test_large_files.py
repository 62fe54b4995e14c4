"""Large files, statement by statement (cuda2npu/core/large_files.py): the scanner that tells
top-level statements apart, the reduction and its splice, the engine's use of them and the size
guard. The threshold is patched down so that the files stay small; one test runs a generated 2 MB
file through the command line."""

from __future__ import annotations

import dataclasses

import pytest
from cli_helpers import cuda2npu

from cuda2npu.core import large_files
from cuda2npu.core.diagnostics import FileResult
from cuda2npu.core.large_files import reduce, top_level_statements
from cuda2npu.core.options import Options
from cuda2npu.filekinds import python
from cuda2npu.filekinds.python import migrate_source
from cuda2npu.project.runner import process_file


def statements(text: str) -> list[str] | None:
    source = text.encode()
    found = top_level_statements(source)
    return None if found is None else [source[start:end].decode() for start, end in found]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            'x = """\ndef f():\n# not a comment\nimport os\n"""\ny = 1\n',
            ['x = """\ndef f():\n# not a comment\nimport os\n"""', "y = 1"],
            id="triple-quoted string with code and # inside",
        ),
        pytest.param(
            "x = '''\n# ends like a comment'''\n# a comment\n\ny = 2\n",
            ["x = '''\n# ends like a comment'''", "y = 2"],
            id="string ending on a comment-like line",
        ),
        pytest.param(
            "s = 'it\\'s ( # no'\nt = \"a\\\"b[\" \n",
            ["s = 'it\\'s ( # no'", 't = "a\\"b[" '],
            id="escaped quotes",
        ),
        pytest.param(
            'r = r"\\"("\nd = """a\\"""b("""\nq = r\'\\\\\'\nz = 3\n',
            ['r = r"\\"("', 'd = """a\\"""b("""', "q = r'\\\\'", "z = 3"],
            id="raw strings and escaped triple quotes",
        ),
        pytest.param(
            "x = [\n1,\n    2,  # ]\n]\ny = {\n'a': (1,\n2)}\n",
            ["x = [\n1,\n    2,  # ]\n]", "y = {\n'a': (1,\n2)}"],
            id="brackets across lines",
        ),
        pytest.param("x = 1 + \\\n2\ny = 3\n", ["x = 1 + \\\n2", "y = 3"], id="backslash continuation"),
        pytest.param(
            "@a\n@b(1,\n2)\ndef f():\n    pass\n\n\n@c\n# between\nasync def g():\n    pass\nh = 1\n",
            ["@a\n@b(1,\n2)\ndef f():\n    pass", "@c\n# between\nasync def g():\n    pass", "h = 1"],
            id="decorators",
        ),
        pytest.param(
            "if a:\n    pass\n# between\nelif b:\n    pass\nelse:\n    pass\n"
            "try:\n    pass\nexcept E:\n    pass\nfinally:\n    pass\nelsewhere = 1\n",
            [
                "if a:\n    pass\n# between\nelif b:\n    pass\nelse:\n    pass",
                "try:\n    pass\nexcept E:\n    pass\nfinally:\n    pass",
                "elsewhere = 1",
            ],
            id="compound statements",
        ),
        pytest.param(
            "# header\n\ndef f():\n    x = 1\n\n    return x\n    # trailing\n\n# between\nclass C:\n    pass\n",
            ["def f():\n    x = 1\n\n    return x", "class C:\n    pass"],
            id="comments between statements",
        ),
        pytest.param(
            "\ufeffx = (1,\r\n2)\r\ndef f():\r\n    pass\r\n\r\ny = 1",
            ["x = (1,\r\n2)", "def f():\r\n    pass", "y = 1"],
            id="BOM, CRLF, no final newline",
        ),
    ],
)
def test_statements(text, expected):
    assert statements(text) == expected


@pytest.mark.parametrize(
    "source",
    [
        b"x = (\n1\n",
        b"x = 1)\n",
        b"x = 'abc\ny = 1\n",
        b'x = """abc\n',
        b"x = 1\ry = 2\n",
        b"x = '\xff'\n",
    ],
    ids=["open bracket", "closing bracket", "unterminated string", "unterminated triple", "lone CR", "not UTF-8"],
)
def test_cannot_tell(source):
    assert top_level_statements(source) is None
    assert reduce(source, []) is None


SMALL = """\
'''A docstring.'''
# -*- coding: utf-8 -*-
import torch


def one():
    return 1

# a plain comment


def two():
    return 2
# cuda2npu: noqa: NPU999
def three():
    return 3


model = torch.nn.Linear(2, 2).cuda()
X = [
    4,
]
def four():
    # ruff: noqa: E501
    return 4
"""


def test_reduce_and_splice():
    reduction = reduce(SMALL.encode(), [r"\.cuda\b"])
    assert reduction.text.decode() == (
        "'''A docstring.'''\n# -*- coding: utf-8 -*-\nimport torch\n\n\n__cuda2npu_elided_0__\n"
        "# cuda2npu: noqa: NPU999\n__cuda2npu_elided_1__\n\n\n"
        "model = torch.nn.Linear(2, 2).cuda()\n__cuda2npu_elided_2__\n"
        "def four():\n    # ruff: noqa: E501\n    return 4\n"
    )
    assert (reduction.statements, reduction.kept) == (8, 4)
    lines = SMALL.splitlines()
    for number, line in enumerate(reduction.text.decode().splitlines(), 1):
        original = reduction.line(number)
        if line.startswith("__cuda2npu_elided_"):  # a placeholder stands at its first statement's line
            assert lines[original - 1] == {"0": "def one():", "1": "def three():", "2": "X = ["}[line[-3]]
        else:
            assert lines[original - 1] == line
    assert reduction.splice(reduction.text) == SMALL.encode()
    assert reduction.splice(reduction.text.replace(b"2(2, 2).cuda()", b"2(2, 2).npu()")) == SMALL.encode().replace(
        b"2(2, 2).cuda()", b"2(2, 2).npu()"
    )


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text.replace(b"__cuda2npu_elided_1__\n", b""),  # lost
        lambda text: text + b"__cuda2npu_elided_0__\n",  # twice
        lambda text: text.replace(b"__cuda2npu_elided_1__", b"    __cuda2npu_elided_1__"),  # not at column 0
        lambda text: text.replace(b"__cuda2npu_elided_1__", b"__cuda2npu_elided_1__  # x"),  # not a whole line
        lambda text: text.replace(b"_0__", b"_9__").replace(b"_1__", b"_0__").replace(b"_9__", b"_1__"),  # moved
    ],
    ids=["lost", "twice", "indented", "not whole line", "moved"],
)
def test_splice_refuses(edit):
    reduction = reduce(SMALL.encode(), [r"\.cuda\b"])
    assert reduction.splice(edit(reduction.text)) is None


def test_splice_failure_leaves_the_file():
    source = SMALL.encode()
    reduction = reduce(source, [r"\.cuda\b"])
    result = migrate_source(reduction.text, "big.py", Options())
    moved = dataclasses.replace(result, new_source=result.new_source.replace(b"__cuda2npu_elided_2__\n", b""))
    restored = python._restored(moved, reduction, "big.py")
    assert (restored.status, restored.new_source) == ("failed", None)
    assert restored.reason == "large file: a rewrite moved statements around elided code; file left unchanged"
    assert [f.code for f in restored.findings] == ["NPU101", "NPU002"]
    assert not any(f.applied for f in restored.findings)


@pytest.fixture
def small_threshold(monkeypatch):
    """Files above 600 bytes go statement by statement."""
    monkeypatch.setattr(large_files, "LARGE_FILE_BYTES", 600)


def filler(count: int, start: int = 0) -> str:
    return "".join(
        f"@staticmethod\ndef helper_{i}(x, y=[1, 2]):\n    '''Helper {i} # not here.'''\n    return x * {i}\n\n\n"
        for i in range(start, start + count)
    )


LARGE = (
    '"""A module."""\nimport os\nimport torch\n\n\n'
    + filler(8)
    + "device = 'cuda'\nmodel = torch.nn.Linear(2, 2).cuda()\n\n\n"
    + filler(8, 8)
    + "def train(x):\n    torch.cuda.synchronize()\n    return x.to(device)\n\n\n"
    + filler(8, 16)
    + "if __name__ == '__main__':\n    train(torch.ones(1).cuda())\n"
)


def key(result: FileResult) -> list[tuple]:
    return [(f.line, f.column, f.end_line, f.end_column, f.code, f.message, f.applied) for f in result.findings]


VARIANTS = {
    "LF": LARGE,
    "CRLF": LARGE.replace("\n", "\r\n"),
    "BOM, a first statement elided": "\ufeff" + filler(1, 90) + LARGE.replace('"""A module."""\n', ""),
    "file directive between elided statements": LARGE.replace(
        "def helper_3(", "# cuda2npu: noqa: NPU101\ndef helper_3("
    ),
    "file directive in an elided statement": LARGE.replace(
        "    return x * 20", "    # ruff: noqa: NPU101\n    return x * 20"
    ),
    # SpinQuant's 1.98 MB hadamard_utils.py (rounds 33, 34): `hadamard_matrix(had_dim, "cuda")` calls a helper
    # whose device parameter only its kept definition shows
    "a helper taking a device": LARGE.replace(
        "def helper_12(", "def hadamard(size, device):\n    return torch.eye(size).to(device)\n\n\ndef helper_12("
    ).replace("    return x.to(device)\n", '    return x.to(device) @ hadamard(2, "cuda")\n'),
}


@pytest.mark.parametrize("fix", [False, True], ids=["check", "migrate"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_statement_wise_agrees_with_whole_file(monkeypatch, fix, variant):
    source = VARIANTS[variant].encode()
    whole = migrate_source(source, "big.py", Options(fix=fix))
    monkeypatch.setattr(large_files, "LARGE_FILE_BYTES", 600)
    wise = migrate_source(source, "big.py", Options(fix=fix))
    assert whole.warnings == []
    assert len(wise.warnings) == 1 and wise.warnings[0].startswith("big.py: 0.0 MB: analysed statement by statement (")
    assert key(wise) == key(whole) and key(whole)
    assert (wise.status, wise.new_source) == (whole.status, whole.new_source)


def test_warning(small_threshold):
    result = migrate_source(LARGE.encode(), "big.py", Options(fix=False))
    assert result.warnings == [
        "big.py: 0.0 MB: analysed statement by statement (7 of 31 top-level statements: the imports and those "
        "naming a rule's trigger; libcst needs about 1 GB per MB parsed); names bound in the other statements are "
        "not followed"
    ]


def test_warning_kept_next_to_the_noqa_warnings(small_threshold, tmp_path):
    """The runner adds its malformed-noqa warnings to the statement-wise one (it does not replace it)."""
    path = tmp_path / "big.py"
    path.write_text(LARGE + "y = 1  # noqa:\n")
    result = process_file(path, "big.py", Options(fix=False))
    assert [w.split(":")[0] for w in result.warnings] == ["big.py", "Invalid `# noqa` directive on big.py"]


def test_at_the_threshold_the_whole_file(monkeypatch):
    monkeypatch.setattr(large_files, "LARGE_FILE_BYTES", len(LARGE.encode()))
    assert migrate_source(LARGE.encode(), "big.py", Options(fix=False)).warnings == []
    monkeypatch.setattr(large_files, "LARGE_FILE_BYTES", len(LARGE.encode()) - 1)
    assert migrate_source(LARGE.encode(), "big.py", Options(fix=False)).warnings != []


def test_whole_file_where_statements_cannot_be_told_apart(small_threshold):
    source = (LARGE + "x = (\n").encode()
    result = migrate_source(source, "big.py", Options(fix=False))
    assert (result.status, result.warnings) == ("failed", [])
    assert [(f.code, f.line) for f in result.findings] == [("NPU001", LARGE.count("\n") + 1)]


def test_whole_file_where_the_reduced_text_does_not_parse(small_threshold, monkeypatch):
    """A syntax error in a kept statement: the whole file is parsed, the error is CPython's; a file
    too large to parse whole gets the error found in the reduced text, at the file's line."""
    source = LARGE.replace("device = 'cuda'", "device = 'cuda' +").encode()
    line = LARGE[: LARGE.index("device =")].count("\n") + 1
    result = migrate_source(source, "big.py", Options(fix=False))
    assert (result.status, result.warnings) == ("failed", [])
    assert [(f.code, f.line) for f in result.findings] == [("NPU001", line)]
    monkeypatch.setattr(large_files, "MAX_PARSED_BYTES", len(source) - 1)
    result = migrate_source(source, "big.py", Options(fix=False))
    assert result.status == "failed" and result.reason.startswith("cannot parse: ")
    assert [(f.code, f.line) for f in result.findings] == [("NPU001", line)]


def test_refused_above_the_parse_limit(small_threshold, monkeypatch):
    monkeypatch.setattr(large_files, "MAX_PARSED_BYTES", 100)
    result = migrate_source(LARGE.encode(), "big.py", Options())
    assert result.status == "failed" and result.new_source is None
    assert [f.code for f in result.findings] == ["NPU001"]
    assert result.reason.startswith("cannot analyse: its statements to analyse come to 0.0 MB, above the 0 MB limit")
    assert result.reason.endswith(
        "(libcst needs about 1 GB of memory per MB parsed); split the file, or leave it out (--extend-exclude)"
    )
    unsplittable = migrate_source((LARGE + "x = (\n").encode(), "big.py", Options())
    assert unsplittable.reason.startswith("cannot analyse: its statements cannot be told apart, and it has 0.0 MB")


def generated(megabytes: float) -> str:
    """A module of ``megabytes`` with one ``.cuda()`` near its start."""
    head = '"""Generated."""\n\nimport torch\n\n\n' + filler(40) + "model = torch.nn.Linear(4, 4).cuda()\n\n\n"
    body = filler(int(megabytes * (1 << 20)) // 90, 40)
    return head + body


@pytest.mark.slow  # about 4 s: two runs of the command line on 2 MB
def test_generated_large_file_through_the_cli(tmp_path):
    source = generated(2).encode()
    assert len(source) > 2 * 10**6
    path = tmp_path / "big.py"
    path.write_bytes(source)
    line = source[: source.index(b"model = ")].count(b"\n") + 1

    checked = cuda2npu("check", "--no-cache", "--output-format", "concise", path)
    assert checked.returncode == 1, checked.stderr
    assert f"big.py:{line}:31: NPU101" in checked.stdout
    assert "MB: analysed statement by statement (3 of " in checked.stderr

    migrated = cuda2npu("migrate", "--no-cache", path)
    assert migrated.returncode == 0, migrated.stderr
    expected = source.replace(b"import torch\n", b"import torch\nimport torch_npu\n", 1).replace(
        b"Linear(4, 4).cuda()", b"Linear(4, 4).npu()"
    )
    assert path.read_bytes() == expected
