"""The Python kernel that runs inside a sandbox: one persistent namespace, one request at a time.

Standalone on purpose (standard library only, no toolpath imports): it is copied alone into the sandbox.
Requests arrive as JSON lines on stdin; responses go as JSON lines to the file descriptor given as argv[1],
so nothing the user's code prints (even with os.write(1, …)) can corrupt the protocol. For each cell the
kernel points fds 1 and 2 at files, runs the code, evaluates a trailing expression like a notebook does,
saves open matplotlib figures and shown PIL images as PNG files, and reports all of it.
"""

import ast
import json
import os
import sys
import traceback

OUT_FD = int(sys.argv[1])
IMAGE_DIR = sys.argv[2] if len(sys.argv) > 2 else "/tmp/images"
namespace = {"__name__": "__main__"}
shown = []  # PIL images passed to .show() during the current cell


def _patch_pil():
    try:
        from PIL import Image
    except ImportError:
        return
    Image.Image.show = lambda self, *a, **k: shown.append(self.copy())


def _images(cell, limit):
    """Save this cell's figures and shown images (at most `limit`); returns (paths, how many were dropped)."""
    os.makedirs(IMAGE_DIR, exist_ok=True)
    pending = []
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        pending += [("figure", num) for num in plt.get_fignums()]
    pending += [("pil", img) for img in shown]
    paths = []
    for kind, item in pending[:limit]:
        p = os.path.join(IMAGE_DIR, "cell%d_%d.png" % (cell, len(paths) + 1))
        if kind == "figure":
            plt.figure(item).savefig(p, format="png")
        else:
            item.save(p, format="PNG")
        paths.append(p)
    if plt is not None:
        plt.close("all")
    shown.clear()
    return paths, len(pending) - len(paths)


def _read_capped(path, cap):
    with open(path, "rb") as f:
        data = f.read(cap + 1)
        size = os.fstat(f.fileno()).st_size
    text = data[:cap].decode("utf-8", "replace")
    return text, size > cap, size


def run_cell(cell, code, output_cap, image_limit):
    result = {"value": None, "error": None}
    out_path, err_path = "/tmp/.cell_stdout", "/tmp/.cell_stderr"
    saved = os.dup(1), os.dup(2)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            tree = ast.parse(code, "<cell %d>" % cell)
            last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None:
                tree.body.pop()
            exec(compile(tree, "<cell %d>" % cell, "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<cell %d>" % cell, "eval"), namespace)
                if value is not None:
                    result["value"] = repr(value)[:output_cap]
        except SystemExit as e:
            result["error"] = "SystemExit(%r): the kernel keeps running" % (e.code,)
        except BaseException:
            etype, evalue, tb = sys.exc_info()
            # Drop the kernel's own frame so the traceback starts in the user's cell.
            result["error"] = "".join(traceback.format_exception(etype, evalue, tb.tb_next))[-output_cap:]
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    result["stdout"], result["stdout_truncated"], result["stdout_bytes"] = _read_capped(out_path, output_cap)
    result["stderr"], result["stderr_truncated"], result["stderr_bytes"] = _read_capped(err_path, output_cap)
    try:
        result["images"], result["images_dropped"] = _images(cell, image_limit)
    except Exception as e:  # a figure that cannot be drawn must not take the kernel down
        result["images"], result["images_dropped"] = [], 0
        result["error"] = (result["error"] or "") + "\n(saving images failed: %s)" % e
    return result


def main():
    _patch_pil()
    out = os.fdopen(OUT_FD, "w", buffering=1)
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    cell = 0
    for line in sys.stdin:
        req = json.loads(line)
        cell += 1
        if req.get("op") == "set":  # preload values (e.g. task images) into the namespace
            try:
                exec(req["code"], namespace)
            except BaseException:  # a preload that fails must be reported, not end the kernel
                out.write(json.dumps({"ok": False, "error": traceback.format_exc()[-2000:]}) + "\n")
            else:
                out.write(json.dumps({"ok": True}) + "\n")
            continue
        res = run_cell(cell, req["code"], int(req.get("output_cap", 20000)), int(req.get("image_limit", 10)))
        out.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
