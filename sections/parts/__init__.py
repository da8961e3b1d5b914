"""The experiment's own files, which the pages show: what configs name (models, losses,
metrics, data sources), the programs a lesson's shell commands run, and what the regression
lessons share (regression.py).

Kauldron's konfig Rule 0: what a config names lives in an implementation module, and a
config imports it only inside `konfig.imports()`; a lesson never names itself that way.
"""
