"""The parts that one lesson's configs name: models, metrics, data sources.

Kauldron's konfig Rule 0: what a config names lives in an implementation module, and a
config imports it only inside `konfig.imports()`; a lesson never names itself that way.
The parts several lessons share are in sections/shared.py.
"""
