"""vmrt.stream: asynchronous work over resources, partitioned into waves by favor.

    from vmrt.stream import load_program, program_stats
    program = load_program("examples/mlp_train_step.stream")
    for name, per_favor in program_stats(program).items(): ...

See vmrt/stream/README.md for the text grammar and the partitioning algorithms.
"""

from vmrt.stream.allocation import (ALIGNMENT, FuncStats, Plan, SlabLayout, Slice, pack,
                                    plan, program_stats)
from vmrt.stream.analysis import Access, FuncAnalysis, Storage
from vmrt.stream.builder import FuncBuilder, ProgramBuilder
from vmrt.stream.ir import (ELEMENT_TYPES, Func, Lifetime, Loc, Op, Pattern, Program,
                            ResourceType, StreamError, Use, Value)
from vmrt.stream.partition import (DEFAULT_FAVOR, FAVORS, Favor, Schedule, parse_favor,
                                   partition, resolve_favor)
from vmrt.stream.text import format_program, load_program, parse_program

__all__ = [
    "ALIGNMENT", "Access", "DEFAULT_FAVOR", "ELEMENT_TYPES", "FAVORS", "Favor", "Func",
    "FuncAnalysis", "FuncBuilder", "FuncStats", "Lifetime", "Loc", "Op", "Pattern", "Plan",
    "Program", "ProgramBuilder", "ResourceType", "Schedule", "SlabLayout", "Slice",
    "Storage", "StreamError", "Use", "Value", "format_program", "load_program", "pack",
    "parse_favor", "parse_program", "partition", "plan", "program_stats", "resolve_favor",
]
