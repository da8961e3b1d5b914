"""ktyping: array shapes checked at runtime, with named axes bound across arguments.

`kauldron.ktyping` annotations such as `Float["*b n c"]` name each axis. Under
`@kt.typechecked`, the first argument binds `c` to its size, and every later use of `c`
(in other arguments and in the return value) must agree. A mismatch is reported with
the argument, its shape, and what each axis name was already bound to.

`kauldron.ktyping` is the current module; the original guide used the legacy
`kauldron.typing`, which imports TensorFlow (seconds and hundreds of MB) and reports
through jaxtyping in a different format (described below).
"""

import jax.numpy as jnp
from kauldron import ktyping as kt

from sections.registry import Lesson, section

# What the legacy `kauldron.typing` prints for the same mismatch. This section does not
# import it (it would load TensorFlow); tests/test_sections.py checks these lines against
# the installed library with `legacy_report()` below.
LEGACY_HEADLINE = ('argument "weights"', "did not match any element in the union")
LEGACY_DETAILS = ("weights: Float['c d'] = f32[5 32]", "Inferred Dims:", "'c': 8")


@kt.typechecked
def project(features: kt.Float["*b n c"], weights: kt.Float["c d"]) -> kt.Float["*b n d"]:
    return jnp.einsum("...c,cd->...d", features, weights)


def legacy_report() -> str:
    """The legacy `kauldron.typing` error for the same mismatch (imports TensorFlow)."""
    from kauldron.typing import Float, typechecked

    @typechecked
    def legacy_project(features: Float["*b n c"], weights: Float["c d"]) -> Float["*b n d"]:
        return jnp.einsum("...c,cd->...d", features, weights)

    try:
        legacy_project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32)))
    except Exception as e:  # noqa: BLE001 - whatever it raises, its text is the report
        return str(e)
    return ""


@section(4, "ktyping", "ktyping: named axes, checked at runtime, bound across arguments")
def lesson(lesson: Lesson) -> str:
    out = project(jnp.zeros((2, 16, 8)), jnp.zeros((8, 32)))
    print(f"  project(f32[2 16 8], f32[8 32]) -> {out.shape}   (b=2, n=16, c=8, d=32)")
    lesson.check_equal(out.shape, (2, 16, 32), "the checked function's output shape")

    print("\n  Now break it: the first argument binds c to 8, so weights of shape (5, 32) cannot fit:")
    error = lesson.check_raises(
        kt.KTypeCheckError,
        lambda: project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32))),
        "project with weights of shape (5, 32)",
    )
    report = str(error)
    print("    " + report.strip().replace("\n", "\n    "))
    first_line = report.strip().splitlines()[0]
    lesson.check("argument weights" in first_line, "the first line names the argument 'weights'")
    lesson.check("(5, 32)" in first_line, "the first line gives the offending shape (5, 32)")
    lesson.check("'c d'" in first_line, "the first line gives the spec it failed, 'c d'")
    lesson.check("Dim Assignments" in report, "the report lists the dim assignments")
    lesson.check("c: 8" in report, "the report says c was bound to 8")
    lesson.fact("error_first_line", first_line)

    def wrong_return(x: kt.Float["b c"]) -> kt.Float["b c"]:
        return x.T

    error = lesson.check_raises(kt.KTypeCheckError, lambda: kt.typechecked(wrong_return)(jnp.zeros((2, 3))),
                                "a function returning the transpose of a (2, 3) array as 'b c'")
    lesson.check("return" in str(error).splitlines()[0].lower(), "a bad return value is reported as the return")
    print("\n  The return value is checked against the same bindings: returning x.T for 'b c'"
          "\n  fails with: " + str(error).strip().splitlines()[0])

    print("\n  The legacy kauldron.typing (the original guide's import) reports the same mismatch"
          "\n  through jaxtyping: its headline only says the argument")
    print(f"    {LEGACY_HEADLINE[0]} (<array type>) {LEGACY_HEADLINE[1]}: ...")
    print("  and the shapes and bindings follow in 'Inputs' and 'Inferred Dims' sections:")
    for line in LEGACY_DETAILS:
        print(f"    ... {line} ...")
    print("  (not imported here, because it loads TensorFlow; tests/test_sections.py checks these lines)")
    return "mismatch reported with the argument, its shape (5, 32) and the binding c: 8"
