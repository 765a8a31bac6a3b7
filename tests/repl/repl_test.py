#!/usr/bin/env python3
"""`ipu repl` as a user meets it.

Script mode (stdin is not a terminal): what each input prints, the exit status,
diagnostics pointing into the typed input. Interactive mode runs under a
pseudo-terminal: prompts and continuation lines, Tab completion, history kept
across sessions, Ctrl-C abandoning a line or stopping a `:run`, Ctrl-D leaving.

usage: repl_test.py IPU ROOT
"""
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

IPU, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = []


def check(cond, what, detail=""):
    if not cond:
        failures.append(what)
        print("FAIL: " + what + ("\n" + detail if detail else ""))


def script(text, cwd, *args):
    env = dict(os.environ, NO_COLOR="1")
    p = subprocess.run([IPU, "repl", *args], input=text, capture_output=True, text=True, cwd=cwd, env=env,
                       timeout=300)
    return p.returncode, p.stdout, p.stderr


def script_mode(tmp):
    code, out, err = script(
        'import "std/pods"\n'
        'import "std/models/bert"\n'
        "let seqs = [128,\n"
        "  384]\n"
        "seqs\n"
        ":type seqs\n"
        ":type 2 GB / 4\n"
        "model small = bert(layers: 2, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)\n"
        "small\n"
        "small.params\n"
        ":doc mapping.replicas\n"
        "let seqs = [64]\n"
        "seqs\n", tmp)
    check(code == 0, "script mode: a clean session exits 0", err)
    check("defined let seqs" in out and "replaced let seqs" in out, "script mode: definitions are acknowledged", out)
    check("[128, 384]" in out, "script mode: an expression over two lines prints its value", out)
    check("list of number, 2 items" in out, "script mode: :type of a list", out)
    check(re.search(r"^bytes\b", out, re.M) is not None, "script mode: :type of a quantity has its dimension", out)
    m = re.search(r"model small: (\d+) layers, ([\d,]+) ", out)
    check(m is not None, "script mode: a model shows its layers and parameters", out)
    if m:
        # 2 encoder layers of hidden 64, ffn 256, vocab 1000, 128 positions: the
        # count must agree with the `params` property shown on the next line.
        params = int(m.group(2).replace(",", ""))
        check(str(params) in out.replace(",", "").split("small:")[1], "script mode: `small.params` agrees", out)
    check("data-parallel replicas" in out, "script mode: :doc of a field", out)
    check(out.rstrip().endswith("[64]"), "script mode: a redefinition replaces the old value", out)

    # The first error ends a script-mode session with status 1, and points into the input.
    code, out, err = script("let a = 1\nlet b = a +* 2\nlet c = 3\n", tmp)
    check(code == 1, "script mode: an error exits 1", f"exit {code}")
    check("<input>:1:" in err and "^" in err, "script mode: the diagnostic names the input line and has a caret", err)
    check("defined let c" not in out, "script mode: nothing runs after the first error", out)

    code, out, err = script(":estimat pretrain\n", tmp)
    check(code == 1 and "did you mean `:estimate`" in err, "script mode: an unknown command suggests the right one", err)

    code, out, err = script("let a = [1,\n", tmp)
    check(code == 1 and "never closed" in err, "script mode: input ending inside a bracket is an error", err)

    # A variant mapping estimated in one line, then the workspace saved and checked as a script.
    bert = os.path.join(ROOT, "examples", "bert_large_pod16.ipu")
    code, out, err = script(
        "mapping m8 = pod16 with { pipeline: balanced(8), replicas: 2, available_memory_proportion: 0.2 }\n"
        ":estimate m8\n"
        ":mem pod16\n"
        ":save saved.ipu\n", tmp, bert)
    check(code == 0, "script mode: load a script, estimate a variant, save", err)
    check("training `pretrain` with mapping `m8`" in out, "script mode: :estimate MAPPING uses the last training", out)
    check("samples/s" in out, "script mode: :estimate prints throughput", out)
    check("its own mapping `pod16`" in out and "fits" in out, "script mode: :mem of the training's own mapping", out)
    p = subprocess.run([IPU, "check", os.path.join(tmp, "saved.ipu")], capture_output=True, text=True)
    check(p.returncode == 0, "the saved workspace is a script that checks", p.stderr)
    if p.returncode == 0:
        with open(os.path.join(tmp, "saved.ipu")) as f:
            check("mapping m8 = pod16 with" in f.read(), "the saved workspace has the variant")

    code, out, err = script(":load does-not-exist.ipu\n", tmp)
    check(code == 1 and "cannot read `does-not-exist.ipu`" in err, "script mode: :load of a missing file", err)

    code, out, err = script(":save /nonexistent-dir/x.ipu\n", tmp)
    check(code == 1 and "cannot write" in err, "script mode: :save where it cannot write", err)

    code, out, err = script(":run nothing\n", tmp)
    check(code == 1 and "nothing is named `nothing`" in err, "script mode: :run of an unknown name", err)


class Terminal:
    """`ipu repl` on a pseudo-terminal, read as a user would see it.

    Input is sent only once the prompt is back, as a person types: keys typed
    while a command runs reach a terminal in cooked mode, where an early Ctrl-D
    can be lost when the line editor switches modes again."""

    def __init__(self, cwd, history):
        env = dict(os.environ, NO_COLOR="1", IPU_HISTORY=history, TERM="dumb")
        env.pop("INPUTRC", None)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(cwd)
            os.execve(IPU, [IPU, "repl"], env)
        self.seen = ""

    def send(self, text):
        os.write(self.fd, text.encode())

    def expect(self, pattern, timeout=60):
        """Reads until `pattern` (a regex) appears after what was already matched."""
        deadline = time.time() + timeout
        while True:
            m = re.search(pattern, self.seen, re.S)
            if m:
                self.seen = self.seen[m.end():]
                return True
            left = deadline - time.time()
            if left <= 0:
                return False
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                continue
            try:
                chunk = os.read(self.fd, 4096).decode(errors="replace")
            except OSError:
                return False
            if not chunk:
                return False
            self.seen += chunk.replace("\r", "")

    def close(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                if r:
                    os.read(self.fd, 4096)
            except OSError:
                time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return None


def interactive(tmp):
    history = os.path.join(tmp, "history")
    t = Terminal(tmp, history)
    check(t.expect(r"ipu repl.*?\nipu> "), "interactive: a banner and a prompt", t.seen)
    t.send("let sizes = [1,\n")
    check(t.expect(r"\.\.\.> "), "interactive: an open bracket gives a continuation prompt", t.seen)
    t.send("2, 3]\n")
    check(t.expect(r"defined let sizes\nipu> "), "interactive: the continued input is one definition", t.seen)
    t.send("siz\t\n")
    check(t.expect(r"\n\[1, 2, 3\]\nipu> "), "interactive: Tab completes a declared name", t.seen)
    t.send(":esti\t\n")
    check(t.expect(r"name a training.*?\nipu> "), "interactive: Tab completes a command", t.seen)
    t.send("let broken = (1 +")
    time.sleep(0.3)
    t.send("\x03")
    check(t.expect(r"\nipu> "), "interactive: Ctrl-C abandons the line and prompts again", t.seen)
    t.send("broken\n")
    check(t.expect(r"unknown name `broken`.*?\nipu> ", timeout=30),
          "interactive: the abandoned line was not submitted", t.seen)
    t.send("[40, 2]\n")
    check(t.expect(r"\n\[40, 2\]\nipu> "), "interactive: a list expression prints", t.seen)
    t.send("\x04")
    code = t.close()
    check(code == 0, "interactive: Ctrl-D leaves with status 0", f"exit {code}")
    with open(history) as f:
        # libedit's format escapes spaces and newlines (strvis): `\040`, `\012`.
        lines = f.read().replace("\\040", " ").replace("\\012", "\n")
    check("let sizes = [1,\n2, 3]" in lines and "broken" in lines and "let broken = (1 +" not in lines,
          "interactive: the history file keeps what was entered (not the abandoned line)", lines)

    # A second session recalls the first one's input with the Up arrow.
    t = Terminal(tmp, history)
    check(t.expect(r"ipu> "), "interactive: second session prompts", t.seen)
    t.send("\x1b[A\n")  # Up: the last line of the first session
    check(t.expect(r"\n\[40, 2\]\nipu> "), "interactive: Up recalls the previous session's input", t.seen)
    t.send(":quit\n")
    code = t.close()
    check(code == 0, "interactive: :quit leaves with status 0", f"exit {code}")

    # Ctrl-C stops a running training and the session goes on.
    t = Terminal(tmp, history)
    t.expect(r"ipu> ")
    t.send(":load " + os.path.join(ROOT, "examples", "tiny_bert.ipu") + "\n")
    check(t.expect(r"defined training tiny_pretrain.*?ipu> ", timeout=60), "interactive: :load a script", t.seen)
    t.send(":run tiny_pretrain\n")
    check(t.expect(r"phase short", timeout=120), "interactive: :run starts training", t.seen)
    check(t.expect(r"\d+/1000", timeout=120), "interactive: :run shows progress", t.seen)
    t.send("\x03")
    check(t.expect(r"stopped by Ctrl-C: training tiny_pretrain, recorded in", timeout=60),
          "interactive: Ctrl-C stops the training", t.seen)
    check(t.expect(r"ipu> ", timeout=30), "interactive: the session goes on after Ctrl-C", t.seen)
    t.send("1 + 1\n")
    check(t.expect(r"\n2\nipu> "), "interactive: the session still evaluates", t.seen)
    t.send("\x04")
    code = t.close()
    check(code == 0, "interactive: leaves after a stopped run", f"exit {code}")
    runs = os.path.join(tmp, "runs", "tiny_pretrain")
    check(os.path.isdir(runs) and len(os.listdir(runs)) == 1, "interactive: the stopped run was recorded")


def main():
    tmp = tempfile.mkdtemp(prefix="ipu-repl-test-")
    try:
        script_mode(tmp)
        interactive(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} REPL check(s) failed")
        return 1
    print("REPL checks passed")
    return 0


sys.exit(main())
