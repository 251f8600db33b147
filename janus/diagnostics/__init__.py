"""Diagnostics: what janus did, over all functions (``janus.report()``) and in its named log channels."""
