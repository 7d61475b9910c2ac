"""A cell that writes to the kernel's answer pipe: whatever it writes, no later cell gets another cell's result.

Each forgery restarts the kernel (its variables are lost, and the result says so); the cells after it get their
own answers. Run against every sandbox this machine can build, and the unisolated kernel (the same protocol).
"""

import pytest

from security.test_sandbox_escalation import KINDS, open_box
from toolpath.sandboxes.base import SandboxLimits
from toolpath.sandboxes.process import ProcessSandbox

FD = "import os, sys\nfd = int(sys.argv[1])\n"  # the kernel's answer pipe, as a cell finds it


@pytest.fixture(params=KINDS + ("unisolated",))
def box(request):
    if request.param == "unisolated":
        b = ProcessSandbox(SandboxLimits(cell_seconds=10), isolation="unisolated").start()
    else:
        b = open_box(request.param)
    yield b
    b.close()


FORGERIES = {
    "not JSON": "os.write(fd, b'garbage\\n')",
    "not an object": "os.write(fd, b'[1]\\n')",
    "an answer for a later cell": "import json\nos.write(fd, (json.dumps({'id': 'x' * 16, 'stdout': '', 'stderr': '',"
                                  " 'value': repr(42), 'error': None, 'stdout_truncated': False, 'stderr_truncated':"
                                  " False, 'stdout_bytes': 0, 'stderr_bytes': 0, 'images': [], 'images_dropped': 0,"
                                  " 'no_space': False}) + '\\n').encode())",
    "a wrong shape": "os.write(fd, b'{\"value\": \"42\"}\\n')",
    "half a line": "os.write(fd, b'{\"id\": ')",
    "an endless line": "os.write(fd, b'x' * (8 << 20))",
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_answer_restarts_the_kernel_and_later_cells_get_their_own_results(box, forgery):
    box.run("secret = 7")
    r = box.run(FD + FORGERIES[forgery])
    assert r.error and "this cell's result is lost" in r.error
    assert any("kernel was restarted" in n for n in r.notes) and box.restarts == 1
    assert "NameError" in box.run("secret").error  # a fresh kernel, said so above
    assert box.run("6 * 7").value == "42" and box.run("'b' * 3").value == "'bbb'"


def test_a_line_written_after_the_answer_is_caught_before_the_next_cell(box):
    # a thread of the cell writes once the cell has answered: the next cell starts in a fresh kernel
    box.run(FD + "import threading, time\n"
                 "threading.Thread(target=lambda: (time.sleep(0.3), os.write(fd, b'{}\\n'))).start()")
    box.run("import time; time.sleep(1)")  # answered before the stray line, or it takes the stray line's place
    r = box.run("1 + 1")
    assert r.value == "2" and box.restarts == 1
    assert box.run("2 + 2").value == "4"
