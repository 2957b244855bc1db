"""cpu tier: shardjit/_shardjit.pyi names what the extension defines, with the same parameters."""

import ast
import pathlib
import re

import shardjit

STUB = pathlib.Path(shardjit.__file__).with_name("_shardjit.pyi")
EXTENSION = shardjit._shardjit


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_members(tree):
    """{name: None for a function or attribute, {member: node} for a class} of the stub's top level."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members.setdefault(item.name, []).append(item)
                elif isinstance(item, ast.AnnAssign):
                    members[item.target.id] = []
            out[node.name] = members
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = None
    return out


def public(names):
    return {n for n in names if not n.startswith("_")}


def test_top_level_names_match():
    stub = stub_members(stub_tree())
    assert public(stub) | {"__version__"} == public(dir(EXTENSION)) | {"__version__"}
    assert "__version__" in stub


def test_class_members_match():
    stub = stub_members(stub_tree())
    for name, members in stub.items():
        cls = getattr(EXTENSION, name)
        if not isinstance(cls, type) or issubclass(cls, BaseException):
            continue
        defined = {m for m in vars(cls) if not m.startswith("_")}
        assert public(members) == defined, name


def parameters(signature_line):
    """Parameter names of a nanobind signature line 'name(self, a: T, *, b: U = 1) -> R'."""
    inside = signature_line[signature_line.index("(") + 1: signature_line.rindex(")")]
    depth, names, current = 0, [], ""
    for ch in inside + ",":
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            token = current.strip()
            if token not in ("/", "*", "self", ""):
                names.append(re.match(r"\*{0,2}(\w+)", token).group(1))
            current = ""
        else:
            current += ch
    return names


def stub_parameters(node):
    args = node.args
    every = args.posonlyargs + args.args + args.kwonlyargs
    return [a.arg for a in every if a.arg != "self"]


def test_method_parameters_match():
    stub = stub_members(stub_tree())
    checked = 0
    for name, members in stub.items():
        cls = getattr(EXTENSION, name)
        if isinstance(members, ast.FunctionDef):
            assert stub_parameters(members) == parameters(cls.__doc__.splitlines()[0]), name
            checked += 1
            continue
        if members is None or not isinstance(cls, type) or issubclass(cls, BaseException):
            continue
        for member, nodes in members.items():
            attr = vars(cls).get(member)
            # Constructors with **kwargs (LinearLogp) are typed by name in the stub on purpose.
            if not nodes or isinstance(attr, property) or member == "__init__" or member.startswith("__"):
                continue
            doc = getattr(cls, member).__doc__
            assert stub_parameters(nodes[0]) == parameters(doc.splitlines()[0]), f"{name}.{member}"
            checked += 1
    assert checked >= 15


def test_linear_logp_keywords_are_the_config_fields():
    stub = stub_members(stub_tree())
    init = stub["LinearLogp"]["__init__"][0]
    keywords = {a.arg for a in init.args.kwonlyargs}
    # config (a dict of every field) is readable without a GPU only through the stub's names; the
    # constructor refuses any other keyword by name.
    import pytest

    with pytest.raises(TypeError, match="unknown keyword argument 'not_a_field'"):
        EXTENSION.LinearLogp(shardjit.Runtime(jit=False), hidden=8, vocab_local=8, not_a_field=1)
    assert {"hidden", "vocab_local", "dtype", "want_entropy", "want_backward", "max_rows"} <= keywords
