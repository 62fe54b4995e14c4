"""The quantization flags a project may switch on (cuda2npu/analysis/quantization_flags.py)."""

from __future__ import annotations

from pathlib import Path

from cuda2npu.analysis.quantization_flags import quantization_flags_on

WRAPPER = b"""
class W:
    def __init__(self, path, load_in_8bit=False, load_4bit: bool = False, use_8bit=None):
        self.load_in_8bit = load_in_8bit
        m = f(path, load_in_8bit=load_in_8bit, load_in_4bit=self.load_4bit)
        if load_in_8bit == True:
            pass
cfg = {"quant_8bit": True, "off_8bit": False}
parser.add_argument("--load-8bit", action="store_true")
q = dict(quant_4bit=args.quant_4bit)
x = g(use_4bit=True)
"""


def test_a_flag_is_on_where_something_sets_it_to_more_than_off_or_its_own_name():
    # load_in_8bit: only defaults, stores and pass-throughs (`== True` tests it); load_in_4bit: given another
    # flag's value; quant_8bit and use_4bit: True; load_8bit: a command-line option; quant_4bit: a pass-through
    assert quantization_flags_on({Path("a.py"): WRAPPER}) == ("load_8bit", "load_in_4bit", "quant_8bit", "use_4bit")


FIELDS = b"""
@dataclass
class FuserConfig:
    load_in_4bit: bool = field(default=False, metadata={"help": "4-bit"})
    load_in_8bit: Optional[bool] = HfArg(
        default=False,
        help="8-bit",
    )
    use_4bit: bool = field(default=True)
    q_8bit: bool = field(metadata={"help": "no default: may be given"})
"""


def test_a_dataclass_field_sets_its_flag_to_its_default():
    """LLM-Blender (round 38): `load_in_4bit: bool = field(default=False, ...)` that nothing sets is off,
    also written over several lines (`HfArg(\\n default=False,`); a field without a default may be given."""
    assert quantization_flags_on({Path("config.py"): FIELDS}) == ("q_8bit", "use_4bit")
