"""The `shardjit` console script of the wheel: runs the CLI binary installed next to this
package (shardjit/bin/shardjit) with the same arguments, in place of this process."""

import os
import sys


def binary_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "shardjit")


def main():
    path = binary_path()
    if not os.access(path, os.X_OK):
        sys.stderr.write(f"shardjit: the CLI binary is missing from this installation ({path}); "
                         "reinstall with `pip install .` from a source tree built with the tools\n")
        return 127
    # argv[0] as the user typed it, so that --help and errors say "shardjit", not the path.
    os.execv(path, ["shardjit"] + sys.argv[1:])
    return 0  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main())
