"""kontext: parts are wired by key paths, so they never import each other.

During training Kauldron keeps everything a step produces in one nested *context*: the
batch, the model's predictions, its intermediate values, the parameters, the gradients,
the loss states. A loss or a metric still receives plain arrays as keyword arguments;
what it does not need is to know where they live. It declares *key paths* such as
`"preds.logits"`, and kontext fetches exactly those values for it.
"""

import dataclasses

import numpy as np
from kauldron import kontext, losses

from harness import Lesson, section


@dataclasses.dataclass(frozen=True)
class Head:
    """An object in the context: key paths reach its attributes too."""

    scale: np.ndarray


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeanGap:
    """|mean(preds) - mean(targets)|: a metric-like part whose inputs are key paths."""

    preds: kontext.Key = kontext.REQUIRED  # these two fields are the wiring
    targets: kontext.Key = kontext.REQUIRED

    def __call__(self, *, preds, targets) -> float:
        return float(abs(np.mean(preds) - np.mean(targets)))


@section(3, "kontext", "kontext: parts are wired by key paths, so they never import each other", part="glue",
         shows="key paths into dicts, lists and attributes; a keyed object gets its arrays; a wrong key's error",
         reference="https://kauldron.readthedocs.io/en/latest/kontext.html")
def key_paths_wire_the_parts(lesson: Lesson):
    lesson.md("""
    ## A key path reaches into dicts, lists and attributes

    A context is nested data. `kontext.get_by_path` follows a dotted path through dicts,
    list indices and object attributes, and returns the very value it finds, not a copy.
    """)
    context = {
        "batch": {"image": np.zeros((4, 8, 8, 3)), "label": np.arange(4)},
        "preds": {"logits": np.ones((4, 10)), "aux": [{"pos": np.full(3, 3.0)}]},
        "head": Head(scale=np.full(2, 0.5)),
    }
    for path in ("batch.image", "preds.logits", "preds.aux[0].pos", "head.scale"):
        print(f"{path:18} -> {kontext.get_by_path(context, path).shape}")
    with lesson.checks():
        for path, value in {"batch.image": context["batch"]["image"], "preds.logits": context["preds"]["logits"],
                            "preds.aux[0].pos": context["preds"]["aux"][0]["pos"],
                            "head.scale": context["head"].scale}.items():
            lesson.check(kontext.get_by_path(context, path) is value,
                         f"get_by_path(context, {path!r}) returns that very array, not a copy")

    lesson.md("""
    ## A keyed object names its inputs; kontext fetches them

    `MeanGap` (above) declares two `kontext.Key` fields.
    `kontext.resolve_from_keyed_obj` reads them and returns the keyword arguments to call
    it with: each one exactly the array its key names. Kauldron's losses and metrics get
    their arguments this way (below), from the context a training step fills
    (`kd.train.Context`). In a training step, the losses run inside the gradient, on
    `step`, `batch`, `params`, `collections`, `opt_state`, `preds` and `interms` (what
    Flax captured inside the model); the metrics and summaries run after the backward
    pass, and also see `grads`, `updates` and the losses' states. An evaluator runs no
    backward pass. Section 14 probes a real step and an evaluator's; section 6 reads an
    inner layer through `interms`.
    """)
    metric = MeanGap(preds="preds.logits", targets="batch.label")
    kwargs = kontext.resolve_from_keyed_obj(context, metric)
    print({name: value.shape for name, value in kwargs.items()}, metric(**kwargs))
    with lesson.checks():
        lesson.check(kwargs["preds"] is context["preds"]["logits"] and kwargs["targets"] is context["batch"]["label"],
                     "resolve_from_keyed_obj gives MeanGap exactly the arrays its keys name, as keyword arguments")
        lesson.fact("mean_gap", metric(**kwargs))
        named = {"step", "batch", "params", "collections", "opt_state", "preds", "interms", "grads", "updates",
                 "loss_states"}
        lesson.check(named <= set(context_fields()),
                     f"kd.train.Context has the fields {', '.join(sorted(named))}", internal="reads Kauldron's source")
        import re

        step, forward_with_loss = kauldron_functions("train/train_step.py", "_step", "forward_with_loss")
        lesson.check(re.search(r"jax\.grad\(\s*forward_with_loss", step) and "compute_losses(" in forward_with_loss,
                     "a training step (TrainStep._step) computes the losses in forward_with_loss, which it"
                     " differentiates", internal="reads Kauldron's source")
        lesson.check(step.index("grad_fn(") < step.index("grads=params_grads") < step.index("update_context(context)")
                     and "get_state_from_context(context), self.metrics" in kauldron_file("train/auxiliaries.py"),
                     "then it puts grads in the context, then computes the metrics and summaries (update_context)",
                     internal="reads Kauldron's source")
        (evaluator_step,) = kauldron_functions("evals/evaluators.py", "_step")
        lesson.check("train_step.forward(" in evaluator_step and "update_context(ctx)" in evaluator_step
                     and "grad" not in evaluator_step,
                     "an evaluator's step (Evaluator._step) runs the forward pass and update_context, no gradient",
                     internal="reads Kauldron's source")

    lesson.md("""
    ## Point it elsewhere by changing a string

    Rewire the same metric to an attribute of an object in the context: only the key
    changes. `MeanGap` never imports a model, and no model needs to know it exists.
    """)
    repointed = dataclasses.replace(metric, preds="head.scale")
    kwargs = kontext.resolve_from_keyed_obj(context, repointed)
    print(repointed, repointed(**kwargs))
    with lesson.checks():
        lesson.check(kwargs["preds"] is context["head"].scale, "after the change, preds is the attribute head.scale")
        lesson.fact("mean_gap_repointed", repointed(**kwargs))

    lesson.md("""
    ## Kauldron's losses resolve their keys the same way

    `kd.losses.L2` (imported here from `kauldron.losses`) is a keyed object too:
    `get_state_from_context` resolves its keys in a context and computes its state from
    those arrays. It has a third key, `step` (for a weight schedule), which names
    `"step"`: a context built by hand needs a `step` entry, as a training step's has.
    A fourth, `mask`, is left at `None`, which kontext skips: a key set to `None` is not
    looked up.
    """)
    l2 = losses.L2(preds="preds.y", targets="batch.y")
    step_context = {"step": 0, "batch": {"y": np.ones(3)}, "preds": {"y": np.array([1.0, 2.0, 4.0])}}
    print(l2)
    print(l2.get_state_from_context(step_context).compute())
    with lesson.checks():
        from kauldron import metrics

        ys = step_context["preds"]["y"], step_context["batch"]["y"]
        lesson.check_equal(float(l2.get_state_from_context(step_context).compute()),
                           float(l2.get_state(preds=ys[0], targets=ys[1]).compute()),
                           "L2's state from the context = L2's state from preds.y and batch.y, passed directly")
        norm = metrics.Norm(tensor="preds.y")
        lesson.check_equal(float(norm.get_state_from_context(step_context).compute()),
                           float(norm.get_state(tensor=ys[0]).compute()),
                           "a metric, kd.metrics.Norm(tensor='preds.y'): its state from the context = from preds.y")
        error = lesson.check_raises(KeyError, lambda: l2.get_state_from_context({"batch": {"y": ys[1]}, "preds": {"y": ys[0]}}),
                                    "L2 on a context without a step entry")
        lesson.check("Couldn't resolve path for 'step'" in str(error), "the error names the key step")
        lesson.check_equal(kontext.get_keypaths(l2), {"preds": "preds.y", "targets": "batch.y", "step": "step", "mask": None},
                           "L2's key fields and the paths they name")
        lesson.check_equal(sorted(kontext.resolve_from_keyed_obj(step_context, l2)), ["preds", "step", "targets"],
                           "the arguments resolve_from_keyed_obj finds for L2: mask, set to None, is not looked up")

    lesson.md("""
    ## A wrong key says what it could have meant

    A typo in a key goes unnoticed until kontext resolves the keys. Then it fails with the
    field, the path it could not resolve, and the existing paths closest to it. A loss
    with a wrong key fails with this very error.
    """)
    typo = MeanGap(preds="preds.logit", targets="batch.label")
    try:
        kontext.resolve_from_keyed_obj(context, typo)
    except KeyError as error:
        print(error.args[0])
    with lesson.checks():
        error = lesson.check_raises(KeyError, lambda: kontext.resolve_from_keyed_obj(context, typo),
                                    "resolving MeanGap(preds='preds.logit')")
        lesson.check("Couldn't resolve path for 'preds'" in str(error) and "'preds.logit'" in str(error)
                     and "'preds.logits'" in str(error) and "'batch.image'" not in str(error),
                     "the error names the field preds and the path 'preds.logit', suggests 'preds.logits', not the"
                     " distant 'batch.image'")
        other = lesson.check_raises(KeyError, lambda: kontext.resolve_from_keyed_obj(
            context, MeanGap(preds="preds.logits", targets="batch.lable")), "resolving MeanGap(targets='batch.lable')")
        lesson.check("Couldn't resolve path for 'targets'" in str(other) and "'batch.lable'" in str(other),
                     "that error names the field targets, not the path's first part, batch")
        l2_typo = losses.L2(preds="preds.yy", targets="batch.y")
        errors = [lesson.check_raises(KeyError, call, what) for call, what in
                  ((lambda: l2_typo.get_state_from_context(step_context), "L2(preds='preds.yy') on step_context"),
                   (lambda: kontext.resolve_from_keyed_obj(step_context, l2_typo), "resolve_from_keyed_obj on it"))]
        lesson.check_equal(str(errors[0]), str(errors[1]), "L2's error for a wrong key: resolve_from_keyed_obj's very message")
        lesson.fact("missing_path_error", str(error.args[0]))
        lesson.summary = ("4 paths resolved (an attribute among them); MeanGap rewired by a string;"
                          " a typo's error suggests the path")


import ast
import importlib.util
import pathlib


def kauldron_file(relative: str) -> str:
    """The text of a file of the installed kauldron package: importing kauldron.train
    would load TensorFlow, which this lesson does not need."""
    return (pathlib.Path(importlib.util.find_spec("kauldron").origin).parent / relative).read_text()


def context_fields() -> list[str]:
    """The fields of kd.train.Context, read from its source."""
    (context,) = [node for node in ast.parse(kauldron_file("train/context.py")).body
                  if isinstance(node, ast.ClassDef) and node.name == "Context"]
    return [node.target.id for node in context.body if isinstance(node, ast.AnnAssign)]


def kauldron_functions(relative: str, *names: str) -> list[str]:
    """The source text of functions of a file of the installed kauldron package."""
    source = kauldron_file(relative)
    functions = {node.name: ast.get_source_segment(source, node) for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.FunctionDef)}
    return [functions[name] for name in names]
