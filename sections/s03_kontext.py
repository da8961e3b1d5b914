"""kontext: parts are wired by key paths, so they never import each other.

During training Kauldron keeps everything in one nested context (`batch`, `preds`,
`interms`, ...). A loss or a metric does not receive the model's output as an argument
it must know the shape of; it declares *key paths* such as `"preds.logits"`, and kontext
fetches exactly those values for it. A key path reaches into dicts, lists and object
attributes. Change the string, and the same metric reads something else.
"""

import dataclasses

import numpy as np
from kauldron import kontext

from sections.lesson import Lesson
from sections.registry import section


@dataclasses.dataclass(frozen=True)
class Head:
    """An object in the context: key paths reach its attributes too."""

    scale: np.ndarray


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeanGap:
    """|mean(preds) - mean(targets)|, with its inputs named by key paths."""

    preds: kontext.Key = kontext.REQUIRED  # these two fields ARE the wiring
    targets: kontext.Key = kontext.REQUIRED

    def __call__(self, *, preds, targets) -> float:
        return float(abs(np.mean(preds) - np.mean(targets)))


def make_context() -> dict:
    return {
        "batch": {"image": np.zeros((4, 8, 8, 3)), "label": np.arange(4)},
        "preds": {"logits": np.ones((4, 10)), "aux": [{"pos": np.full(3, 3.0)}]},
        "head": Head(scale=np.full(2, 0.5)),
    }


@section(3, "kontext", "kontext: parts are wired by key paths, so they never import each other",
         shows="key paths into dicts, lists and attributes; a keyed object gets exactly the arrays its keys name")
def key_paths_wire_the_parts(lesson: Lesson) -> str:
    context = make_context()
    print("  A context is nested data; a key path reaches into dicts, lists and attributes:")
    expected = {"batch.image": context["batch"]["image"], "preds.logits": context["preds"]["logits"],
                "preds.aux[0].pos": context["preds"]["aux"][0]["pos"], "head.scale": context["head"].scale}
    for path, value in expected.items():
        found = kontext.get_by_path(context, path)
        print(f"    {path:18} -> shape {found.shape}")
        lesson.check(found is value, f"get_by_path(context, {path!r}) returns that very array, not a copy")

    error = lesson.check_raises(KeyError, lambda: kontext.get_by_path(context, "batch.nope"),
                                "get_by_path with the missing key 'batch.nope'")
    message = str(error)
    print(f"    {'batch.nope':18} -> KeyError: {message}")
    lesson.check("batch.nope" in message and "'nope'" in message,
                 "the KeyError names the full path 'batch.nope' and the missing key 'nope'")
    lesson.fact("missing_path_error", message)

    metric = MeanGap(preds="preds.logits", targets="batch.label")
    kwargs = kontext.resolve_from_keyed_obj(context, metric)
    print(f"\n  MeanGap(preds={metric.preds!r}, targets={metric.targets!r})")
    print(f"    resolve_from_keyed_obj -> {{{', '.join(f'{k}: {v.shape}' for k, v in kwargs.items())}}}")
    lesson.check_equal(sorted(kwargs), ["preds", "targets"], "the keyword arguments resolved for MeanGap")
    lesson.check(kwargs["preds"] is context["preds"]["logits"] and kwargs["targets"] is context["batch"]["label"],
                 "each keyword argument is exactly the array its key names")
    value = lesson.fact("mean_gap", metric(**kwargs))
    lesson.check_equal(value, 0.5, "MeanGap(preds.logits, batch.label) = |1 - 1.5|")
    print(f"    value = {value}")

    repointed = dataclasses.replace(metric, preds="head.scale")
    value2 = lesson.fact("mean_gap_repointed", repointed(**kontext.resolve_from_keyed_obj(context, repointed)))
    lesson.check_equal(value2, 1.0, "MeanGap(head.scale, batch.label) = |0.5 - 1.5|")
    print(f"\n  Point preds at 'head.scale', an attribute, and only that string changes: value = {value2}")
    print("  MeanGap never imported a model, and no model needs to know MeanGap exists.")
    return f"4 paths resolved (an attribute among them), the missing one named; MeanGap = {value} then {value2}"
