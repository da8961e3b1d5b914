"""ktyping: array shapes checked at runtime, with named axes bound across arguments.

Shape bugs in JAX code are silent: broadcasting turns a wrong shape into a wrong number.
`kauldron.ktyping` annotations such as `Float["*b n c"]` name each axis, and under
`@kt.typechecked` every call is checked, argument by argument: the first argument that
uses a name binds it to a size, and every later use of that name, in other arguments and
in the return value, must agree.
The three functions this lesson calls come first.
"""

import jax.numpy as jnp
from kauldron import ktyping as kt
from kauldron import typing as kd_typing  # the older module (kd.typing, below)
from harness import Lesson, section


@kt.typechecked
def project(features: kt.Float["*b n c"], weights: kt.Float["c d"]) -> kt.Float["*b n d"]:
    print({name: kt.dim[name] for name in ("*b", "n", "c", "d")})  # what each axis name is bound to
    return jnp.einsum("...c,cd->...d", features, weights)


@kt.typechecked
def transpose_by_mistake(x: kt.Float["b c"]) -> kt.Float["b c"]:
    return x.T


@kd_typing.typechecked
def legacy_project(features: kd_typing.Float["*b n c"], weights: kd_typing.Float["c d"]) -> kd_typing.Float["*b n d"]:
    return jnp.einsum("...c,cd->...d", features, weights)


@section(4, "ktyping", "ktyping: named axes, checked at runtime, bound across arguments", part="parts",
         shows="shapes with named axes checked at runtime, bound across arguments; the older kd.typing beside it",
         reference="https://github.com/google-research/kauldron/tree/main/kauldron/ktyping")
def named_axes_are_checked(lesson: Lesson):
    lesson.md("""
    ## Named axes, bound across arguments

    `project` (above) maps features of shape `*b n c` with weights `c d`. Called with
    shapes that agree, the check passes, and inside the call `kt.dim` gives what each
    axis name was bound to: `*b` to `(2,)`, `n` to 16, `c` to 8, `d` to 32.
    """)
    out = project(jnp.zeros((2, 16, 8)), jnp.zeros((8, 32)))
    print(out.shape)
    with lesson.checks():
        lesson.check_equal(printed_by(project, jnp.zeros((2, 16, 8)), jnp.zeros((8, 32))),
                           "{'*b': (2,), 'n': 16, 'c': 8, 'd': 32}",
                           "the bindings kt.dim gives inside a @kt.typechecked call of project(f32[2 16 8], f32[8 32])")

    lesson.md("""
    ## A mismatch names the argument, its shape and the bindings

    The features bind `c` to 8, so weights of shape `(5, 32)` cannot fit. The error says
    which argument, what shape it had, what the annotation asked for, and what each axis
    name was already bound to. (Shown without its `Origin:` line, the function's file and
    line, which differs between a notebook and a file.)
    """)
    try:
        project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32)))
    except kt.KTypeCheckError as error:
        report = str(error)
        print(report.splitlines()[0], report[report.index("Arguments:"):], sep="\n\n")
    with lesson.checks():
        error = lesson.check_raises(kt.KTypeCheckError, lambda: project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32))),
                                    "project with weights of shape (5, 32)")
        first_line = str(error).strip().splitlines()[0]
        lesson.check("argument weights" in first_line and "(5, 32)" in first_line and "'c d'" in first_line,
                     "the first line names the argument weights, its shape (5, 32) and the spec 'c d'")
        lesson.check("Dim Assignments" in str(error) and "c: 8" in str(error), "the report lists the binding c: 8")
        lesson.fact("error_first_line", first_line)

    lesson.md("""
    ## The return value is checked too

    The bindings hold for the return value: `transpose_by_mistake` (above), annotated to
    return `b c`, returns its input's transpose, and the call fails.
    """)
    try:
        transpose_by_mistake(jnp.zeros((2, 3)))
    except kt.KTypeCheckError as error:
        print(str(error).splitlines()[0])
    with lesson.checks():
        error = lesson.check_raises(kt.KTypeCheckError, lambda: transpose_by_mistake(jnp.zeros((2, 3))),
                                    "returning the transpose of a (2, 3) array annotated 'b c'")
        lesson.check(str(error).startswith("return value"), "the report says it is the return value")

    lesson.md("""
    ## `kd.typing`, the older module

    Kauldron has a second module for the same job, `kauldron.typing` (exported as
    `kd.typing`), whose annotations are jaxtyping types; Kauldron's own data transforms
    (`kd.data.ValueRange`, for one) still use it. Its report of the same mismatch adds
    Kauldron's own summary of the inputs and the inferred dimensions (shown from
    `Inputs:` on). The two do not mix, and which way round matters. By default
    (`kt.CONFIG`), a `@kt.typechecked` function annotated with `kd.typing` types raises
    `RuntimeError` when called. The other way round is silent: `@kd.typing.typechecked`
    checks each `kt` annotation's dtype and shape, but called outside any
    `@kt.typechecked` function it ties a name only within one annotation, so
    `transpose_by_mistake`'s body under it returns the `(3, 2)` transpose with no error.
    Called inside one, its names bind in that caller's scope: tied across the arguments,
    and across every such call in the caller, so a second call with other sizes fails (a
    side effect ktyping's source admits: its checkers still take over typeguard's checks
    for anything called inside an active scope, so keeping out of its way "only
    partially works").
    """)
    try:
        legacy_project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32)))
    except kd_typing.TypeCheckError as error:
        print(str(error)[str(error).index("Inputs:"):])
    with lesson.checks():
        from kauldron import kd

        error = lesson.check_raises(kd_typing.TypeCheckError,
                                    lambda: legacy_project(jnp.zeros((2, 16, 8)), jnp.zeros((5, 32))),
                                    "kd.typing's project with weights of shape (5, 32)")
        lesson.check(kd.typing is kd_typing, "kauldron.typing is exported as kd.typing")
        lesson.check("weights: Float['c d'] = f32[5 32]" in str(error) and "Inferred Dims:" in str(error)
                     and "'c': 8" in str(error), "Kauldron's summary lists weights: Float['c d'] = f32[5 32] and 'c': 8")
        import typing

        import jaxtyping

        members = typing.get_args(kd_typing.Float["c d"])
        lesson.check(members and all(issubclass(t, jaxtyping.AbstractArray) for t in members),
                     "kd.typing.Float['c d'] is a union of jaxtyping array types")
        lesson.check_raises(kd_typing.TypeCheckError,
                            lambda: kd.data.ValueRange(key="x", vrange=(0.0, 1.0)).map_element([0, 255]),
                            "kd.data.ValueRange.map_element given a list, not an array (kd.typing's error, not ktyping's)")

        @kt.typechecked
        def mixed(x: kd_typing.Float["b c"]) -> kd_typing.Float["b c"]:
            return x

        error = lesson.check_raises(RuntimeError, lambda: mixed(jnp.zeros((2, 3))),
                                    "calling a @kt.typechecked function annotated with kd.typing types")
        lesson.check("Mixing of ktyping and jaxtyping detected" in str(error), "the error says ktyping and jaxtyping mix")
        with kt.Config(jaxtyping_annotations="ignore"):
            lesson.check_equal(shape_or_error(lambda: mixed(jnp.zeros((2, 3)))), (2, 3),
                               "under kt.Config(jaxtyping_annotations='ignore'), the same call returns: the error is the default")

        @kd_typing.typechecked
        def legacy_transpose(x: kt.Float["b c"]) -> kt.Float["b c"]:
            return x.T

        lesson.check_equal(shape_or_error(lambda: legacy_transpose(jnp.zeros((2, 3)))), (3, 2),
                           "@kd.typing.typechecked over kt.Float['b c'] -> kt.Float['b c'] returning x.T: no error, shape")
        lesson.check_raises(kd_typing.TypeCheckError, lambda: legacy_transpose(jnp.zeros((2, 3, 4))),
                            "that function given a rank-3 array (the rank is checked)")

        @kd_typing.typechecked
        def legacy_square(x: kt.Float["b b"], y: kt.Float["c 3"]):
            return x

        lesson.check_equal([shape_or_error(lambda: legacy_square(jnp.zeros(x), jnp.zeros(y)))
                            for x, y in [((2, 2), (5, 3)), ((2, 3), (5, 3)), ((2, 2), (5, 4))]],
                           [(2, 2), "TypeCheckError", "TypeCheckError"],
                           "@kd.typing.typechecked over x: kt.Float['b b'], y: kt.Float['c 3'], given (2, 2) and (5, 3);"
                           " x (2, 3); y (5, 4): the shape is checked, b within x")
        lesson.check_raises(kd_typing.TypeCheckError, lambda: legacy_transpose(jnp.zeros((2, 3), jnp.int32)),
                            "that function given an int32 array (the dtype is checked)")

        @kd_typing.typechecked
        def legacy_expand(x: kt.Float["b c"]) -> kt.Float["b c"]:
            return x[None]

        lesson.check_raises(kd_typing.TypeCheckError, lambda: legacy_expand(jnp.zeros((2, 3))),
                            "@kd.typing.typechecked over kt.Float['b c'] -> kt.Float['b c'] returning x[None] (the"
                            " return value is checked too)")

        @kd_typing.typechecked
        def legacy_pair(x: kt.Float["b c"], y: kt.Float["b c"]):
            return x

        lesson.check_equal(shape_or_error(lambda: legacy_pair(jnp.zeros((2, 3)), jnp.zeros((3, 2)))), (2, 3),
                           "@kd.typing.typechecked over x: kt.Float['b c'], y: kt.Float['b c'], given (2, 3) and (3, 2):"
                           " no error (b and c are not tied across annotations)")

        @kt.typechecked
        def caller(z: kt.Float["p q"]):
            return legacy_pair(jnp.zeros((2, 3)), jnp.zeros((3, 2)))

        lesson.check_raises(kd_typing.TypeCheckError, lambda: caller(jnp.zeros((7, 7))),
                            "legacy_pair given (2, 3) and (3, 2) inside a @kt.typechecked function whose own names are"
                            " p and q: there b and c are tied across the arguments")

        @kt.typechecked
        def bindings_after_a_call(z: kt.Float["p q"]):
            legacy_pair(jnp.zeros((2, 3)), jnp.zeros((2, 3)))
            return {name: kt.dim[name] for name in ("p", "q", "b", "c")}  # an unbound name: KeyError

        lesson.check_equal(bindings_after_a_call(jnp.zeros((7, 7))), {"p": 7, "q": 7, "b": 2, "c": 3},
                           "the caller's kt.dim after it called legacy_pair with (2, 3) and (2, 3): b and c bound in"
                           " the caller's scope")
        import pathlib

        import kauldron.ktyping.typeguard_checkers as checkers

        lesson.check("this only partially works" in pathlib.Path(checkers.__file__).read_text(),
                     "ktyping's source says its keeping out of typeguard's way 'only partially works'",
                     internal="reads Kauldron's source")

        @kt.typechecked
        def two_calls(z: kt.Float["p q"]):
            legacy_pair(jnp.zeros((2, 3)), jnp.zeros((2, 3)))
            return legacy_pair(jnp.zeros((4, 5)), jnp.zeros((4, 5)))

        lesson.check_raises(kd_typing.TypeCheckError, lambda: two_calls(jnp.zeros((7, 7))),
                            "legacy_pair called with (2, 3) twice, then with (4, 5) twice, in one @kt.typechecked"
                            " function: the second call meets b=2 and c=3")

    lesson.md("""
    ## Going further: `kd.typing` needs TensorFlow; ktyping does not

    The two modules differ in what they need: `kauldron.typing` imports TensorFlow, and
    `kauldron.ktyping` does not. A fresh Python process imports ktyping and looks whether
    TensorFlow came with it; then it makes TensorFlow unimportable (`sys.modules` maps it
    to None, as if it were not installed) and imports `kauldron.typing`.
    """)
    imports = lesson.shell(
        "python -c \"import sys, kauldron.ktyping; print('TensorFlow imported:', 'tensorflow' in sys.modules);"
        " sys.modules['tensorflow'] = None; import kauldron.typing\"",
        check=False, shows=r"^(TensorFlow imported|ModuleNotFoundError|ImportError)")
    with lesson.checks():
        lesson.check("TensorFlow imported: False" in imports.output,
                     "in a fresh process, importing kauldron.ktyping does not import TensorFlow")
        lesson.check(imports.returncode != 0 and "import of tensorflow halted" in imports.output,
                     "in that process, importing kauldron.typing fails once TensorFlow cannot be imported")
        lesson.summary = "ktyping named weights, its shape (5, 32) and c: 8; kd.typing summarised the same, and loads TensorFlow"


import contextlib
import io


def shape_or_error(call):
    """The shape a call returns, or the name of what it raised."""
    try:
        return call().shape
    except Exception as error:  # noqa: BLE001 - the name is what the check compares
        return type(error).__name__


def printed_by(function, *args) -> str:
    """What a call prints, stripped."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        function(*args)
    return printed.getvalue().strip()
