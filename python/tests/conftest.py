import pathlib
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))


@pytest.fixture
def rng(request):
    """A generator seeded from the test's id: pytest shows the printed seed when the test fails,
    and the same test always draws the same inputs."""
    seed = zlib.crc32(request.node.nodeid.encode())
    print(f"seed {seed}")
    return np.random.default_rng(seed)
