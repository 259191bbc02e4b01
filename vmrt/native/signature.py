"""Export signatures of native modules: the one cconv Signature (vmrt.vm.cconv),
parsed strictly, with the argument/result struct layout C exports use.

Kept as a name for native code and tests; the parsing and layouts live in
vmrt.vm.cconv so that bytecode and native modules share one Signature.
"""

from __future__ import annotations

from vmrt.vm.cconv import POINTER_SIZE, CConvError, Layout, Signature, parse

__all__ = ["POINTER_SIZE", "CConvError", "Layout", "Signature", "parse"]
