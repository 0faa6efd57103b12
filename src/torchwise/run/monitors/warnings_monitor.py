"""Warnings shown while the script runs, reported at the user's line (TWR002).

``warnings.showwarning`` is what Python calls to display a warning its
filters let through; it is patched to record the warning and to display it
at the user's line when the place Python chose lies inside a library or in
torchwise (a library's ``stacklevel`` counts frames, and a monitor's wrapper
is one more frame than the library expected).
"""

from __future__ import annotations

import warnings
from typing import Any, TextIO

from torchwise.run.session import Session
from torchwise.run.sites import is_user_file, user_site


class WarningsMonitor:
    def __init__(self, session: Session) -> None:
        self.session = session

    def install(self) -> None:
        session = self.session
        original = warnings.showwarning

        def showwarning(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> Any:
            if not is_user_file(filename):
                site = user_site()
                if site is not None:
                    filename, lineno, line = site.path, site.line, None
            else:
                site = user_site()
            text = (
                str(message).strip().splitlines()[0] if str(message).strip() else category.__name__
            )
            session.report(
                "TWR002",
                site,
                f"{category.__name__}: {text[:300]}",
                evidence={"category": category.__name__},
            )
            return original(message, category, filename, lineno, file, line)

        session.patches.setattr(warnings, "showwarning", showwarning)
