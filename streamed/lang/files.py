"""Files as every reader of ``streamed`` takes them (a document, a ``config.json``, a target, a manifest, a program):
the one place a file's bytes are read, so that what any reader is given — however hostile — is one clear message.

* **Only a regular file is read.** A directory, a FIFO, a device (``/dev/zero``), a socket is refused by what it is,
  from ``stat``, before it is opened; the open itself never waits (``O_NONBLOCK``: a file swapped for a FIFO between
  the two would otherwise wait for a writer for ever) and what was opened is checked again (``fstat``).
* **The size is checked before a byte is read**, against the reader's limit; the read is bounded too (a file that
  grows while it is read is refused, not read on), so a 1 GB sparse file costs nothing.
* **Every failure is one ``FileProblem``** whose message starts with the path and says why in words (``cannot be read
  (Permission denied)``, ``is a FIFO, not a model program``, ``is 1,073,741,824 bytes; …``).

``display(path)`` is a path as a person typed it: bytes that are not UTF-8 (a file named ``bad\\xff.json``) are shown
as ``\\xff``, never an exception when a message or a document is written.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Callable


class FileProblem(ValueError):
    """A file that cannot be read as asked: the message names the path and why."""


#: What each kind of file that is not a regular one is called in a message.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (a named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def display(path) -> str:
    """``path`` (a ``str`` or ``os.PathLike``; bytes a file system gave back as surrogates) as text that can always
    be written: undecodable bytes as ``\\xNN``."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        return text.decode("utf-8", "backslashreplace")
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:  # the bytes the file system gave, undecodable ones as \xNN
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate of other origin (JSON's "\ud800"): as \udNNN
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file (``a FIFO (a named pipe)``), else ``None``."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def problem(path, e: OSError) -> FileProblem:
    """An ``OSError`` on ``path`` as one sentence."""
    if e.errno == errno.ENOENT:
        return FileProblem(f"{display(path)}: no such file")
    return FileProblem(f"{display(path)}: cannot be read ({e.strerror or type(e).__name__})")


def size_of(path, what: str) -> int:
    """The size of the regular file ``path`` (``what`` it should be: ``a model program``), or ``FileProblem``."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise problem(path, e) from None
    kind = not_regular(st.st_mode)
    if kind is not None:
        raise FileProblem(f"{display(path)}: is {kind}, not {what}")
    return st.st_size


def read_file(path, limit: int, what: str, too_large: Callable[[int], str] | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them, or ``FileProblem``: not a regular file, past
    the limit (``too_large(size)`` says so when given, else a sentence naming the size and the limit), or unreadable.
    ``what`` names what the file should be (``a model program``, ``a config.json``)."""
    shown = display(path)

    def over(size: int) -> FileProblem:
        why = too_large(size) if too_large is not None else \
            f"is {size:,} bytes; streamed reads {what.removeprefix('a ').removeprefix('an ')} files of at most {limit:,}"
        return FileProblem(f"{shown}: {why}")

    size = size_of(path, what)
    if size > limit:
        raise over(size)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise problem(path, e) from None
    try:
        st = os.fstat(fd)
        kind = not_regular(st.st_mode)
        if kind is not None:  # swapped since it was looked at
            raise FileProblem(f"{shown}: is {kind}, not {what}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise over(max(total, os.fstat(fd).st_size))
        return b"".join(chunks)
    except OSError as e:
        raise problem(path, e) from None
    finally:
        os.close(fd)


#: Characters a terminal acts on rather than shows: C0 and C1 controls, DEL, and Unicode's bidirectional controls
#: (U+202E turns the rest of a line around), and the line and paragraph separators.
_UNSHOWABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text`` (from a document or a file, quoted in a message) as it can be printed to a terminal: every character a
    terminal would act on rather than show — a NUL, an escape sequence, a right-to-left override — written as its
    escape (``\\x00``, ``\\u202e``); everything else as it is. ★ ``check`` echoed a document's raw NUL and U+202E."""
    def escape(m) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNSHOWABLE.sub(escape, text)
