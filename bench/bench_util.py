"""What the benchmark scripts share: the JSON file each writes with --json.

NaN and infinities are written as null (json.dump alone would write the bare NaN and Infinity that
JSON does not have). A path that cannot be written is one line on stderr and exit code 1: checked
before a run by json_writable, so that a bad --json fails at once, and again by write_json.
"""

import json
import math
import os
import sys


def _finite(value):
    """`value` with every non-finite float replaced by None, through dicts, lists and tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _fail(program, path, err):
    print(f"{program}: cannot write {path}: {err.strerror or err}", file=sys.stderr)
    sys.exit(1)


def json_writable(path, program=None):
    """Exits (1) after one line on stderr unless `path` can be written; a file that did not exist
    is removed again. None: nothing to check."""
    if not path:
        return
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as err:
        _fail(program or os.path.basename(sys.argv[0]), path, err)
    if not existed:
        os.remove(path)


def write_json(path, data, program=None, indent=1):
    """Writes `data` to `path` as JSON, non-finite floats as null."""
    try:
        with open(path, "w") as f:
            json.dump(_finite(data), f, indent=indent, allow_nan=False)
            f.write("\n")
    except OSError as err:
        _fail(program or os.path.basename(sys.argv[0]), path, err)
