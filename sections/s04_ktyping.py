"""ktyping: array shapes checked at runtime, with named axes bound across arguments.

`kauldron.ktyping` annotations such as `Float["*b n c"]` name each axis. Under
`@kt.typechecked`, the first argument binds `c` to its size, and every later use of `c`
(in other arguments and in the return value) must agree. A mismatch is reported with
the argument, its shape, and what each axis name was already bound to.

Kauldron has a second, older module for the same job: `kauldron.typing`, the one the
original guide used, still exported as `kd.typing`. It checks through jaxtyping, reports
the same mismatch differently (shown below), and importing it loads TensorFlow, which
is why this section takes seconds rather than milliseconds.
"""

import sys

import jax.numpy as jnp
from kauldron import ktyping as kt

from sections.lesson import Lesson
from sections.registry import section

# What kauldron.typing's report of the same mismatch contains, checked below.
LEGACY_HEADLINE = ('argument "weights"', "did not match any element in the union")
LEGACY_DETAILS = ("weights: Float['c d'] = f32[5 32]", "Inferred Dims:", "'c': 8")


@kt.typechecked
def project(features: kt.Float["*b n c"], weights: kt.Float["c d"]) -> kt.Float["*b n d"]:
    return jnp.einsum("...c,cd->...d", features, weights)


def legacy_report() -> str:
    """kauldron.typing's error for the same mismatch (importing it loads TensorFlow)."""
    from kauldron.typing import Float, typechecked

    @typechecked
    def legacy_project(features: Float["*b n c"], weights: Float["c d"]) -> Float["*b n d"]:
        return jnp.einsum("...c,cd->...d", features, weights)

    try:
        legacy_project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32)))
    except Exception as e:  # noqa: BLE001 - whatever it raises, its text is the report
        return str(e)
    return ""


@section(4, "ktyping", "ktyping: named axes, checked at runtime, bound across arguments",
         shows="shapes with named axes checked at runtime, bound across arguments; kd.typing's report beside it")
def named_axes_are_checked(lesson: Lesson) -> str:
    out = project(jnp.zeros((2, 16, 8)), jnp.zeros((8, 32)))
    print(f"  project(f32[2 16 8], f32[8 32]) -> {out.shape}   (b=2, n=16, c=8, d=32)")
    lesson.check_equal(out.shape, (2, 16, 32), "the checked function's output shape")

    print("\n  Now break it: the first argument binds c to 8, so weights of shape (5, 32) cannot fit:")
    error = lesson.check_raises(kt.KTypeCheckError, lambda: project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32))),
                                "project with weights of shape (5, 32)")
    report = str(error)
    print("    " + report.strip().replace("\n", "\n    "))
    first_line = report.strip().splitlines()[0]
    lesson.check("argument weights" in first_line and "(5, 32)" in first_line and "'c d'" in first_line,
                 "the report's first line names the argument weights, its shape (5, 32) and the spec 'c d'")
    lesson.check("Dim Assignments" in report and "c: 8" in report,
                 "the report lists the dim assignments, c: 8 among them")
    lesson.fact("error_first_line", first_line)

    def wrong_return(x: kt.Float["b c"]) -> kt.Float["b c"]:
        return x.T

    error = lesson.check_raises(kt.KTypeCheckError, lambda: kt.typechecked(wrong_return)(jnp.zeros((2, 3))),
                                "a function returning the transpose of a (2, 3) array as 'b c'")
    return_line = str(error).strip().splitlines()[0]
    lesson.check("return" in return_line.lower(), "a bad return value is reported as the return value")
    print(f"\n  The return value is checked against the same bindings: returning x.T for 'b c'"
          f"\n  fails with: {return_line}")

    legacy = legacy_report()
    from kauldron import kd

    lesson.check(kd.typing is sys.modules["kauldron.typing"], "kauldron.typing is exported as kd.typing")
    lesson.check("tensorflow" in sys.modules, "once kauldron.typing is imported, TensorFlow is loaded")
    headline = legacy.strip().splitlines()[0] if legacy.strip() else ""
    lesson.check(all(part in headline for part in LEGACY_HEADLINE),
                 f"kauldron.typing's first line says {LEGACY_HEADLINE[0]} {LEGACY_HEADLINE[1]}")
    lesson.check(all(line in legacy for line in LEGACY_DETAILS),
                 f"kauldron.typing's report holds {', '.join(map(repr, LEGACY_DETAILS))}")
    print("\n  kauldron.typing (kd.typing) reports the same mismatch through jaxtyping. Its headline"
          f"\n  only says the argument:\n    {headline[:100]}"
          "\n  and the shapes and bindings follow under 'Inputs' and 'Inferred Dims':")
    for line in LEGACY_DETAILS:
        print(f"    ... {line} ...")
    lesson.fact("legacy_headline", headline)
    return (f"ktyping named weights, its shape (5, 32) and c: 8 in its first line; "
            f"kd.typing only said: {headline.split(' (')[0]} ... did not match")
