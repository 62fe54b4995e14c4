"""The project's copies of transformers' "modular" model sources: a project fact, so that those files
are left as written (``check``/``migrate`` skip them, saying why).

transformers writes a model once as ``modular_<model>.py`` and generates ``modeling_<model>.py`` from it
(``utils/modular_model_converter.py``); only the generated file is imported. Projects that vendor a
model copy both (VLM2Vec's ``vlm_backbone/qwen2_5_vl/``, round 38: 8 edits in files nothing imports). A
``modular_*.py`` counts where a ``modeling_*.py`` of the same model lies beside it and no import
statement of the project names it.
"""

from __future__ import annotations

import os
import re

from cuda2npu.analysis.python_files import PythonFiles

PREFIX = "modular_"


def modular_sources(files: PythonFiles) -> tuple[str, ...]:
    """The real paths of the project's unimported modular sources beside their generated modeling file, sorted."""
    candidates = [
        path
        for path in files
        if path.name.startswith(PREFIX) and path.with_name("modeling_" + path.name[len(PREFIX) :]) in files
    ]
    if not candidates:
        return ()
    statements = [statement for path in files for statement in files.import_statements(path)]
    return tuple(
        sorted(
            os.path.realpath(path)
            for path in candidates
            if not any(re.search(rf"\b{re.escape(path.stem)}\b".encode(), statement) for statement in statements)
        )
    )
