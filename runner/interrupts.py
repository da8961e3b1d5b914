"""Ctrl-C (and SIGTERM), made reliable: the run stops after the section it came in,
whatever caught it."""

from __future__ import annotations

import _thread
import signal
import sys
import threading


class CtrlC:
    """Remembers a Ctrl-C. Python raises it as KeyboardInterrupt in whatever code is running,
    and when that is a garbage-collector callback (jax registers one) Python cannot raise it:
    it prints "Exception ignored in ..." with a traceback and goes on. Seen in CI: a run
    that ignored its Ctrl-C and exited 0. So the press is remembered, a swallowed interrupt
    is raised again in the main thread, and the run stops after the section either way."""

    pressed = False
    _reraised = 0

    @classmethod
    def install(cls) -> None:
        # Python leaves SIGINT ignored when it starts with it ignored (as a shell's
        # background job does): make it interrupt regardless. SIGTERM (a CI job's timeout,
        # `kill`) stops the run the same way, so the workers and what they started stop too.
        signal.signal(signal.SIGINT, cls.handler)
        signal.signal(signal.SIGTERM, cls.handler)
        sys.unraisablehook = cls.unraisable_hook

    @classmethod
    def handler(cls, signum, frame):
        cls.pressed = True
        raise KeyboardInterrupt

    @classmethod
    def unraisable_hook(cls, unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            sys.__unraisablehook__(unraisable)
        elif cls._reraised < 100:  # bounded, in case it keeps landing in callbacks
            cls._reraised += 1
            # From another thread, so that it lands after the callback, not in this hook.
            # At interpreter shutdown (seen on 3.12) no thread can start, and there is no
            # main code left to interrupt: the press is already remembered.
            if sys.is_finalizing():
                return
            try:
                threading.Timer(0.01, _thread.interrupt_main).start()
            except RuntimeError:
                pass
