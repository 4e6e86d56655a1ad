"""Package sources, one module per tool: how each tool finds, merges and resolves its configuration.

Pure functions on texts (no I/O): collectors read the files and hand the
texts in; checks and fix planners call the same functions, so a fix is
planned on exactly the model the check judged.
"""
