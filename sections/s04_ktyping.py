"""ktyping: array shapes checked at runtime, with named axes bound across arguments.

Shape bugs in JAX code are silent: broadcasting turns a wrong shape into a wrong number.
`kauldron.ktyping` annotations such as `Float["*b n c"]` name each axis, and under
`@kt.typechecked` every call is checked: the first argument binds each name to a size,
and every later use of that name, in other arguments and in the return value, must agree.
"""

import sys

import jax.numpy as jnp
from kauldron import ktyping as kt

from sections.lesson import Lesson
from sections.registry import section


@section(4, "ktyping", "ktyping: named axes, checked at runtime, bound across arguments", part="parts",
         shows="shapes with named axes checked at runtime, bound across arguments; the older kd.typing beside it",
         reference="https://github.com/google-research/kauldron/tree/main/kauldron/ktyping")
def named_axes_are_checked(lesson: Lesson) -> str:
    lesson.md("""
    ## Named axes, bound across arguments

    `project` maps features of shape `*b n c` with weights `c d`. Called with shapes that
    agree, the check passes silently: `b` is bound to `(2,)`, `n` to 16, `c` to 8, `d` to 32.
    """)

    @kt.typechecked
    def project(features: kt.Float["*b n c"], weights: kt.Float["c d"]) -> kt.Float["*b n d"]:
        return jnp.einsum("...c,cd->...d", features, weights)

    out = project(jnp.zeros((2, 16, 8)), jnp.zeros((8, 32)))
    print(out.shape)
    lesson.check_equal(out.shape, (2, 16, 32), "project(f32[2 16 8], f32[8 32])'s shape, checked as '*b n d'")

    lesson.md("""
    ## A mismatch names the argument, its shape and the bindings

    The features bind `c` to 8, so weights of shape `(5, 32)` cannot fit. The error says
    which argument, what shape it had, what the annotation asked for, and what each axis
    name was already bound to.
    """)
    error = lesson.check_raises(kt.KTypeCheckError, lambda: project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32))),
                                "project with weights of shape (5, 32)")
    print(error)
    first_line = str(error).strip().splitlines()[0]
    lesson.check("argument weights" in first_line and "(5, 32)" in first_line and "'c d'" in first_line,
                 "the first line names the argument weights, its shape (5, 32) and the spec 'c d'")
    lesson.check("Dim Assignments" in str(error) and "c: 8" in str(error), "the report lists the binding c: 8")
    lesson.fact("error_first_line", first_line)

    lesson.md("""
    ## The return value is checked too

    The bindings hold for the return value: a function annotated to return `b c` that
    returns its transpose fails.
    """)

    @kt.typechecked
    def transpose_by_mistake(x: kt.Float["b c"]) -> kt.Float["b c"]:
        return x.T

    error = lesson.check_raises(kt.KTypeCheckError, lambda: transpose_by_mistake(jnp.zeros((2, 3))),
                                "returning the transpose of a (2, 3) array annotated 'b c'")
    print(str(error).strip().splitlines()[0])
    lesson.check("return" in str(error).strip().splitlines()[0].lower(), "the report says it is the return value")

    lesson.md("""
    ## `kd.typing`, the older module

    Kauldron has a second module for the same job, `kauldron.typing` (exported as
    `kd.typing`), which checks through jaxtyping and typeguard. Many Kauldron codebases
    still use it. Its report of the same mismatch adds Kauldron's own summary of the
    inputs and the inferred dimensions under the checker's message. Importing it loads
    TensorFlow, which takes seconds.
    """)
    tensorflow_before = "tensorflow" in sys.modules
    from kauldron import kd
    from kauldron import typing as kd_typing

    @kd_typing.typechecked
    def legacy_project(features: kd_typing.Float["*b n c"], weights: kd_typing.Float["c d"]) -> kd_typing.Float["*b n d"]:
        return jnp.einsum("...c,cd->...d", features, weights)

    error = lesson.check_raises(kd_typing.TypeCheckError, lambda: legacy_project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32))),
                                "kd.typing's project with weights of shape (5, 32)")
    print(str(error).split("\n\n", 1)[1])
    lesson.check(kd.typing is kd_typing, "kauldron.typing is exported as kd.typing")
    lesson.check("weights: Float['c d'] = f32[5 32]" in str(error) and "Inferred Dims:" in str(error)
                 and "'c': 8" in str(error), "Kauldron's summary lists weights: Float['c d'] = f32[5 32] and 'c': 8")
    if tensorflow_before:
        lesson.skip_check("importing kauldron.typing loads TensorFlow", "TensorFlow was already loaded in this process")
    else:
        lesson.check("tensorflow" in sys.modules, "importing kauldron.typing loads TensorFlow")
    return "ktyping named weights, its shape (5, 32) and c: 8 in its first line; kd.typing summarised the same"
