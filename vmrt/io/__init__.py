"""Parameters for IREE programs: indices, file handles, providers and archive formats.

    from vmrt.io import ParameterIndex, IndexProvider

    index = ParameterIndex.load("weights.irpa", "extra.safetensors")
    entry = index.lookup("layer0.weight")
    entry.view()                      # zero-copy memoryview over the mapping
    provider = IndexProvider("model", index)
    provider.gather("model", buffer, [("layer0.weight", 0, 0, entry.length)])
    index.save("out.safetensors")     # .irpa, .safetensors or .gguf

This package knows nothing of the VM or the HAL; the io_parameters module
builds on it.
"""

from vmrt.errors import ArchiveError
from vmrt.io.file import (DEFAULT_FILE_CACHE, FileAccess, FileCache, FileHandle,
                          FileMode)
from vmrt.io.formats import FORMATS, format_from_name, parse_file, write_file
from vmrt.io.index import (MAX_SPLAT_PATTERN_LENGTH, ParameterIndex, ParameterIndexEntry,
                           ParameterScopes, format_index, split_scope)
from vmrt.io.provider import (IndexProvider, ParameterProvider, ParameterSpan,
                              ProviderSet, ProviderSignal)

__all__ = [
    "ArchiveError", "DEFAULT_FILE_CACHE", "FileAccess", "FileCache", "FileHandle",
    "FileMode", "FORMATS", "format_from_name", "parse_file", "write_file",
    "MAX_SPLAT_PATTERN_LENGTH", "ParameterIndex", "ParameterIndexEntry", "ParameterScopes",
    "format_index", "split_scope", "IndexProvider", "ParameterProvider", "ParameterSpan",
    "ProviderSet", "ProviderSignal",
]
