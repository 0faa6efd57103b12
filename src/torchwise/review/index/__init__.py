"""The project index: each file summarised once, joined into one model of the
project (imports, classes, the call graph, saves, declared torch versions)."""
