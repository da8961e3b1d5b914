"""A lesson's shell command as harness/shell.py reads it, and what a page and a failure
quote of its output; how a warm-started child ends (harness/warm_start.py). All in this
process: the fast tier."""

import atexit
import os
import sys

import pytest

from harness import shell, warm_start
from harness.shell import ShellLine


def test_lines_ending_in_an_ampersand_run_in_the_background_until_wait():
    lines = shell.parse_shell("python -m a &\npython -m b &\nwait\npython -m c", {})
    assert lines == [ShellLine({}, ["python", "-m", "a"], True, "python -m a"),
                     ShellLine({}, ["python", "-m", "b"], True, "python -m b"), None,
                     ShellLine({}, ["python", "-m", "c"], False, "python -m c")]


def test_a_line_sets_its_variables_names_are_expanded_and_continuations_joined():
    lines = shell.parse_shell("# a comment\nXLA_FLAGS=--n=8 python -m m $WORKDIR/x.json \\\n  --flag='a b'", {"WORKDIR": "/w"})
    assert lines == [ShellLine({"XLA_FLAGS": "--n=8"}, ["python", "-m", "m", "/w/x.json", "--flag=a b"], False,
                               "XLA_FLAGS=--n=8 python -m m $WORKDIR/x.json --flag='a b'")]


@pytest.mark.parametrize("command", ["head -n 3 a | sort", "python -m a > out.txt", "echo $(date)", "a && b", "X=1"])
def test_any_other_shell_syntax_goes_whole_to_bash(command):
    assert shell.parse_shell(command, {}) is None


def test_a_console_script_of_this_python_starts_through_its_entry_point_also_from_a_target_install(
        monkeypatch, tmp_path):
    """`tensorboard` installed beside this interpreter (a venv) or, as `pip install --target
    DIR` leaves it (a TPU machine's recipe), in DIR/bin on the PATH with this interpreter in
    its #! line: started as `python -m compat.run --script`, so warm. One whose #! names
    another program, or a name no entry point has, or, in a venv, a script of its base
    Python, is started as it is."""
    real = os.path.realpath(sys.executable)
    elsewhere = tmp_path / "python" / "bin"
    elsewhere.mkdir(parents=True)
    (elsewhere / "python3").symlink_to(real)  # this interpreter, with no scripts beside it
    target = tmp_path / "site" / "bin"
    target.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(elsewhere / "python3"))
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)  # a Python of no venv, as on that machine
    monkeypatch.setenv("PATH", f"{target}{os.pathsep}{os.environ['PATH']}")

    def console_script(name, first_line):
        (target / name).write_text(f"{first_line}\nimport sys\n")
        (target / name).chmod(0o755)  # as pip leaves it: the PATH holds executables only
        shell._console_script.cache_clear()
        return shell._console_script(name)

    try:
        assert console_script("tensorboard", f"#!{real}") is True
        assert console_script("tensorboard", "#!/bin/sh") is False
        assert console_script("no-such-entry-point", f"#!{real}") is False
        monkeypatch.setattr(sys, "prefix", str(tmp_path / "a-venv"))  # in a venv, its base Python's script is not ours
        assert console_script("tensorboard", f"#!{real}") is False
    finally:
        shell._console_script.cache_clear()


def test_a_page_shows_the_lines_it_asks_for_without_absl_s_prefix_and_dots_for_the_rest():
    output = ("I1207 01:02:03.456789 1234 train_loop.py:99] Starting training loop at step 0\n"
              "noise\nmore noise\n"
              "I1207 01:02:04.000001 1234 metrics.py:7] [0] collection=train loss=1.5\n"
              "the end\n")
    assert shell.excerpt(output, r"Starting|collection=") == ("Starting training loop at step 0\n...\n"
                                                              "[0] collection=train loss=1.5\n...")
    assert shell.excerpt("a\nb", None) == "a\nb"


def test_a_failure_quotes_the_last_line_printed():
    assert shell.last_line("Traceback...\nE1207 01:02:03.000000 7 main.py:1] ValueError: no\n\n") == "ValueError: no"
    assert shell.last_line("\n \n") == "(no output)"


class Exited(Exception):
    pass


@pytest.mark.parametrize("main, code, stderr", [
    (lambda: None, 0, ""),
    (lambda: sys.exit(3), 3, ""),
    (lambda: sys.exit("refused: a message"), 1, "refused: a message\n"),
    (lambda: {}["missing"], 1, "KeyError"),
])
def test_a_warm_child_ends_as_python_ends_a_program(monkeypatch, capsys, main, code, stderr):
    """Its exit status as the interpreter would give it, an uncaught error printed, its
    exit functions run: the child then leaves with os._exit, never returning into the
    server's code."""
    ran = []
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: ran.append("atexit"))
    monkeypatch.setattr(warm_start.threading, "_shutdown", lambda: ran.append("threads"))

    def leave(status):
        raise Exited(status)

    monkeypatch.setattr(os, "_exit", leave)
    with pytest.raises(Exited) as left:
        warm_start._end_as_a_program(main)
    assert left.value.args == (code,) and ran == ["threads", "atexit"]
    assert stderr in capsys.readouterr().err
