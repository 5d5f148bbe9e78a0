#!/usr/bin/env python3
"""tests/layers_check.py HEADER [--stats] - the header's layers: no call from a section to a later one.

A section starts at a line "// >>name". For every function defined in a section (and every
function-like macro's body), each call it makes to a function or macro the header defines must
be to one defined in the same section (order inside a section is free: C's prototypes) or in an
earlier one. The >>api section (public declarations) and the manual above it define nothing.
Calls through a pointer (a member "x->fn(" or "x.fn(", a hooks table, the kernel table) are not
calls to a name, so they pass: that is how a lower layer reaches a higher one.

Comments, strings and character literals are blanked first (line numbers kept). Braces are
counted per preprocessor branch: each #else / #elif branch starts from the depth at its #if, and
the depth after #endif is the first branch's, so "#if A  if (a) {  #else  if (b) {  #endif" counts
one brace.

Prints one line per violation:  FILE:LINE: section X calls FN defined in later section Y
and, with --defs, every function definition found ("def NAME SECTION LINE"); with --stats, a last line "sections S, functions F, macros M, calls C" (the self-check that
the scan saw the file). Exit status 1 when a violation was found, 2 on a file it cannot read.
"""
import re
import sys

DUMP = False

KEYWORDS = set("""if else for while do switch case default return sizeof goto break continue
typedef struct union enum static inline extern const volatile register auto signed unsigned
void char short int long float double _Bool _Pragma __attribute__ __declspec __asm__ asm
defined restrict __restrict __restrict__ _Alignof _Static_assert __typeof__ typeof
__builtin_expect""".split())


def strip(text):
    """Blanks comments, strings and char literals (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '/' and i + 1 < n and text[i + 1] == '/':
            j = text.find('\n', i)
            if j < 0:
                j = n
            # a // comment ending in a backslash continues; rare, not in C99 style: stop at newline
            out.append(' ' * (j - i))
            i = j
        elif c == '/' and i + 1 < n and text[i + 1] == '*':
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            seg = text[i:j]
            out.append(c + re.sub(r'[^\n]', ' ', seg[1:-1]) + (c if len(seg) > 1 else ''))
            i = j
        else:
            # copy a run of ordinary characters at once
            m = re.compile(r'[^/"\']+').match(text, i)
            if m:
                out.append(m.group(0))
                i = m.end()
            else:
                out.append(c)
                i += 1
    return ''.join(out)


def scan(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            raw = f.read()
    except OSError as e:
        print('%s: cannot read: %s' % (path, e), file=sys.stderr)
        sys.exit(2)
    lines = raw.split('\n')
    # sections by line (1-based): name and order
    sec_of = [None] * (len(lines) + 2)
    order = {}
    cur = None
    for i, l in enumerate(lines, 1):
        m = re.match(r'// >>([a-z0-9_]+)', l)
        if m:
            cur = m.group(1)
            order.setdefault(cur, len(order))
        sec_of[i] = cur
    text = strip(raw)
    slines = text.split('\n')

    # preprocessor directives (with continuations) out of the code stream; #define recorded
    code = []           # (line, text) of code lines
    directives = {}     # first line -> directive text (joined)
    i = 0
    while i < len(slines):
        l = slines[i]
        if re.match(r'\s*#', l):
            start = i
            d = l
            while d.endswith('\\') and i + 1 < len(slines):
                i += 1
                d = d[:-1] + ' ' + slines[i]
            directives[start + 1] = d
            for k in range(start, i + 1):
                code.append((k + 1, ''))
        else:
            code.append((i + 1, l))
        i += 1

    defs = {}     # name -> list of (section order, line)
    nfun = nmac = 0

    def define(name, line):
        s = sec_of[line]
        if s is None or s == 'api':
            return False
        defs.setdefault(name, []).append((order[s], line))
        return True

    # macros
    macro_bodies = []
    for line, d in directives.items():
        m = re.match(r'\s*#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)', d)
        if m and define(m.group(1), line):
            nmac += 1
            macro_bodies.append((line, m.group(1), m.group(3)))

    # functions: tokens with depth per preprocessor branch
    tok_re = re.compile(r'[A-Za-z_]\w*|->|[{}();=,.]|\S')
    ident = re.compile(r'[A-Za-z_]\w*$')
    refs = []   # (line, section, owner, name, is_call): a name used inside braces
    depth = 0
    stack = []  # [depth at #if, depth after the first branch or None]
    head = []   # tokens at depth 0 since the last ; or }
    fn = None   # the function whose body is open
    prev2 = prev = None
    prev_in = False  # prev was read inside braces (a body or an initializer)
    extern_c = 0
    for line, l in code:
        d = directives.get(line)
        if d is not None:
            m = re.match(r'\s*#\s*(\w+)', d)
            kw = m.group(1) if m else ''
            if kw in ('if', 'ifdef', 'ifndef'):
                stack.append([depth, None])
            elif kw in ('elif', 'else') and stack:
                if stack[-1][1] is None:
                    stack[-1][1] = depth
                depth = stack[-1][0]
            elif kw == 'endif' and stack:
                top = stack.pop()
                if top[1] is not None:
                    depth = top[1]
            head = [] if depth == 0 else head
            continue
        for t in tok_re.findall(l):
            if prev_in and ident.match(prev) and prev not in KEYWORDS and prev2 not in ('->', '.'):
                refs.append((line, sec_of[line], fn, prev, t == '('))
            if t == '{':
                if depth == 0:
                    if head and head[0] == 'extern' and all(x == '"' for x in head[1:]):
                        extern_c += 1
                        head = []
                        prev2, prev, prev_in = prev, t, False
                        continue
                    name = None
                    if head and head[-1] == ')' and '=' not in head:
                        # the last parenthesized group is the parameter list; the name stands before it
                        # (a macro call without a semicolon may come first: it is not the name)
                        k, pd = len(head) - 1, 0
                        while k >= 0:
                            pd += (head[k] == ')') - (head[k] == '(')
                            if pd == 0:
                                break
                            k -= 1
                        if k >= 1 and ident.match(head[k - 1]) and head[k - 1] not in KEYWORDS:
                            name = head[k - 1]
                    if name and define(name, line):
                        nfun += 1
                        fn = name
                        if DUMP:
                            print('def %s %s %d' % (name, sec_of[line], line))
                depth += 1
            elif t == '}':
                if depth == 0 and extern_c:
                    extern_c -= 1
                    head = []
                    prev2, prev, prev_in = prev, t, False
                    continue
                depth -= 1
                if depth == 0:
                    fn = None
                    head = []
            elif depth == 0:
                if t == ';':
                    head = []
                else:
                    head.append(t)
            prev2, prev, prev_in = prev, t, depth > 0

    for line, name, body in macro_bodies:
        toks = tok_re.findall(body) + ['']
        for k in range(len(toks) - 1):
            if ident.match(toks[k]) and toks[k] not in KEYWORDS and (k < 1 or toks[k - 1] not in ('->', '.')):
                refs.append((line, sec_of[line], name, toks[k], toks[k + 1] == '('))

    names = {v: k for k, v in order.items()}
    seen = set()
    nrefs = 0
    for line, sec, owner, callee, is_call in sorted(refs, key=lambda r: r[0]):
        if sec in (None, 'api') or callee not in defs or callee == owner:
            continue
        nrefs += 1
        first = min(o for o, _ in defs[callee])
        if first > order[sec] and (line, callee) not in seen:
            seen.add((line, callee))
            print('%s:%d: section %s %s %s defined in later section %s'
                  % (path, line, sec, 'calls' if is_call else 'uses', callee, names[first]))
    return len(seen), len(order), nfun, nmac, nrefs, depth, stack


def main():
    global DUMP
    DUMP = '--defs' in sys.argv
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    if len(args) != 1:
        print(__doc__.split('\n')[0], file=sys.stderr)
        sys.exit(2)
    nbad, nsec, nfun, nmac, nrefs, depth, stack = scan(args[0])
    if depth != 0 or stack:
        print('%s: braces or #if groups do not balance at the end (depth %d, %d open #if)' % (args[0], depth, len(stack)))
        nbad += 1
    if '--stats' in sys.argv:
        print('sections %d, functions %d, macros %d, calls and uses %d' % (nsec, nfun, nmac, nrefs))
    sys.exit(1 if nbad else 0)


if __name__ == '__main__':
    main()
