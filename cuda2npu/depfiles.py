"""Dependency files: requirements*.txt, pyproject.toml, setup.cfg and setup.py.

Reported (``check``) and, under ``migrate``, rewritten:

- NPU701 ``cuda-only-dependency``: apex, flash-attn, transformer-engine, xformers, triton,
  bitsandbytes, pycuda, cupy-cuda*, pynvml/nvidia-ml-py and nvidia-* runtime wheels. ``migrate``
  removes the requirement when no file of the run imports its module any more (after migration);
  otherwise it is only reported, naming the files that still import it. apex is left alone under
  ``--apex ascend`` (Ascend's apex fork keeps the name).
- NPU702 ``cuda-torch-wheel``: CUDA builds of torch/torchvision/torchaudio (``+cu118`` local
  versions, ``download.pytorch.org/whl/cu121`` index URLs): the ``+cuXXX`` tag is dropped and the
  index becomes ``/whl/cpu`` (torch_npu runs on the CPU build of torch).
- NPU703 ``torch-npu-not-declared``: the file declares torch, not torch_npu, and the migrated code
  imports torch_npu: ``torch_npu`` is added after torch, pinned to the release matching an exact
  torch pin per the compatibility table of ../shared/reference/torch_npu_api.md §7.

Edits are textual (the rest of each file stays byte-for-byte as it was); a ``# noqa: NPU701``
comment on the requirement's line suppresses it. Imports are looked up in the Python files and
notebooks of the same run. Poetry's ``[tool.poetry.dependencies]`` tables are not read.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from cuda2npu.catalogue import rule as rule_doc
from cuda2npu.diagnostics import FileResult, Finding, Tier

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CUDA_ONLY_CODE, WHEEL_CODE, MISSING_CODE = "NPU701", "NPU702", "NPU703"

# torch release -> newest torch_npu package for it (../shared/reference/torch_npu_api.md §7).
TORCH_NPU_FOR_TORCH = {
    "2.12.0": "2.12.0",
    "2.11.0": "2.11.0",
    "2.10.0": "2.10.0.post4",
    "2.9.0": "2.9.0.post6",
    "2.8.0": "2.8.0.post4",
    "2.7.1": "2.7.1.post8",
    "2.6.0": "2.6.0.post5",
    "2.5.1": "2.5.1.post1",
    "2.4.0": "2.4.0.post4",
    "2.3.1": "2.3.1.post6",
    "2.1.0": "2.1.0.post17",
}

# normalized distribution name (or prefix ending in "*") -> (imported modules, advice)
CUDA_ONLY = {
    "apex": (("apex",), "Ascend keeps apex only as its own fork (built from source; see --apex ascend)"),
    "flash-attn*": (("flash_attn", "flash_attn_interface"), "use torch_npu.npu_fusion_attention (cuda2npu migrates flash_attn calls)"),
    "transformer-engine*": (("transformer_engine",), "TransformerEngine has no Ascend build; cuda2npu migrates its modules to torch/torch_npu"),
    "xformers": (("xformers",), "xformers has no Ascend build; use F.scaled_dot_product_attention or torch_npu.npu_fusion_attention"),
    "triton": (("triton",), "CUDA Triton does not target Ascend (Ascend's port is triton-ascend)"),
    "bitsandbytes": (("bitsandbytes",), "bitsandbytes' kernels are CUDA; check its multi-backend support before keeping it"),
    "pycuda": (("pycuda",), "PyCUDA needs a CUDA device"),
    "cupy-cuda*": (("cupy",), "CuPy's CUDA wheels need a CUDA device"),
    "cupy": (("cupy",), "CuPy needs a CUDA device"),
    "pynvml": (("pynvml",), "NVML queries NVIDIA GPUs; use npu-smi on Ascend"),
    "nvidia-ml-py*": (("pynvml",), "NVML queries NVIDIA GPUs; use npu-smi on Ascend"),
    "nvidia-modelopt*": (("modelopt",), "NVIDIA's model optimizer targets CUDA GPUs"),
    "nvidia-resiliency-ext": (("nvidia_resiliency_ext",), "NVIDIA's fault-tolerance extension targets CUDA clusters"),
    "nvidia-cudnn-frontend": (("cudnn",), "the cuDNN frontend needs CUDA"),
    "nvidia-*": (("nvidia",), "an NVIDIA CUDA runtime wheel; CANN provides the runtime on Ascend"),
}
NOT_CUDA = {"nvidia-sphinx-theme"}  # matched by a pattern above but not CUDA software
TORCH_FAMILY = {"torch", "torchvision", "torchaudio"}
CUDA_LOCAL = re.compile(r"\+cu\d+")
CUDA_INDEX = re.compile(r"(download\.pytorch\.org/whl/(?:nightly/)?)cu\d+")
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", re.S)
PIN = re.compile(r"^==\s*v?(\d+(?:\.\d+)*)(?:\+[\w.]+)?\s*(?:;.*)?$")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cuda_only(name: str) -> tuple[tuple[str, ...], str] | None:
    name = normalize(name)
    if name in NOT_CUDA:
        return None
    for pattern, info in CUDA_ONLY.items():
        if pattern.endswith("*") and name.startswith(pattern[:-1]) or name == pattern:
            return info
    return None


def is_requirements_file(path: Path) -> bool:
    return path.suffix == ".txt" and (path.name.startswith("requirements") or path.parent.name == "requirements")


def is_dependency_file(path: Path) -> bool:
    return is_requirements_file(path) or path.name in ("pyproject.toml", "setup.cfg")


def is_project_file(path: Path) -> bool:
    """Non-Python files handled here or by cuda2npu/shellscripts.py (not by the engine)."""
    from cuda2npu.shellscripts import is_shell_script

    return is_dependency_file(path) or is_shell_script(path)


# --- requirements found in a file --------------------------------------------------------------


@dataclass
class Dep:
    """One requirement string in a file: ``start:end`` is the text to replace (the literal with
    its quotes for TOML/Python, the requirement for line formats)."""

    requirement: str
    start: int
    end: int
    line: int
    column: int
    literal: bool  # a quoted element of a list (TOML, setup.py) rather than a whole line
    quote: str = ""

    @property
    def name(self) -> str:
        match = REQUIREMENT.match(self.requirement)
        return normalize(match.group(1)) if match else ""

    @property
    def spec(self) -> str:
        match = REQUIREMENT.match(self.requirement)
        return match.group(3) if match else ""


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _line_deps(text: str, lines: list[tuple[int, str]]) -> list[Dep]:
    """Requirements in a line format: (offset of line, line text without newline) pairs."""
    deps = []
    for offset, line in lines:
        body = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        stripped = body.strip()
        if not stripped or stripped.startswith("-") or stripped.endswith("\\"):
            continue
        start = offset + line.index(stripped)
        deps.append(Dep(stripped, start, start + len(stripped), *_line_col(text, start), literal=False))
    return deps


def _physical_lines(text: str) -> list[tuple[int, str]]:
    result, offset = [], 0
    for raw in text.splitlines(keepends=True):
        result.append((offset, raw.rstrip("\r\n")))
        offset += len(raw)
    return result


def requirements_txt(text: str) -> list[Dep]:
    return _line_deps(text, _physical_lines(text))


def setup_cfg(text: str) -> list[Dep]:
    """``install_requires`` / ``extras_require`` values of ``[options]`` sections."""
    lines = _physical_lines(text)
    selected: list[tuple[int, str]] = []
    section, in_value = "", False
    for offset, line in lines:
        header = re.match(r"^\s*\[([^\]]+)\]", line)
        if header:
            section, in_value = header.group(1).strip(), False
            continue
        key = re.match(r"^([A-Za-z_][\w.-]*)\s*[=:]\s*(.*)$", line)
        if key and not line[:1].isspace():
            name = key.group(1)
            in_value = (section == "options" and name in ("install_requires", "setup_requires")) or section == "options.extras_require"
            if in_value and key.group(2).strip():
                value_start = offset + key.start(2)
                selected.append((value_start, key.group(2)))
            continue
        if in_value and line[:1].isspace():
            selected.append((offset, line))
        elif line.strip():
            in_value = False
    return _line_deps(text, selected)


def _string_literals(text: str, value: str, spans: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    found = []
    for quote in ('"', "'"):
        literal = f"{quote}{value}{quote}"
        start = text.find(literal)
        while start >= 0:
            if any(a <= start < b for a, b in spans):
                found.append((start, start + len(literal), quote))
            start = text.find(literal, start + 1)
    return found


def pyproject_toml(text: str) -> list[Dep]:
    data = tomllib.loads(text)
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    values: list[str] = list(project.get("dependencies", []) or [])
    for group in (project.get("optional-dependencies") or {}).values():
        values += list(group or [])
    for group in (data.get("dependency-groups") or {}).values():
        values += [v for v in group or [] if isinstance(v, str)]
    headers = [(m.start(), m.group(1).strip()) for m in re.finditer(r"(?m)^\s*\[+([^\[\]]+)\]+", text)] + [(len(text), "")]
    spans = [
        (start, headers[i + 1][0])
        for i, (start, name) in enumerate(headers[:-1])
        if name in ("project", "project.optional-dependencies", "dependency-groups")
    ]
    deps, seen = [], set()
    for value in dict.fromkeys(v for v in values if isinstance(v, str)):
        for start, end, quote in _string_literals(text, value, spans):
            if start not in seen:
                seen.add(start)
                deps.append(Dep(value, start, end, *_line_col(text, start), literal=True, quote=quote))
    return sorted(deps, key=lambda d: d.start)


def setup_py(text: str) -> list[Dep]:
    """String elements of ``install_requires``/``extras_require`` (directly or via a module-level name)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    assigned = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    line_offsets = [0]
    for raw in text.splitlines(keepends=True):
        line_offsets.append(line_offsets[-1] + len(raw))
    lines = text.splitlines(keepends=True)

    def offset(lineno: int, col_bytes: int) -> int:
        prefix = lines[lineno - 1].encode("utf-8")[:col_bytes].decode("utf-8", "replace")
        return line_offsets[lineno - 1] + len(prefix)

    def elements(node) -> list[ast.Constant]:
        if isinstance(node, ast.Name) and node.id in assigned:
            node = assigned[node.id]
        if isinstance(node, (ast.List, ast.Tuple)):
            return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if isinstance(node, ast.Dict):
            return [e for value in node.values for e in elements(value)]
        return []

    deps = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name != "setup":
            continue
        for keyword in node.keywords:
            if keyword.arg in ("install_requires", "extras_require"):
                for element in elements(keyword.value):
                    start = offset(element.lineno, element.col_offset)
                    end = offset(element.end_lineno, element.end_col_offset)
                    source = text[start:end]
                    quote = source[:1]
                    if quote not in ("'", '"') or source != f"{quote}{element.value}{quote}":
                        continue  # prefixed, escaped, triple-quoted or concatenated literals are left alone
                    deps.append(Dep(element.value, start, end, *_line_col(text, start), literal=True, quote=quote))
    return sorted(deps, key=lambda d: d.start)


def dependencies(path_name: str, text: str) -> list[Dep]:
    if path_name == "pyproject.toml":
        return pyproject_toml(text)
    if path_name == "setup.cfg":
        return setup_cfg(text)
    if path_name == "setup.py":
        return setup_py(text)
    return requirements_txt(text)


# --- edits -----------------------------------------------------------------------------------


def _line_bounds(text: str, offset: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, (len(text) if end < 0 else end + 1)


def _remove(text: str, dep: Dep) -> tuple[int, int, str]:
    line_start, line_end = _line_bounds(text, dep.start)
    before, after = text[line_start:dep.start], text[dep.end:line_end]
    alone = not before.strip() and re.fullmatch(r"\s*,?\s*(#.*)?\s*", after) is not None
    if not dep.literal or alone:
        return line_start, line_end, ""
    following = re.match(r"\s*,\s*", text[dep.end:])
    if following:
        return dep.start, dep.end + following.end(), ""
    preceding = re.search(r",\s*$", text[:dep.start])
    return (preceding.start() if preceding else dep.start), dep.end, ""


def _insert_after(text: str, dep: Dep, requirement: str) -> list[tuple[int, int, str]]:
    line_start, line_end = _line_bounds(text, dep.start)
    indent = re.match(r"[ \t]*", text[line_start:]).group(0)
    newline = "\r\n" if text[line_start:line_end].endswith("\r\n") else "\n"
    if not dep.literal:
        ending = text[line_start:line_end]
        if not ending.endswith("\n"):
            return [(line_end, line_end, newline + indent + requirement)]
        return [(line_end, line_end, indent + requirement + newline)]
    literal = f"{dep.quote}{requirement}{dep.quote}"
    after = text[dep.end:line_end]
    if text[line_start:dep.start].strip() == "" and re.fullmatch(r"\s*,?\s*(#.*)?\s*", after):
        has_comma = after.lstrip().startswith(",")
        edits = [] if has_comma else [(dep.end, dep.end, ",")]
        return edits + [(line_end, line_end, f"{indent}{literal}{',' if has_comma else ''}{newline}")]
    return [(dep.end, dep.end, f", {literal}")]


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply edits from the end; an edit reaching into a later one (two neighbours removed from
    one inline list share a comma) is clipped at it."""
    limit = len(text)
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        end = min(end, limit)
        text = text[:start] + replacement + text[end:]
        limit = start
    return text


# --- the check -------------------------------------------------------------------------------


IMPORT = re.compile(r'(?m)(?:^|[;:"]|\\n)[ \t]*(?:from|import)[ \t]+([A-Za-z_]\w*)')
IMPORT_MODULE = re.compile(r"import_module\(\s*[\"']([A-Za-z_]\w*)")


def imported_modules(text: str) -> set[str]:
    """Top-level modules a Python file or notebook JSON imports (a generous regex scan)."""
    return set(IMPORT.findall(text)) | set(IMPORT_MODULE.findall(text))


@dataclass
class ProjectImports:
    """Who imports what, over the Python files and notebooks of the run (after migration)."""

    by_module: dict[str, list[str]]
    will_import_torch_npu: bool

    def importers(self, modules: tuple[str, ...]) -> list[str]:
        return sorted({p for m in modules for p in self.by_module.get(m, [])})


def _noqa_lines(text: str) -> dict[int, object]:
    from cuda2npu.noqa import parse_comment

    directives = {}
    for number, line in enumerate(text.splitlines(), start=1):
        for match in re.finditer("#", line):
            directive = parse_comment(line[match.start():], number, match.start())
            if directive is not None:
                directives[number] = directive
                break
    return directives


def check_text(name: str, text: str, display: str, options, imports: ProjectImports) -> tuple[list[Finding], str]:
    """(findings, new text) for one dependency file."""
    deps = dependencies(name, text)
    noqa = _noqa_lines(text)
    findings: list[Finding] = []
    edits: list[tuple[int, int, str]] = []

    def report(code: str, line: int, column: int, message: str, fix=None, tier: Tier | None = None) -> None:
        doc = rule_doc(code)
        if not options.code_enabled(code, doc.opt_in):
            return
        directive = noqa.get(line)
        if directive is not None and directive.matches(code):
            return
        tier = tier or doc.tier
        fixable = fix is not None and tier <= options.max_tier
        applied = fixable and options.fix
        if applied:
            edits.extend(fix)
        findings.append(Finding(display, line, column, code, doc.name, message, tier, fixable, applied))

    names = {d.name for d in deps}
    removed: set[int] = set()
    for dep in deps:
        info = cuda_only(dep.name)
        if info is not None and not (dep.name == "apex" and options.apex == "ascend"):
            modules, advice = info
            users = imports.importers(modules)
            if users:
                shown = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
                report(CUDA_ONLY_CODE, dep.line, dep.column, f"`{dep.name}` is CUDA-only ({advice}); still imported by {shown}")
            else:
                report(CUDA_ONLY_CODE, dep.line, dep.column, f"`{dep.name}` is CUDA-only ({advice}) and not imported by any checked file: remove it", [_remove(text, dep)])
                removed.add(dep.start)
        elif dep.name in TORCH_FAMILY and CUDA_LOCAL.search(dep.requirement):
            new = CUDA_LOCAL.sub("", dep.requirement)
            literal = f"{dep.quote}{new}{dep.quote}" if dep.literal else new
            report(WHEEL_CODE, dep.line, dep.column, f"`{dep.requirement}` is a CUDA build of {dep.name}: use the CPU build (`{new}`) with torch_npu", [(dep.start, dep.end, literal)])
        elif dep.name in TORCH_FAMILY and ("%2Bcu" in dep.requirement or "+cu" in dep.requirement):
            report(WHEEL_CODE, dep.line, dep.column, f"`{dep.requirement}` points at a CUDA wheel of {dep.name}: install the CPU build with torch_npu")
    if name != "setup.py" and name != "pyproject.toml" and name != "setup.cfg":
        for offset, line in _physical_lines(text):
            match = CUDA_INDEX.search(line)
            if match and re.match(r"\s*(-i|--index-url|--extra-index-url|-f|--find-links)\b", line):
                start = offset + match.start()
                new_line = CUDA_INDEX.sub(r"\1cpu", line)
                report(WHEEL_CODE, *_line_col(text, start), "a CUDA package index of PyTorch: torch_npu needs the CPU build (`/whl/cpu`)", [(offset, offset + len(line), new_line)])
    torch = next((d for d in deps if d.name == "torch"), None)
    if torch is not None and not names & {"torch-npu"} and imports.will_import_torch_npu:
        pin = PIN.match(CUDA_LOCAL.sub("", torch.spec).strip())
        version = TORCH_NPU_FOR_TORCH.get(pin.group(1)) if pin else None
        marker = torch.spec.split(";", 1)[1].strip() if ";" in torch.spec else ""
        requirement = f"torch_npu=={version}" if version else "torch_npu"
        if marker:
            requirement += f"; {marker}"
        if version:
            message = f"torch_npu is imported but not declared: add `{requirement}` (the release for torch {pin.group(1)})"
        elif pin:
            message = f"torch_npu is imported but not declared: add it (no torch_npu release is documented for torch {pin.group(1)}; pin one by hand)"
        else:
            message = "torch_npu is imported but not declared: add it (pin torch exactly to get the matching torch_npu pin)"
        report(MISSING_CODE, torch.line, torch.column, message, _insert_after(text, torch, requirement))
    return findings, apply_edits(text, edits) if edits else text


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError:
        return None


def _encode(text: str, original: bytes) -> bytes:
    return (b"\xef\xbb\xbf" if original.startswith(b"\xef\xbb\xbf") else b"") + text.encode("utf-8")


def project_imports(directory: Path, results: list[FileResult], by_name: dict[str, Path]) -> ProjectImports:
    """Imports of every Python file and notebook under ``directory`` (the dependency file's
    project), read after migration: files this run rewrote count with their new text. The whole
    project is scanned, not only the files of the run, so that a hook given a few staged files
    never removes a requirement that other files still import."""
    from cuda2npu.discovery import discover

    migrated = {}
    names = {path.resolve(): name for name, path in by_name.items()}
    fixable = False
    for result in results:
        path = by_name.get(result.path)
        if path is None:
            continue
        if path.suffix in (".py", ".pyi", ".ipynb"):  # migrate adds `import torch_npu` where it fixes code
            fixable |= any(f.fixable and not f.code.startswith("NPU0") for f in result.findings)
        if result.new_source is not None:
            migrated[path.resolve()] = (result.path, result.new_source)
    by_module: dict[str, list[str]] = {}
    for path in discover([directory]).files:
        if path.suffix not in (".py", ".pyi", ".ipynb"):
            continue
        display, data = migrated.get(path.resolve(), (None, None))
        if data is None:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            display = names.get(path.resolve()) or path.relative_to(directory).as_posix()
        for module in imported_modules(data.decode("utf-8", "replace")):
            by_module.setdefault(module, []).append(display)
    return ProjectImports(by_module, "torch_npu" in by_module or fixable)


def finish_run(results: list[FileResult], names: dict[Path, str], options, summary) -> list[FileResult]:
    """Add the dependency files and shell scripts of a run to its results (after the Python files).

    ``names`` maps every discovered path to its display name. setup.py results are extended in
    place; other files produce a result only when they have findings. The summary is recomputed.
    """
    from cuda2npu.report import Summary
    from cuda2npu.shellscripts import check_shell_script, is_shell_script

    by_name = {name: path for path, name in names.items()}
    extra = [path for path in names if is_project_file(path)]
    setups = [r for r in results if by_name.get(r.path) is not None and by_name[r.path].name == "setup.py"]
    if not extra and not setups:
        return results
    cache: dict[Path, ProjectImports] = {}

    def imports_for(path: Path) -> ProjectImports:
        directory = path.parent.parent if path.parent.name == "requirements" else path.parent
        if directory.resolve() not in cache:
            cache[directory.resolve()] = project_imports(directory, results, by_name)
        directory = directory.resolve()
        return cache[directory]

    for path in extra:
        display = names[path]
        file_options = options.for_path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            from cuda2npu.runner import io_error

            results.append(io_error(display, exc))
            continue
        text = _text(data)
        if text is None:
            continue
        if is_shell_script(path):
            findings = check_shell_script(text, display, file_options)
            if findings:
                results.append(FileResult(display, "unchanged", findings=findings))
            continue
        try:
            findings, new_text = check_text(path.name, text, display, file_options, imports_for(path))
        except (ValueError, tomllib.TOMLDecodeError):
            continue  # a malformed pyproject.toml is not ours to report
        if new_text != text:
            results.append(FileResult(display, "changed", findings=findings, new_source=_encode(new_text, data)))
        elif findings:
            results.append(FileResult(display, "unchanged", findings=findings))
    for result in setups:
        path = by_name[result.path]
        if result.status == "failed":
            continue
        try:
            data = result.new_source if result.new_source is not None else path.read_bytes()
        except OSError:
            continue
        text = _text(data)
        if text is None:
            continue
        findings, new_text = check_text("setup.py", text, result.path, options.for_path(path), imports_for(path))
        if findings:
            result.findings = sorted([*result.findings, *findings], key=Finding.sort_key)
            if result.status == "skipped":
                result.status, result.reason = "unchanged", ""
        if new_text != text:
            result.status, result.new_source = "changed", _encode(new_text, data)
    fresh = Summary()
    for result in results:
        fresh.add(result)
    summary.__dict__.update(fresh.__dict__)
    return results
