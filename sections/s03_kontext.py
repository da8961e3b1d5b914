"""kontext: parts are wired by key paths, so they never import each other.

During training Kauldron keeps everything in one nested context (`batch`, `preds`,
`interms`, ...). A loss or a metric does not receive the model's output as an argument
it must know the shape of; it declares *key paths* such as `"preds.logits"`, and kontext
fetches exactly those values for it. Change the string, and the same metric reads
something else.
"""

import dataclasses

import numpy as np
from kauldron import kontext

from sections.registry import Lesson, section


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeanGap:
    """|mean(preds) - mean(targets)|, with its inputs named by key paths."""

    preds: kontext.Key = kontext.REQUIRED  # these two fields ARE the wiring
    targets: kontext.Key = kontext.REQUIRED

    def __call__(self, *, preds, targets) -> float:
        return float(abs(np.mean(preds) - np.mean(targets)))


@section(3, "kontext", "kontext: parts are wired by string, so they never import each other")
def lesson(lesson: Lesson) -> str:
    context = {
        "batch": {"image": np.zeros((4, 8, 8, 3)), "label": np.arange(4)},
        "preds": {"logits": np.ones((4, 10)), "aux": [{"pos": np.full(3, 3.0)}]},
    }
    print("  A context is nested data; a key path reaches into dicts, lists and attributes:")
    expected_shapes = {"batch.image": (4, 8, 8, 3), "preds.logits": (4, 10), "preds.aux[0].pos": (3,)}
    for path, shape in expected_shapes.items():
        value = kontext.get_by_path(context, path)
        print(f"    {path:18} -> shape {value.shape}")
        lesson.check_equal(value.shape, shape, f"shape at {path}")
    lesson.check(kontext.get_by_path(context, "preds.aux[0].pos") is context["preds"]["aux"][0]["pos"],
                 "get_by_path returns the very object, not a copy")

    error = lesson.check_raises(KeyError, lambda: kontext.get_by_path(context, "batch.nope"),
                                "get_by_path with a missing key")
    message = str(error)
    print(f"    {'batch.nope':18} -> KeyError: {message}")
    lesson.check("batch.nope" in message, "the KeyError names the full path 'batch.nope'")
    lesson.check("'nope'" in message, "the KeyError names the missing key 'nope'")
    lesson.fact("missing_path_error", message)

    metric = MeanGap(preds="preds.logits", targets="batch.label")
    kwargs = kontext.resolve_from_keyed_obj(context, metric)
    print(f"\n  MeanGap(preds={metric.preds!r}, targets={metric.targets!r})")
    print(f"    resolve_from_keyed_obj -> {{{', '.join(f'{k}: {v.shape}' for k, v in kwargs.items())}}}")
    lesson.check_equal(sorted(kwargs), ["preds", "targets"], "the resolved keyword arguments")
    lesson.check(kwargs["preds"] is context["preds"]["logits"] and kwargs["targets"] is context["batch"]["label"],
                 "each argument is exactly the array its key names")
    value = lesson.fact("mean_gap", metric(**kwargs))
    lesson.check_equal(value, 0.5, "MeanGap(preds.logits, batch.label) = |1 - 1.5|")
    print(f"    value = {value}")

    repointed = dataclasses.replace(metric, preds="preds.aux[0].pos")
    value2 = lesson.fact("mean_gap_repointed", repointed(**kontext.resolve_from_keyed_obj(context, repointed)))
    lesson.check_equal(value2, 1.5, "MeanGap(preds.aux[0].pos, batch.label) = |3 - 1.5|")
    print(f"\n  Point preds at 'preds.aux[0].pos' and only that string changes: value = {value2}")
    print("  MeanGap never imported a model, and no model needs to know MeanGap exists.")
    return f"3 paths resolved, missing path named in KeyError, MeanGap = {value} then {value2} after re-pointing"
