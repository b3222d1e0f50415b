"""Runs the python blocks given as a JSON list of sources, top to bottom in one namespace, as a
reader pasting them would; prints a JSON list of each block's captured output on the last line.

Run in a subprocess by test_code_blocks.py, so that each page starts from a fresh interpreter."""
import contextlib
import io
import json
import sys
import traceback


def main() -> int:
    sources = json.load(open(sys.argv[1]))
    namespace = {"__name__": "__main__"}
    outputs = []
    for index, source in enumerate(sources):
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                exec(compile(source, f"<block {index}>", "exec"), namespace)
        except BaseException:
            sys.stdout.write(buffer.getvalue())
            print(f"block {index} raised:", file=sys.stderr)
            traceback.print_exc()
            return 1
        outputs.append(buffer.getvalue())
    print(json.dumps(outputs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
