#!/usr/bin/env python3
"""Keep the outputs shown in docs/diagnostics.md true.

Every block in the doc that starts with `$ ipu check NAME.ipu [args]`, where
NAME.ipu is a script in tests/diagnostics, shows what `ipu` prints for that
script with its `// expect-...` comments removed. This reruns each command and
either checks the blocks (`--check`, used by the test suite) or rewrites them
(`--update`). Other blocks (commands on missing or generated files) are left
alone.

usage: doc_outputs.py IPU_BINARY ROOT --check|--update
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

EXPECT_TRAIL = re.compile(r'[ \t]*(//|--)\s*expect-(error|warning|json):.*$')
EXPECT_LINE = re.compile(r'^\s*(//|--)\s*expect-(error|warning|json):.*$')
BLOCK = re.compile(r'```text\n\$ ipu (check|estimate|run) (\S+\.ipu)((?: [^\n]*)?)\n(.*?)```', re.S)


def strip(text):
    lines = [l for l in text.split('\n') if not EXPECT_LINE.match(l)]
    return '\n'.join(EXPECT_TRAIL.sub('', l) for l in lines)


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ('--check', '--update'):
        print(__doc__, file=sys.stderr)
        return 2
    ipu, root, mode = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    source = os.path.join(root, 'tests', 'diagnostics')
    doc_path = os.path.join(root, 'docs', 'diagnostics.md')
    work = tempfile.mkdtemp(prefix='ipu-doc-')
    try:
        for name in os.listdir(source):
            data = open(os.path.join(source, name), 'rb').read()
            if name.endswith('.ipu'):
                data = strip(data.decode('latin-1')).encode('latin-1')
            open(os.path.join(work, name), 'wb').write(data)
        # IPU_NO_CACHE: the searches of the examples are run, not read from the user's cache.
        env = dict(os.environ, NO_COLOR='1', IPU_NO_CACHE='1')
        env.pop('FORCE_COLOR', None)
        env.pop('CLICOLOR_FORCE', None)
        doc = open(doc_path, encoding='utf-8').read()
        stale = []

        def replace(match):
            command, script, args, shown = match.group(1), match.group(2), match.group(3), match.group(4)
            if not os.path.exists(os.path.join(work, script)):
                return match.group(0)
            run = subprocess.run([ipu, command, script] + args.split(), cwd=work, capture_output=True, env=env)
            actual = (run.stderr + run.stdout).decode('utf-8', errors='replace').rstrip('\n') + '\n'
            # What depends on the machine or the temporary directory is shown generically.
            actual = actual.replace(work + '/', '')
            actual = re.sub(r'this host has [0-9.]+ [KMGT]?B available', 'this host has ... available', actual)
            if actual != shown:
                stale.append(command + ' ' + script + args)
            return '```text\n$ ipu %s %s%s\n%s```' % (command, script, args, actual)

        updated = BLOCK.sub(replace, doc)
        if mode == '--update':
            if updated != doc:
                open(doc_path, 'w', encoding='utf-8').write(updated)
            print('updated %d block(s)' % len(stale))
            return 0
        for s in stale:
            print('docs/diagnostics.md shows stale output for `ipu %s`' % s, file=sys.stderr)
        if stale:
            print('run: tests/diagnostics/doc_outputs.py build/ipu . --update', file=sys.stderr)
        return 1 if stale else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
