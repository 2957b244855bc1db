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


TORCH_PACKAGE = pathlib.Path(shardjit.__file__).with_name("torch")


def defined_functions(path):
    """{name: [FunctionDef, ...]} and class names at the top level of a Python file (read, not run:
    shardjit.torch imports torch, which these cpu tests do without)."""
    tree = ast.parse(path.read_text())
    functions, classes = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
    return tree, functions, classes


def test_torch_stub_names_are_the_package_exports():
    tree, _, _ = defined_functions(TORCH_PACKAGE / "__init__.py")
    exported = next(ast.literal_eval(node.value) for node in tree.body
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__")
    _, functions, classes = defined_functions(TORCH_PACKAGE / "__init__.pyi")
    stub_tree = ast.parse((TORCH_PACKAGE / "__init__.pyi").read_text())
    imported = {alias.asname for node in stub_tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names if alias.asname}
    assert set(functions) | set(classes) | imported == set(exported)


def test_torch_stub_parameters_match_the_sources():
    sources = {"linear_logp": "_functional.py", "linear_cross_entropy": "loss.py",
               "reduce_scatter": "_collective_ops.py", "moe_combine": "_collective_ops.py",
               "op_linear_logp": "_op_level.py", "set_runtime": "../_op_cache.py",
               "set_op_cache_size": "../_op_cache.py", "clear_op_cache": "__init__.py"}
    _, stub, stub_classes = defined_functions(TORCH_PACKAGE / "__init__.pyi")
    for name, source in sources.items():
        _, functions, _ = defined_functions(TORCH_PACKAGE / source)
        assert stub_parameters(stub[name][0]) == stub_parameters(functions[name][0]), name
    _, _, loss_classes = defined_functions(TORCH_PACKAGE / "loss.py")
    for method in ("__init__", "forward"):
        real = next(n for n in loss_classes["LinearCrossEntropyLoss"].body
                    if isinstance(n, ast.FunctionDef) and n.name == method)
        typed = next(n for n in stub_classes["LinearCrossEntropyLoss"].body
                     if isinstance(n, ast.FunctionDef) and n.name == method)
        assert stub_parameters(typed) == stub_parameters(real), method
