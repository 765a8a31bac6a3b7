#!/usr/bin/env python3
"""Keeps the editor grammars true to the language's own sources.

The keyword list has one source, grammar/IpuLexer.g4 (every lexer rule whose
literal is a word); the declaration kinds are the parser's `declKind`
(grammar/IpuParser.g4); the units are those of interpreter/check/units.cpp;
the built-in functions those the evaluator defines (interpreter/check/evaluator.cpp),
the learning-rate decays the plan's name table (runtime/ir/kinds.cpp). This script reads those lists back from the
sources and compares them with what the editor grammars colour:

  editor/vscode/syntaxes/ipu.tmLanguage.json
    keywords     the words of every alternation `(a|b|c)` that a rule colours with
                 a keyword.*, storage.* or constant.language.* scope
    declarations the words coloured storage.type.declaration.*
    units        the alternatives coloured keyword.other.unit.*
    not units    every negative lookahead of words `(?!(?:a|b|c)...)`: the names
                 that cannot be a unit after a number must be the keywords
    built-ins    support.function.builtin.*; decays support.function.decay.*
  editor/vim/syntax/ipu.vim
    keywords     the \\v<(a|b|c)> alternations of the `syntax match ipuKeyword...` lines
    declarations ipuKeywordDecl; units ipuUnit; not units: ipuErrorUnit's (<(...)>)@!
    built-ins    ipuBuiltin; decays ipuDecay

It fails when a keyword (or unit, built-in, decay) is missing from a grammar,
and when a grammar colours as such a word that is not one. Usage:
  python3 tests/editor/check_editor_sync.py [ROOT]
"""
import json
import re
import sys
from pathlib import Path

WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
UNIT = re.compile(r"^(%|[A-Za-z]+(/[A-Za-z]+)?)$")


class Problem(Exception):
    pass


# ------------------------------------------------------------------ the sources

def lexer_keywords(root):
    """{TOKEN: word} for every lexer rule whose literal is a word."""
    text = (root / "grammar/IpuLexer.g4").read_text()
    rules = dict(re.findall(r"(?m)^\s*([A-Z][A-Z0-9_]*)\s*:\s*'([A-Za-z_][A-Za-z0-9_]*)'\s*;", text))
    if len(rules) < 10:
        raise Problem("grammar/IpuLexer.g4: found only %d keyword rules (`NAME : 'word' ;`)" % len(rules))
    return rules


def parser_decl_kinds(root, tokens):
    text = (root / "grammar/IpuParser.g4").read_text()
    m = re.search(r"(?ms)^declKind\s*:(.*?);", text)
    if not m:
        raise Problem("grammar/IpuParser.g4: no `declKind : ... ;` rule")
    names = re.findall(r"[A-Z][A-Z0-9_]*", m.group(1))
    missing = [n for n in names if n not in tokens]
    if missing or not names:
        raise Problem("grammar/IpuParser.g4: declKind names tokens that are not keywords: %s" % missing)
    return {tokens[n] for n in names}


def source_units(root):
    text = (root / "interpreter/check/units.cpp").read_text()
    units = set(re.findall(r'\badd\(\s*"([^"]+)"', text)) | set(re.findall(r'\bm\[\s*"([^"]+)"\s*\]\s*=', text))
    if len(units) < 10:
        raise Problem("interpreter/check/units.cpp: found only %d units (`add(\"NAME\", ...)` in the unit table)" % len(units))
    return units


def source_builtins(root):
    text = (root / "interpreter/check/evaluator.cpp").read_text()
    m = re.search(r"for\s*\(\s*const char\s*\*\s*name\s*:\s*\{([^}]*)\}\s*\)", text)
    if not m:
        raise Problem("interpreter/check/evaluator.cpp: cannot find the built-in functions "
                      "(`for (const char* name : {\"min\", ...})`); update tests/editor/check_editor_sync.py")
    return set(re.findall(r'"([^"]+)"', m.group(1)))


def source_decays(root):
    # The decays are the plan's closed enum; its name table is `nameOf(LrDecay)`.
    text = (root / "runtime/ir/kinds.cpp").read_text()
    m = re.search(r"const char\* nameOf\(LrDecay \w+\)\s*\{(.*?)\n\}", text, re.S)
    if not m:
        raise Problem("runtime/ir/kinds.cpp: cannot find the decays (`const char* nameOf(LrDecay d) { ... }`); "
                      "update tests/editor/check_editor_sync.py")
    return set(re.findall(r'case LrDecay::\w+:\s*return "([^"]+)"', m.group(1)))


# ------------------------------------------------------------------ regular expressions

def groups(regex):
    """The parenthesised groups of an Oniguruma regex: a list of
    (kind, number, content), kind being 'capture', '?:', '?=', '?!', '?<=', '?<!'."""
    out, stack, number, i = [], [], 0, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            if i < len(regex) and regex[i] == "^":
                i += 1
            if i < len(regex) and regex[i] == "]":
                i += 1
            while i < len(regex) and regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
            i += 1
            continue
        if c == "(":
            if regex.startswith("(?", i):
                kind = next(k for k in ("?<=", "?<!", "?:", "?=", "?!", "?>", "?") if regex.startswith("(" + k, i))
                stack.append((kind, None, i + 1 + len(kind)))
            else:
                number += 1
                stack.append(("capture", number, i + 1))
        elif c == ")":
            kind, n, start = stack.pop()
            out.append((kind, n, regex[start:i]))
        i += 1
    return out


def split_top(text, sep="|"):
    parts, depth, cur, i = [], 0, "", 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            cur += text[i:i + 2]
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur)
    return parts


def alternatives(text):
    """The alternatives of `a|b|c`, `(?:a|b|c)` or `\\b(?:a|b)\\b`, unwrapped."""
    t = text
    for _ in range(4):
        t = re.sub(r"^\\b|\\b$", "", t)
        if t.startswith("(?:") and t.endswith(")") and len(split_top(t[3:-1], "\x00")) == 1 and _balanced(t[3:-1]):
            t = t[3:-1]
    return split_top(t)


def _balanced(t):
    depth = 0
    i = 0
    while i < len(t):
        if t[i] == "\\":
            i += 2
            continue
        depth += {"(": 1, ")": -1}.get(t[i], 0)
        if depth < 0:
            return False
        i += 1
    return depth == 0


def words(text):
    """The words of a pure word alternation, or None."""
    alts = [a.replace("\\b", "") for a in alternatives(text)]
    return set(alts) if alts and all(WORD.match(a) for a in alts) else None


def unit_names(text):
    alts = [re.sub(r"\\s\*", "", a).replace("\\/", "/").replace("\\%", "%").strip() for a in alternatives(text)]
    return set(alts) if alts and all(UNIT.match(a) for a in alts) else None


# ------------------------------------------------------------------ TextMate

KEYWORD_SCOPE = re.compile(r"^(keyword\.(control|other)\.(?!unit)|keyword\.operator\.logical|storage\.|constant\.language\.)")


def textmate(path):
    grammar = json.loads(path.read_text())
    found = {"keywords": set(), "declarations": set(), "units": set(), "builtins": set(), "decays": set(),
             "exclusions": []}
    problems = []

    def classify(scope, text, where):
        for s in scope.split():
            if s.startswith("keyword.other.unit"):
                u = unit_names(text)
                if u is None:
                    problems.append("%s: a %s capture that is not a list of units: %s" % (where, s, text))
                else:
                    found["units"] |= u
            elif KEYWORD_SCOPE.match(s):
                w = words(text)
                if w is not None:
                    found["keywords"].update(w)
                    if s.startswith("storage.type.declaration"):
                        found["declarations"].update(w)
            elif s.startswith("support.function.builtin") or s.startswith("support.function.decay"):
                w = words(text)
                if w is None:
                    problems.append("%s: a %s capture that is not a list of words: %s" % (where, s, text))
                else:
                    found["builtins" if "builtin" in s else "decays"].update(w)

    def walk(node, where):
        if isinstance(node, list):
            for i, x in enumerate(node):
                walk(x, "%s[%d]" % (where, i))
            return
        if not isinstance(node, dict):
            return
        for key in ("match", "begin"):
            regex = node.get(key)
            if not isinstance(regex, str):
                continue
            gs = groups(regex)
            by_number = {n: c for kind, n, c in gs if kind == "capture"}
            for kind, _, content in gs:
                if kind == "?!":
                    inner = groups(content)
                    lists = [words(c) for k, _, c in inner if k == "?:"] if inner else []
                    for w in lists:
                        if w is not None and len(w) > 1:
                            found["exclusions"].append(("%s.%s" % (where, key), w))
            caps = node.get("captures" if key == "match" else "beginCaptures", {})
            for num, cap in caps.items():
                if isinstance(cap, dict) and "name" in cap:
                    content = regex if num == "0" else by_number.get(int(num))
                    if content is None:
                        problems.append("%s: capture %s has no group in %s" % (where, num, regex))
                    else:
                        classify(cap["name"], content, "%s.%s capture %s" % (where, key, num))
            if key == "match" and "name" in node:
                classify(node["name"], regex, "%s.match" % where)
        for k, v in node.items():
            if isinstance(v, (dict, list)):
                walk(v, "%s.%s" % (where, k))

    walk(grammar, path.name)
    return found, problems


# ------------------------------------------------------------------ Vim

def vim(path):
    found = {"keywords": set(), "declarations": set(), "units": set(), "builtins": set(), "decays": set(),
             "exclusions": []}
    problems = []
    for lnum, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^\s*syn(?:tax)?\s+match\s+(ipu\w+)\s+(?:contained\s+)?(\S)(.*)$", line)
        if not m:
            continue
        group, delim, rest = m.groups()
        pattern = rest[:rest.index(delim)] if delim in rest else rest
        where = "%s:%d" % (path.name, lnum)
        word_lists = [words(g) for g in re.findall(r"<\(([^()]*)\)>", pattern)]
        if group.startswith("ipuKeyword"):
            if not word_lists or any(w is None for w in word_lists):
                problems.append("%s: %s is not written \\v<(word|word)>: %s" % (where, group, pattern))
                continue
            for w in word_lists:
                found["keywords"] |= w
                if group == "ipuKeywordDecl":
                    found["declarations"] |= w
        elif group == "ipuUnit":
            body = pattern[2:] if pattern.startswith("\\v") else pattern
            first = re.match(r"^\(([^()]*(?:\([^()]*\)[^()]*)*)\)", body)
            u = unit_names(first.group(1)) if first else unit_names(body)
            if u is None:
                problems.append("%s: ipuUnit is not a list of units: %s" % (where, pattern))
            else:
                found["units"] |= u
        elif group == "ipuErrorUnit":
            m2 = re.search(r"\(<\(([^()]*)\)>\)@!", pattern)
            if m2:
                found["exclusions"].append((where, words(m2.group(1)) or set()))
        elif group in ("ipuBuiltin", "ipuDecay"):
            w = [x for x in word_lists if x is not None]
            if not w:
                problems.append("%s: %s is not written \\v<(word|word)>: %s" % (where, group, pattern))
            for x in w:
                found["builtins" if group == "ipuBuiltin" else "decays"] |= x
    return found, problems


# ------------------------------------------------------------------ comparison

def compare(name, found, problems, truth):
    failures = list(problems)

    def same(what, got, want, extras_fail=True):
        missing, extra = sorted(want - got), sorted(got - want)
        if missing:
            failures.append("%s: %s missing: %s" % (name, what, " ".join(missing)))
        if extra and extras_fail:
            failures.append("%s: coloured as %s but not %s: %s" % (name, what, what, " ".join(extra)))

    same("keywords", found["keywords"], truth["keywords"])
    same("declaration kinds", found["declarations"], truth["declarations"])
    same("units", found["units"], truth["units"])
    same("built-in functions", found["builtins"], truth["builtins"])
    same("decays", found["decays"], truth["decays"])
    if not found["exclusions"]:
        failures.append("%s: no list of the names that cannot be a unit (the keywords) found" % name)
    for where, w in found["exclusions"]:
        if w != truth["keywords"]:
            failures.append("%s: %s: the names that cannot be a unit must be the keywords; missing %s, extra %s"
                            % (name, where, sorted(truth["keywords"] - w), sorted(w - truth["keywords"])))
    return failures


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]).resolve()
    try:
        tokens = lexer_keywords(root)
        truth = {
            "keywords": set(tokens.values()),
            "declarations": parser_decl_kinds(root, tokens),
            "units": source_units(root),
            "builtins": source_builtins(root),
            "decays": source_decays(root),
        }
    except (Problem, OSError) as e:
        print("FAIL %s" % e)
        return 1
    failures = []
    failures += compare("ipu.tmLanguage.json", *textmate(root / "editor/vscode/syntaxes/ipu.tmLanguage.json"), truth)
    failures += compare("syntax/ipu.vim", *vim(root / "editor/vim/syntax/ipu.vim"), truth)
    for f in failures:
        print("FAIL " + f)
    print("%d keywords (%d declaration kinds), %d units, %d built-ins, %d decays checked in the TextMate "
          "grammar and the Vim syntax: %s" % (len(truth["keywords"]), len(truth["declarations"]), len(truth["units"]),
                                              len(truth["builtins"]), len(truth["decays"]),
                                              "%d failure(s)" % len(failures) if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
