"""GitHub Actions expressions, the subset e2e/kind/ci-gate runs: literals, contexts (env, steps,
github, runner, job), the status functions, `!`, `==`, `!=`, `&&`, `||` and parentheses, with
GitHub's semantics (`&&`/`||` yield an operand, strings compare ignoring case, mixed types
compare as numbers). Anything else raises Refused at parse time, so no condition is ever guessed.
"""
import re

STATUS_FUNCTIONS = {"always", "success", "failure", "cancelled"}
# github.* keys the executor fills in (ci_gate.github_context); github.token only from $GITHUB_TOKEN.
GITHUB_KEYS = {"event_name", "event", "workspace", "job", "run_id", "run_number", "sha", "ref",
               "repository", "actor", "server_url", "token"}
RUNNER_KEYS = {"os", "arch", "temp"}


class Refused(Exception):
    """A workflow feature the executor does not implement: never run as if it were something else."""


TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!().,\[\]])"
                   r"|(?P<id>[A-Za-z_][A-Za-z0-9_-]*))")


def tokens(text):
    out, i = [], 0
    while i < len(text):
        if text[i:].strip() == "":
            break
        m = TOKEN.match(text, i)
        if not m:
            raise Refused(f"unsupported syntax at {text[i:].strip()[:20]!r} in {text!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        i = m.end()
    return out


def parse(text):
    """The expression's tree: ('lit', v) ('ctx', [names]) ('call', f) ('not', a) ('eq', a, b, negate)
    ('and', a, b) ('or', a, b). Raises Refused on anything outside the subset."""
    toks, pos = tokens(text), 0

    def peek():
        return toks[pos] if pos < len(toks) else (None, None)

    def take(value=None):
        nonlocal pos
        kind, tok = peek()
        if tok is None or (value is not None and tok != value):
            raise Refused(f"expected {value or 'more'} in {text!r}")
        pos += 1
        return kind, tok

    def binary(op, sub, node):
        left = sub()
        while peek()[1] == op:
            take()
            left = (node, left, sub())
        return left

    def or_():
        return binary("||", and_, "or")

    def and_():
        return binary("&&", cmp, "and")

    def cmp():
        left = unary()
        if peek()[1] in ("==", "!="):
            op = take()[1]
            return ("eq", left, unary(), op == "!=")
        return left

    def unary():
        if peek()[1] == "!":
            take()
            return ("not", unary())
        return primary()

    def primary():
        kind, tok = take()
        if tok == "(":
            inner = or_()
            take(")")
            return inner
        if kind == "str":
            return ("lit", tok[1:-1].replace("''", "'"))
        if kind == "num":
            return ("lit", float(tok))
        if kind != "id":
            raise Refused(f"unexpected {tok!r} in {text!r}")
        if tok in ("true", "false", "null"):
            return ("lit", {"true": True, "false": False, "null": None}[tok])
        if peek()[1] == "(":
            if tok not in STATUS_FUNCTIONS:
                known = ", ".join(f + "()" for f in sorted(STATUS_FUNCTIONS))
                raise Refused(f"function {tok}() is not supported (only {known})")
            take("(")
            take(")")
            return ("call", tok)
        path = [tok]
        while peek()[1] in (".", "["):
            if take()[1] == ".":
                k, name = take()
                if k != "id":
                    raise Refused(f"expected a property name after '.' in {text!r}")
                path.append(name)
            else:
                k, name = take()
                if k != "str":
                    raise Refused(f"only ['literal'] indexing is supported in {text!r}")
                path.append(name[1:-1].replace("''", "'"))
                take("]")
        check_context(path, text)
        return ("ctx", path)

    tree = or_()
    if pos != len(toks):
        raise Refused(f"unsupported operator {toks[pos][1]!r} in {text!r}")
    return tree


def check_context(path, text):
    root, rest = path[0], path[1:]
    ok = {
        "env": len(rest) == 1,
        "github": bool(rest) and rest[0] in GITHUB_KEYS and (rest[0] == "event" or len(rest) == 1),
        "runner": len(rest) == 1 and rest[0] in RUNNER_KEYS,
        "job": rest == ["status"],
        "steps": (len(rest) == 3 and rest[1] == "outputs")
        or (len(rest) == 2 and rest[1] in ("outcome", "conclusion")),
    }.get(root, False)
    if not ok:
        raise Refused(f"context {'.'.join(path)} is not supported in {text!r}")


def has_status_call(tree):
    if tree[0] == "call":
        return True
    return any(has_status_call(t) for t in tree[1:] if isinstance(t, tuple))


def condition(text):
    """An `if:` as GitHub reads it: `${{ }}` optional; without a status function, success() && (...)."""
    if isinstance(text, bool):
        text = "true" if text else "false"
    text = str(text).strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    if m:
        text = m.group(1)
    if "${{" in text:
        raise Refused(f"if: mixes text and ${{{{ }}}} in {text!r}")
    tree = parse(text)
    return tree if has_status_call(tree) else ("and", ("call", "success"), tree)


def truthy(v):
    if isinstance(v, float):
        return v == v and v != 0
    return v not in (None, False, "")


def number(v):
    if v is None:
        return 0.0
    if isinstance(v, (bool, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip() or "0")
        except ValueError:
            return float("nan")
    return float("nan")


def equal(a, b):
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if type(a) is type(b) and not isinstance(a, (dict, list)):
        return a == b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    return number(a) == number(b)


def evaluate(tree, ctx):
    """ctx: {'env': {}, 'steps': {id: {'outputs', 'outcome', 'conclusion'}}, 'github': {},
    'runner': {}, 'job': {'status': 'success'|'failure'|'cancelled'}}."""
    op = tree[0]
    if op == "lit":
        return tree[1]
    if op == "ctx":
        v = ctx
        for name in tree[1]:
            if isinstance(v, dict):
                v = v.get(name)
            else:
                return None
        if tree[1] == ["github", "token"] and v is None:
            raise Refused("github.token: no token here (set GITHUB_TOKEN to provide one)")
        return v
    if op == "call":
        status = ctx["job"]["status"]
        return {"always": True, "success": status == "success",
                "failure": status == "failure", "cancelled": status == "cancelled"}[tree[1]]
    if op == "not":
        return not truthy(evaluate(tree[1], ctx))
    if op == "eq":
        return equal(evaluate(tree[1], ctx), evaluate(tree[2], ctx)) != tree[3]
    left = evaluate(tree[1], ctx)
    if op == "and":
        return evaluate(tree[2], ctx) if truthy(left) else left
    return left if truthy(left) else evaluate(tree[2], ctx)  # or


def text(v):
    """A value as ${{ }} puts it into a string."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    if isinstance(v, (dict, list)):
        raise Refused("an object in ${{ }} (GitHub would write JSON) is not supported")
    return str(v)


PLACEHOLDER = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def placeholders(s):
    return [m.group(1) for m in PLACEHOLDER.finditer(s)] if isinstance(s, str) else []


def interpolate(s, ctx):
    if not isinstance(s, str):
        return s
    return PLACEHOLDER.sub(lambda m: text(evaluate(parse(m.group(1)), ctx)), s)
