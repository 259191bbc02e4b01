"""The VM: values, refs, buffers, lists, modules, contexts, stacks and the interpreter."""
