"""One Python session for the docs' ```python blocks: each line on standard input is a JSON object `{"where",
"code"}`; the code runs in one namespace shared by every block (as a reader pasting them in order into one
interpreter would), and one JSON line answers `{"ok": true}` or `{"ok": false, "error": <traceback>}`. What the
blocks print goes to standard error, so that standard output carries the answers only."""

from __future__ import annotations

import contextlib
import json
import sys
import traceback


def main() -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    answers = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                exec(compile(request["code"], request["where"], "exec"), namespace)  # noqa: S102 - the docs' own code
        except BaseException:  # a block's failure, whatever it is (SystemExit too), is the answer
            answer = {"ok": False, "error": traceback.format_exc()}
        else:
            answer = {"ok": True}
        sys.stderr.flush()
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
