"""The programs a shell launch script runs, read word by word (cuda2npu/filekinds/shellscripts.py
reports what they find): one code per decision, whatever the file kind.

- ``pip install flash-attn==2.5.9 --no-build-isolation`` (NPU701, as in a requirements file): a
  distribution of rules/tables/cuda_only_packages.toml, or an ``nvidia-*`` one the table does not
  know; reported and kept (whether the script still needs it is the project's call), marked (the
  CUDA-only ones a command installs in one finding, listed with their reasons). A
  requirement given as a URL (``pip install "git+https://github.com/stanford-futuredata/megablocks.git"``,
  ``-e git+...#egg=apex``, a wheel URL) is read for the distribution it installs
  (cuda2npu/filekinds/requirement_urls.py); a source build of vLLM
  (``git+https://github.com/vllm-project/vllm.git``) is NPU701 too, unless the script sets
  ``VLLM_TARGET_DEVICE``; so is a build of apex's CUDA extensions (``python setup.py install
  --cuda_ext``, ``pip install --config-settings "--build-option=--cuda_ext" ./``,
  ``APEX_CUDA_EXT=1 pip install .``), whatever the directory it builds. A distribution the table
  gives an NPU build of is renamed to it (``pip install onnxruntime-gpu==1.21.0`` →
  ``onnxruntime==1.21.0``).
- ``pip install vllm==0.6.5`` (NPU705, as in a dependency file): a release older than the first
  that runs on an NPU (rules/tables/npu_first_releases.toml; not transformers, whose entry depends
  on what the project's code uses): kept, marked.
- ``python -c 'import torch; print(torch.cuda.device_count())'`` (NPU103, as in Python): that exact
  code becomes ``import torch, torch_npu; print(torch.npu.device_count())``; other inline code
  calling ``torch.cuda`` is a manual item (any of it a review item, kept, under ``--portable``).
- ``pip install torch --index-url https://download.pytorch.org/whl/cu121`` (NPU702, as in a
  requirements file): the index becomes ``/whl/cpu`` (torch_npu runs on the CPU build of torch), and
  a CUDA build's local version drops (``torch==2.11.0+cu129`` → ``torch==2.11.0``, which the CPU
  index serves as ``2.11.0+cpu``); a version read from a variable there is marked (review), a CUDA
  wheel's URL too (manual).
- ``conda install pytorch-cuda=12.1 -c nvidia`` (NPU702, as in an environment file): conda's
  ``pytorch-cuda`` / ``cudatoolkit`` / ``cuda-toolkit`` select a CUDA build of pytorch; reported, marked.
- ``apt-get install libcudnn8 cuda-cupti-11-7`` (also ``apt``, ``yum``, ``dnf``, ``microdnf``,
  ``zypper``, ``apk add``; versions from variables too, ``cuda-toolkit-${CUDA_VERSION}``; NPU714, manual, as ``module load cuda``): CUDA toolkit and library packages of
  NVIDIA's repository (``cuda-*``, ``libcudnn*``, ``libnccl*``, ``libcublas*``, ``libnvinfer*``,
  ``nvidia-*``, ...): on a CANN base image they do not exist; one finding per command.
- ``docker run --gpus all`` / ``--runtime nvidia`` / ``nvidia-docker run`` (NPU715, manual): no
  NPU is passed to the container.
- Slurm GPU requests (NPU716, review): ``--gres=gpu:N`` anywhere; ``--gpus``, ``--gpus-per-node``
  (``-task``, ``-socket``), ``-G`` and the options sized per GPU (``--ntasks-per-gpu``, ``--cpus-per-gpu``,
  ``--mem-per-gpu``) in ``#SBATCH`` lines and ``srun`` / ``sbatch`` / ``salloc`` commands.
- ``lmdeploy serve api_server MODEL`` / ``lmdeploy serve gradio`` / ``lmdeploy chat`` (also
  ``python -m lmdeploy ...``) without ``--device ascend`` (NPU935, review): lmdeploy's CUDA engine
  (TurboMind), or its PyTorch engine on device ``cuda``; marked, kept (the model must also be in
  lmdeploy's Ascend list).

docs/reference/launch_scripts.md has the Ascend docker and Slurm facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuda2npu.analysis.cuda_only_modules import cuda_only_distribution, normalize_distribution, unknown_nvidia
from cuda2npu.core.diagnostics import Tier
from cuda2npu.filekinds.distribution_facts import predates_npu, replacement
from cuda2npu.filekinds.requirement_urls import built_from_source, source_build, url_requirement
from cuda2npu.filekinds.shell_lines import ShellLine, ShellWord, shell_commands, simple_commands
from cuda2npu.filekinds.torch_index import (
    CONDA_CUDA,
    CUDA_INDEX,
    CUDA_LOCAL,
    CUDA_WHEEL,
    NIGHTLY_NOTE,
    TORCH_FAMILY,
    conda_cuda_note,
    cpu_build,
    cpu_index,
    nightly,
)

# pip install options that take the next word as their value (unless written `--opt=value`)
INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")
# a package index named for CUDA builds other than PyTorch's (onnxruntime's `.../onnxruntime-cuda-12/pypi/simple`)
CUDA_FEED = re.compile(r"cuda|/cu\d+|gpu", re.I)
PIP_VALUED = frozenset(
    "-r --requirement -c --constraint -e --editable -t --target --platform --python-version --implementation "
    "--abi --root --prefix --src --upgrade-strategy -C --config-settings --global-option --install-option "
    "--no-binary --only-binary --progress-bar -i --index-url --extra-index-url -f --find-links --log --proxy "
    "--retries --timeout --exists-action --trusted-host --cert --client-cert --cache-dir --report --python "
    "--keyring-provider --root-user-action --use-feature --use-deprecated --group".split()
)
DISTRIBUTION = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?=$|[\[<>=!~;@ ])")
NAME_AND_EXTRAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?")
PYTHON = re.compile(r"(?:.*/)?python[\d.]*")
SHELLS = frozenset({"bash", "sh", "zsh", "dash"})  # `bash -c "..."`: a command string
LEADING_WORDS = frozenset({"RUN", "sudo", "exec", "nohup", "time"})  # before the program a command runs
PIP = re.compile(r"(?:.*/)?pip[\d.]*")
CONDA = re.compile(r"(?:.*/)?(?:conda|mamba|micromamba)")
DOCKER = re.compile(r"(?:.*/)?(?:nvidia-docker|docker|podman)")
SLURM = re.compile(r"(?:.*/)?(?:srun|sbatch|salloc)")
LMDEPLOY = re.compile(r"(?:.*/)?lmdeploy")
SYSTEM_PACKAGER = re.compile(r"(?:.*/)?(?:apt|apt-get|yum|dnf|microdnf|zypper|apk)")
# the packages of NVIDIA's CUDA repositories (a version after `=` / `-` kept): not `libcupt-common`, apt's own
CUDA_SYSTEM_PACKAGE = re.compile(
    r"(?:cuda|libcudnn\d*|libnccl\d*|libcublas|libcufft|libcurand|libcusparse|libcusolver|libcupti|libnvjpeg"
    r"|libnvinfer\d*|libnvonnxparsers\d*|libnvparsers\d*|libnpp|tensorrt|nvidia)(?:[-.=][\w.+:~*-]*)?"
)
LMDEPLOY_COMMANDS = (["serve", "api_server"], ["serve", "gradio"], ["chat"])
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=.*", re.DOTALL)
WRAPPERS = frozenset({"nohup", "exec", "env", "sudo", "time", "setsid", "nice"})  # run the program after them
TORCH_CUDA = re.compile(r"\btorch\.cuda\b")
CUDA_MOVE = re.compile(r"\.cuda\(\)")  # `torch.randn(100).cuda()` in inline Python
TORCH_CUDA_VERSION = re.compile(r"\btorch\.version\.cuda\b")
DEVICE_COUNT = re.compile(r"\s*import torch\s*;\s*print\(\s*torch\.cuda\.device_count\(\)\s*\)\s*;?\s*")
NPU_DEVICE_COUNT = "import torch, torch_npu; print(torch.npu.device_count())"
GRES_GPU = re.compile(r"""(?<![\w-])--gres(?:=|[ \t]+)["']?(?:[^\s"',]*,)*gpu(?::[^\s"',]*)?(?![\w-])""")
# `--gpus`, `--gpus-per-task`, ..., and the options sized per GPU (`--ntasks-per-gpu`, `--cpus-per-gpu`)
GPU_OPTION = re.compile(
    r"(?<![\w-])(?:--gpus(?:-per-(?:node|task|socket))?(?![\w-])|--(?:ntasks|cpus|mem)-per-gpu(?![\w-])|-G(?=[ \t]*[\d$]))"
)
CUDA_EXT = re.compile(r"(?<![\w-])--cuda_ext(?![\w-])")
APEX_CUDA_ENV = re.compile(r"APEX_CUDA_EXT=1")
GPU_WORD = re.compile(r"(?:--gpus(?:-per-(?:node|task|socket))?|--(?:ntasks|cpus|mem)-per-gpu)(?:=.*)?|-G.*")
LAUNCHERS = frozenset({"torchrun", "accelerate", "deepspeed", "bash", "sh"})
SLURM_MESSAGE = (
    "asks Slurm for the GRES named `gpu`: an Ascend cluster names its cards as its slurm.conf declares "
    "(often `npu`), or allocates whole nodes: request them as the cluster does (`scontrol show node` "
    "shows each node's `Gres=`)"
)
LMDEPLOY_TURBOMIND = (
    "runs lmdeploy's default engine, TurboMind, whose compiled CUDA library (`_turbomind`) an NPU host does not "
    "have; lmdeploy then falls back to its PyTorch engine on {device}"
)
LMDEPLOY_PYTORCH = "runs lmdeploy's PyTorch engine on {device}"
LMDEPLOY_ADVICE = (
    "on Ascend run it with `--backend pytorch --device ascend` (lmdeploy >= 0.6.0 with dlinfer-ascend) and check "
    "the model is in lmdeploy's supported list for other platforms"
)
DOCKER_MESSAGE = (
    "passes no NPU to the container: `--gpus` and the nvidia runtime need the NVIDIA Container Toolkit "
    "(not on an Ascend host: docker refuses to start), and a CUDA image has no CANN or torch_npu: pass the "
    "NPUs (`--device /dev/davinciN --device /dev/davinci_manager --device /dev/devmm_svm --device "
    "/dev/hisi_hdc` and the driver mounts, or `ASCEND_VISIBLE_DEVICES` under Ascend Docker Runtime) and run "
    "a CANN image with torch_npu"
)


@dataclass
class Found:
    """One finding of a program's words: ``start``/``end`` are offsets in ``line.code``; ``edit`` is
    the replacement of that span (None: reported only)."""

    line: ShellLine
    start: int
    code: str
    message: str
    tier: Tier | None = None
    end: int = 0
    edit: str | None = None
    cuda_only: tuple[str, str] | None = None  # (requirement, why) of a CUDA-only one kept: one finding per command


def check_programs(command: list[ShellLine], options, script: str = "") -> list[Found]:
    """The findings of the pip, conda, python, docker, Slurm and lmdeploy commands of a script command
    (``script``: the code of the whole script, where a build target may be set)."""
    found: list[Found] = []
    for words in simple_commands(command):
        values = [word.value for word in words]
        apex_build = _apex_cuda_build(words, values)
        found += [apex_build] if apex_build is not None else []
        for index, value in enumerate(values):
            if value is None:
                continue
            if PIP.fullmatch(value) and values[index + 1 : index + 2] == ["install"]:
                found += _pip_install(words[index + 2 :], options, script, apex_build is not None)
            elif CONDA.fullmatch(value) and values[index + 1 : index + 2] == ["install"]:
                found += _conda_install(words[index + 2 :])
            elif SYSTEM_PACKAGER.fullmatch(value) and {"install", "add"} & set(values[index + 1 : index + 4]):
                found += _system_install(words[index + 1 :], value.rpartition("/")[2])
            elif PYTHON.fullmatch(value):
                found += _inline_python(words, values, index, options)
            elif DOCKER.fullmatch(value) and values[index + 1 : index + 2] in (["run"], ["create"]):
                found += _docker(words[index:], values[index:])
            elif (
                LMDEPLOY.fullmatch(value)
                and any(values[index + 1 : index + 1 + len(sub)] == sub for sub in LMDEPLOY_COMMANDS)
                and _runs_program(words[:index], values[:index])
            ):
                found += _lmdeploy(words[index:], values[index:])
            elif SLURM.fullmatch(value):
                found += [
                    _slurm(word.line, word.start, word.text)
                    for word, option in _options(words[index + 1 :], values[index + 1 :])
                    if option is not None and GPU_WORD.fullmatch(option)
                ]
    found += [_slurm(line, match.start(), match.group()) for line in command for match in GRES_GPU.finditer(line.code)]
    for words in simple_commands(command):
        found += _command_string(words, options, script)
    return _one_per_command(found)


def _command_string(words: list[ShellWord], options, script: str) -> list[Found]:
    """The findings of a command run from a quoted string, ``ssh host "python -c '...'"`` or ``bash -c
    "pip install torch==1.13.1+cu116"`` (minRF's per-host CUDA check, round 53; KnowLM's Dockerfile, round
    51), at that string: reported and marked, not edited (the quoting is the outer command's)."""
    while words and words[0].value in LEADING_WORDS:  # a Dockerfile's `RUN`, `sudo`, `exec`
        words = words[1:]
    values = [word.value for word in words]
    program = (values[0] or "").rpartition("/")[2] if values else ""
    if program == "ssh":
        string = words[-1] if len(words) > 2 and words[-1].text[:1] in "'\"" else None
    elif program in SHELLS and "-c" in values[1:-1]:
        string = words[values.index("-c", 1) + 1]
    else:
        return []
    inner = string.value if string is not None else None
    if not inner:
        return []
    return [
        Found(string.line, string.start, item.code, f"in the command string: {item.message}", item.tier)
        for command in shell_commands(inner)
        for item in check_programs(command, options, script)
    ]


def _one_per_command(found: list[Found]) -> list[Found]:
    """``found`` with the CUDA-only requirements a command installs (``pip install nvidia-cublas-cu12
    nvidia-cudnn-cu12 ...``) in one finding listing them, where the first of them was (one marker)."""
    kept = [item for item in found if item.cuda_only is not None]
    if len(kept) < 2:
        return found
    reasons: dict[str, list[str]] = {}
    for item in kept:
        requirement, why = item.cuda_only
        reasons.setdefault(why, []).append(f"`{requirement}`")
    listed = "; ".join(f"{', '.join(names)} ({why})" for why, names in reasons.items())
    message = (
        f"`pip install` of {len(kept)} CUDA-only distributions: {listed}; on an NPU host the install fails or "
        "installs nothing usable (a `set -e` script stops there): drop them, or install them on CUDA hosts only"
    )
    merged = Found(kept[0].line, kept[0].start, "NPU701", message)
    return [merged if item is kept[0] else item for item in found if item is kept[0] or item.cuda_only is None]


def check_sbatch_line(line: ShellLine) -> list[Found]:
    """The Slurm GPU requests of an ``#SBATCH`` directive line."""
    return [
        _slurm(line, match.start(), match.group())
        for pattern in (GRES_GPU, GPU_OPTION)
        for match in pattern.finditer(line.code)
    ]


def _pip_install(words: list[ShellWord], options, script: str, apex_built: bool) -> list[Found]:
    """NPU701 for the CUDA-only distributions a ``pip install`` names (``words``: those after
    ``install``), by name or by URL (``git+https://github.com/<owner>/<repo>.git``, also as the
    value of ``-e``); apex not again where ``apex_built`` (:func:`_apex_cuda_build` reported it)."""
    found = []
    skip = False
    editable = False  # the word is the value of -e
    index = False  # the word is the value of an index option
    torch_builds: list[ShellWord] = []  # the requirements of torch, torchvision, torchaudio
    other_indexes: list[str] = []  # package indexes of CUDA builds, not PyTorch's (:data:`CUDA_FEED`)
    for word in words:
        value = word.value if word.value is not None else word.text.strip("'\"")  # `flash-attn==$V`: its name
        if index or value.startswith(tuple(f"{option}=" for option in INDEX_OPTIONS)):
            found += _cuda_index(word)
            url = value.partition("=")[2] if value.startswith("-") else value
            if CUDA_FEED.search(url) and "download.pytorch.org" not in url:
                other_indexes.append(url)
        index = value in INDEX_OPTIONS
        if skip and not editable:
            skip = False
            continue
        skip = editable = False
        if value.startswith("--editable="):
            value = value.partition("=")[2]
        elif value.startswith("-"):
            skip = value in PIP_VALUED
            editable = value in ("-e", "--editable")
            continue
        item = _requirement_finding(word, value, options, script, apex_built)
        found += [item] if item is not None else []
        url = url_requirement(value)
        match = DISTRIBUTION.match(value) if url is None else None
        if (url.name if url is not None else normalize_distribution(match.group(1)) if match else "") in TORCH_FAMILY:
            torch_builds.append(word)
    # Step-Audio's `onnxruntime-gpu` from onnxruntime's CUDA feed (round 41): renamed, pip would find nothing
    if other_indexes:
        found = [_from_other_index(item, other_indexes[0]) for item in found]
    cpu = any(item.code == "NPU702" and item.edit is not None for item in found)  # the index becomes /whl/cpu
    return found + [item for word in torch_builds if (item := _torch_build(word, cpu)) is not None]


def _from_other_index(item: Found, index: str) -> Found:
    """A rename to the NPU build (``onnxruntime-gpu`` → ``onnxruntime``) in a command installing from a package
    index of CUDA builds, which may serve only the CUDA build: not made, a review item saying so (a PyPI
    mirror serves both: renamed)."""
    if item.code != "NPU701" or item.edit is None:
        return item
    message = (
        f"{item.message}, but this command installs from `{index}`, which may serve only the CUDA build: install "
        "the NPU one from PyPI (drop the index, or the line where another requirement installs it already)"
    )
    return Found(item.line, item.start, item.code, message, Tier.REVIEW)


def _torch_build(word: ShellWord, to_cpu: bool) -> Found | None:
    """NPU702 for a CUDA build of torch, torchvision or torchaudio a ``pip install`` pins
    (``torch==2.11.0+cu129``): its local version dropped, as in a requirements file, so that the pin
    matches what the CPU index (NPU702's fix of ``--index-url .../whl/cu129``) serves, also after a variable
    (``"torch==${V}+cu129"``); marked where that
    cannot be done: a CUDA wheel's URL (manual), or, with the index changed (``to_cpu``), an exact
    version read from a variable (``torch==$TORCH_VERSION``, review: a ``+cu129`` there cannot be installed)."""
    value = word.value
    if value is not None and url_requirement(value) is not None:
        if CUDA_WHEEL.search(value) is None:
            return None
        message = f"`pip install {value}` installs a CUDA wheel: install the CPU build of its release with torch_npu"
        return Found(word.line, word.start, "NPU702", message, Tier.MANUAL)
    if CUDA_LOCAL.search(value if value is not None else word.text):  # also `"torch==${V}+cu129"`
        shown = value if value is not None else word.text.strip("'\"")
        message = f"`{shown}` is a CUDA build: the CPU build (`{cpu_build(shown)}`), which torch_npu runs on"
        return Found(word.line, word.start, "NPU702", message, end=word.end, edit=cpu_build(word.text))
    if value is None and to_cpu and "==" in word.text:
        message = (
            f"`pip install {word.text}` installs from PyTorch's CPU index (`/whl/cpu`): a CUDA build's local "
            "version set in the variable (`+cu129`) matches nothing there; drop it where it is set"
        )
        return Found(word.line, word.start, "NPU702", message, Tier.REVIEW)
    return None


def _requirement_finding(word: ShellWord, value: str, options, script: str, apex_built: bool) -> Found | None:
    """NPU701 for one requirement of a ``pip install``: a CUDA-only distribution (apex neither under
    ``--apex ascend`` nor where ``apex_built``; one the table gives an NPU build of, renamed to it),
    an ``nvidia-*`` one the table does not know, or a source build of one whose build targets CUDA
    unless the script sets its target (vLLM's ``VLLM_TARGET_DEVICE``); NPU705 for a release older
    than the first that runs on an NPU (``vllm==0.6.5``)."""
    url = url_requirement(value)
    match = DISTRIBUTION.match(value) if url is None else None
    name = url.name if url is not None else normalize_distribution(match.group(1)) if match else ""
    if not name:
        return None
    info = cuda_only_distribution(name)
    build = source_build(name)
    new = replacement(name) if match else None
    if info is not None and new is not None:
        direct = "@" in value.split(";", 1)[0]  # `name @ url`: the file it names is the CUDA build
        renamed = NAME_AND_EXTRAS.sub(new, word.text, count=1) if match.group(1) in word.text and not direct else None
        message = f"`pip install {value}`: `{name}` is CUDA-only ({info[1]}) → `{new}`"
        return Found(word.line, word.start, "NPU701", message, end=word.end, edit=renamed)
    if info is not None and not (name == "apex" and (options.apex == "ascend" or apex_built)):
        message = (
            f"`pip install {value}`: `{name}` is CUDA-only ({info[1]}); on an NPU host the install fails or "
            "installs nothing usable (a `set -e` script stops there): drop it, or install it on CUDA hosts only"
        )
        return Found(word.line, word.start, "NPU701", message, cuda_only=(value, info[1]))
    elif unknown_nvidia(name):
        message = f"`pip install {value}`: an NVIDIA distribution cuda2npu does not know: check whether it needs CUDA"
    elif build and built_from_source(value) and not re.search(rf"(?<![\w$]){build['target']}(?:=|[ \t]+\S)", script):
        message = f"`pip install {value}` builds `{name}` from source: {build['advice']}"
    elif match and (too_old := predates_npu(name, value, _specifier(value[match.end(1) :]))) is not None:
        return Found(word.line, word.start, "NPU705", too_old)
    else:
        return None
    return Found(word.line, word.start, "NPU701", message)


def _specifier(rest: str) -> str:
    """The version specifier of what follows a requirement's name (``[audio]==0.6.5; python_version > '3'``)."""
    return re.sub(r"^\s*\[[^\]]*\]", "", rest).split(";", 1)[0].strip()


def _apex_cuda_build(words: list[ShellWord], values: list[str | None]) -> Found | None:
    """NPU701 for a build of apex's CUDA extensions: ``--cuda_ext`` given to ``pip install`` (in
    ``--config-settings`` / ``--global-option``) or to ``setup.py``, or ``APEX_CUDA_EXT=1`` set."""
    builds = any(
        (PIP.fullmatch(value or "") and values[i + 1 : i + 2] == ["install"])
        or (PYTHON.fullmatch(value or "") and (values[i + 1 : i + 2] or [""])[0] in ("setup.py", "./setup.py"))
        for i, value in enumerate(values)
    )
    for word, value in zip(words, values):
        if value is not None and ((builds and CUDA_EXT.search(value)) or APEX_CUDA_ENV.fullmatch(value)):
            advice = cuda_only_distribution("apex")[1]
            message = (
                f"`{value}` builds apex's CUDA extensions (amp_C, fused_layer_norm_cuda, syncbn, ...) with nvcc: "
                f'apex\'s setup.py stops where there is none ("--cuda_ext was requested, but nvcc was not found"); '
                f"`apex` is CUDA-only ({advice}): drop the build, or build it on CUDA hosts only"
            )
            return Found(word.line, word.start, "NPU701", message)
    return None


def _cuda_index(word: ShellWord) -> list[Found]:
    """NPU702 for a PyTorch CUDA package index given to pip (``--index-url .../whl/cu121``): its
    ``/whl/cpu`` counterpart, as in a requirements file."""
    if CUDA_INDEX.search(word.text) is None:
        return []
    if nightly(word.text):
        return [Found(word.line, word.start, "NPU702", NIGHTLY_NOTE, Tier.MANUAL)]
    message = "a CUDA package index of PyTorch: torch_npu needs the CPU build (`/whl/cpu`)"
    return [Found(word.line, word.start, "NPU702", message, end=word.end, edit=cpu_index(word.text))]


def _conda_install(words: list[ShellWord]) -> list[Found]:
    """NPU702 for the conda packages of a ``conda install`` (``words``: those after ``install``) that
    select a CUDA build of pytorch."""
    found = []
    for word in words:
        match = CONDA_CUDA.match(word.value if word.value is not None else word.text.strip("'\""))
        if match is not None:
            message = f"`conda install {match.group(1)}` {conda_cuda_note(match.group(1))}"
            found.append(Found(word.line, word.start, "NPU702", message, Tier.MANUAL))
    return found


def _system_install(words: list[ShellWord], packager: str) -> list[Found]:
    """NPU714 for the CUDA packages of NVIDIA's repositories an ``apt-get install`` (``words``: those
    after the packager) names: one finding, at the first of them, listing them all."""
    cuda = [w for w in words if CUDA_SYSTEM_PACKAGE.fullmatch(w.text.partition("$")[0])]  # `cuda-${VERSION}` too
    if not cuda:
        return []
    listed = ", ".join(f"`{word.text}`" for word in cuda)
    verb = "add" if packager == "apk" else "install"
    message = (
        f"`{packager} {verb}` of CUDA packages from NVIDIA's repository ({listed}): an Ascend base image (CANN) "
        "has no such packages, so the install fails there (and ends a `set -e` script or a `RUN`): drop them; "
        "CANN brings the NPU's libraries"
    )
    return [Found(cuda[0].line, cuda[0].start, "NPU714", message, Tier.MANUAL)]


def _inline_python(words: list[ShellWord], values: list[str | None], index: int, options) -> list[Found]:
    """NPU103 for the ``python -c CODE`` at ``words[index]`` when its code calls ``torch.cuda`` (kept
    under ``--portable``, for CUDA hosts)."""
    for position in range(index + 1, len(words) - 1):
        if values[position] == "-c":
            break
        if values[position] is None or not values[position].startswith("-"):
            return []
    else:
        return []
    word = words[position + 1]
    if not TORCH_CUDA.search(word.text):
        if CUDA_MOVE.search(word.text):
            message = (
                "inline Python moves a tensor or model with `.cuda()`, which raises on an NPU host (no CUDA): "
                "`.npu()` after `import torch_npu`"
            )
            return [Found(word.line, word.start, "NPU101", message, Tier.MANUAL)]
        return []
    quote = word.text[0]
    inner = word.text[1:-1]
    if options.portable:
        message = (
            "inline Python calls `torch.cuda`, kept for CUDA hosts (portable output): on Ascend hosts "
            "`torch.cuda.device_count()` is 0; use `torch.npu` after `import torch_npu` there"
        )
        return [Found(word.line, word.start, "NPU103", message, Tier.REVIEW)]
    if quote in "'\"" and word.text.endswith(quote) and quote not in inner and DEVICE_COUNT.fullmatch(inner):
        message = (
            "`torch.cuda.device_count()` is 0 on an NPU host (torchrun then starts no worker) → "
            "`torch.npu.device_count()`, with `import torch_npu`"
        )
        return [Found(word.line, word.start, "NPU103", message, end=word.end, edit=f"{quote}{NPU_DEVICE_COUNT}{quote}")]
    if TORCH_CUDA_VERSION.search(inner):
        message = (
            "inline Python reads `torch.version.cuda` to pick a CUDA build: on an NPU host it is None (and "
            "`torch.cuda.is_available()` False), so the script takes its non-CUDA branch; where what it "
            "installs has an Ascend (CANN) build, choose that one there"
        )
    else:
        message = (
            "inline Python calls `torch.cuda`, which finds no device on an NPU host (`device_count()` is 0, "
            "`is_available()` False): use `torch.npu` after `import torch_npu`"
        )
    return [Found(word.line, word.start, "NPU103", message, Tier.MANUAL)]


def _docker(words: list[ShellWord], values: list[str | None]) -> list[Found]:
    """NPU715 for a ``docker run`` (``words`` from ``docker`` on) that asks for NVIDIA GPUs."""
    if values[0].endswith("nvidia-docker"):
        return [Found(words[0].line, words[0].start, "NPU715", f"`nvidia-docker` {DOCKER_MESSAGE}", Tier.MANUAL)]
    options = _options(words[2:], values[2:])
    for position, (word, value) in enumerate(options):
        following = options[position + 1 : position + 2]
        if value in ("--gpus", "--runtime") and following and (value == "--gpus" or following[0][1] == "nvidia"):
            shown = f"{word.text} {following[0][0].text}"
        elif value is not None and (value.startswith("--gpus=") or value == "--runtime=nvidia"):
            shown = word.text
        else:
            continue
        message = f"`{values[0].rsplit('/', 1)[-1]} {values[1]} {shown}` {DOCKER_MESSAGE}"
        return [Found(word.line, word.start, "NPU715", message, Tier.MANUAL)]
    return []


def _lmdeploy(words: list[ShellWord], values: list[str | None]) -> list[Found]:
    """NPU935 for an ``lmdeploy serve api_server`` / ``serve gradio`` / ``chat`` (``words`` from
    ``lmdeploy`` on) that does not run on the Ascend device: no ``--device``, or another one than
    ``ascend``; not one whose device is read from a variable (``--device $DEVICE``)."""
    device = _device_option(words, values)
    if device is None or device == "ascend":
        return []
    command = " ".join(values[1:3] if values[1] == "serve" else values[1:2])
    shown = f"lmdeploy {command}" + (f" --device {device}" if device else "")
    pytorch = "--backend=pytorch" in values or ("--backend", "pytorch") in zip(values, values[1:])
    engine = (LMDEPLOY_PYTORCH if pytorch else LMDEPLOY_TURBOMIND).format(
        device=f"`{device}`" if device else "`cuda`, the default of `--device`"
    )
    return [Found(words[0].line, words[0].start, "NPU935", f"`{shown}` {engine}: {LMDEPLOY_ADVICE}", Tier.REVIEW)]


def _runs_program(before: list[ShellWord], values: list[str | None]) -> bool:
    """Whether the word after ``before`` (the words of its simple command that precede it) is the
    program the command runs: after environment assignments and wrappers only (``CUDA_VISIBLE_DEVICES=0
    nohup lmdeploy ...``), or as the module of ``python -m`` (not ``echo lmdeploy chat``)."""
    if values[-1:] == ["-m"] and any(PYTHON.fullmatch(value or "") for value in values):
        return True
    return all(ASSIGNMENT.fullmatch(word.text) or value in WRAPPERS for word, value in zip(before, values))


def _device_option(words: list[ShellWord], values: list[str | None]) -> str | None:
    """The value of a command's ``--device`` option: "" where it has none, None where a variable gives it."""
    for position, (word, value) in enumerate(zip(words, values)):
        if value == "--device":
            return values[position + 1] if position + 1 < len(values) else ""
        if word.text.startswith(("--device=", "'--device=", '"--device=')):
            return None if value is None else value.partition("=")[2]
    return ""


def _options(words: list[ShellWord], values: list[str | None]) -> list[tuple[ShellWord, str | None]]:
    """The leading options of a program (with their values): ``words`` up to the program it runs
    (``srun -p a -n 4 python x.py``, ``docker run --name c img cmd``), the first word that follows a
    word that is no option, or that names a Python or launcher program or a ``.py`` / ``.sh`` file."""
    options = []
    for position, (word, value) in enumerate(zip(words, values)):
        after_option = position == 0 or (values[position - 1] or "").startswith("-")
        option = value is not None and value.startswith("-")
        program = value is not None and (
            PYTHON.fullmatch(value) or value in LAUNCHERS or value.endswith((".py", ".sh"))
        )
        if program or not (option or after_option):
            break
        options.append((word, value))
    return options


def _slurm(line: ShellLine, start: int, text: str) -> Found:
    return Found(line, start, "NPU716", f"`{text}` {SLURM_MESSAGE}")
