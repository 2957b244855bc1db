"""Checks that every code comment citing the performance notes names a section they have.

A citation is the notes' file name followed by a comma and one or more quoted section names
(joined by "and" or commas), which may continue on the next comment lines; every name must be the
exact text of a heading of docs/perf-notes.md. A mention of the notes without a section is an
error too: the reader would have to search 500 lines for the reason. The notes themselves must
stay a reference: at most MAX_LINES lines and no dated headings (the history is in git).

Usage: check_perf_note_citations.py --root SOURCE_DIR
       check_perf_note_citations.py --self-test   (the checker finds the errors it should)
"""
import argparse
import pathlib
import re
import sys
import tempfile

NOTES = pathlib.Path("docs") / "perf-notes.md"
CODE_DIRS = ("runtime", "templates", "tools", "tests", "include", "python", "examples", "scripts")
MAX_LINES = 600
# The file name, not followed by more of a name (another file of notes is not this one).
MENTION = re.compile(re.escape(NOTES.name) + r"(?![\w-])")
NAMES = re.compile(re.escape(NOTES.name) + r',\s*("[^"]+"(?:\s*(?:,|and)\s*"[^"]+")*)')
QUOTED = re.compile(r'"([^"]+)"')
COMMENT_LEADER = re.compile(r"^\s*(?://+|#+|\*+|/\*+)\s?")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def headings(notes_text):
    """The texts of the Markdown headings of notes_text, outside fenced code blocks."""
    found, fenced = set(), False
    for line in notes_text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            match = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
            if match:
                found.add(match.group(1))
    return found


def citation_text(lines, index, column):
    """The text from a mention on lines[index] at column on, with up to three following lines
    joined to it (comment leaders removed), so that a citation wrapped across lines reads whole."""
    parts = [lines[index][column:]]
    for line in lines[index + 1:index + 4]:
        parts.append(COMMENT_LEADER.sub("", line, count=1))
    return " ".join(part.strip() for part in parts)


def source_files(root, skip):
    for folder in CODE_DIRS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.resolve() != skip and "__pycache__" not in path.parts:
                yield path


def check_citations(root, skip=None):
    """Error messages for every citation under root's code folders that names no existing heading."""
    known = headings((root / NOTES).read_text(encoding="utf-8"))
    errors = []
    for path in source_files(root, skip):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue  # not text
        for index, line in enumerate(lines):
            for mention in MENTION.finditer(line):
                where = f"{path.relative_to(root)}:{index + 1}"
                match = NAMES.match(citation_text(lines, index, mention.start()))
                if not match:
                    errors.append(f'{where}: cites {NOTES} without a section; expected {NOTES.name}, "Heading"')
                    continue
                for name in QUOTED.findall(match.group(1)):
                    if name not in known:
                        errors.append(f'{where}: cites section "{name}", which {NOTES} has no heading for')
    return errors


def check_notes(root):
    """Error messages if the notes have grown past MAX_LINES lines or have dated headings."""
    text = (root / NOTES).read_text(encoding="utf-8")
    errors = []
    if len(text.splitlines()) > MAX_LINES:
        errors.append(f"{NOTES}: {len(text.splitlines())} lines; expected at most {MAX_LINES}")
    for name in sorted(headings(text)):
        if DATE.search(name):
            errors.append(f'{NOTES}: heading "{name}" is dated; headings name what a section is about')
    return errors


def self_test():
    """Runs the checks on a small tree with one good and three bad citations and dated notes;
    returns the messages of what the checker got wrong (none when it works)."""
    with tempfile.TemporaryDirectory() as folder:
        root = pathlib.Path(folder)
        (root / "docs").mkdir()
        (root / NOTES).write_text("# Notes\n\n## Alpha\n\n### Beta two\n\n## 2026-01-01 run\n\n```\n## Fenced\n```\n")
        (root / "runtime").mkdir()
        (root / "runtime" / "good.cpp").write_text(
            f'// wrapped (docs/{NOTES.name}, "Alpha" and\n// "Beta two"), then code.\nint a;\n'
            f"// the other notes (docs/perf-notes-jit.md) are not these.\n")
        (root / "runtime" / "missing.hpp").write_text(f'// see docs/{NOTES.name}, "Gamma".\n')
        (root / "runtime" / "bare.cuh").write_text(f"// see docs/{NOTES.name}.\n")
        (root / "runtime" / "fenced.py").write_text(f'# docs/{NOTES.name}, "Fenced"\n')
        got = sorted(check_citations(root))
        expected = [("runtime/bare.cuh:1", "without a section"), ("runtime/fenced.py:1", '"Fenced"'),
                    ("runtime/missing.hpp:1", '"Gamma"')]
        failures = []
        if len(got) != len(expected) or not all(g.startswith(w) and what in g for g, (w, what) in zip(got, expected)):
            failures.append(f"citations: expected errors for {expected}, got {got}")
        notes = check_notes(root)
        if len(notes) != 1 or "2026-01-01 run" not in notes[0]:
            failures.append(f"notes: expected one dated-heading error, got {notes}")
        return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, help="the project's source folder")
    parser.add_argument("--self-test", action="store_true", help="check the checker on a small tree")
    args = parser.parse_args()
    if args.self_test:
        failures = self_test()
    elif args.root:
        root = args.root.resolve()
        failures = check_citations(root, skip=pathlib.Path(__file__).resolve()) + check_notes(root)
    else:
        parser.error("give --root or --self-test")
    for failure in failures:
        print(failure, file=sys.stderr)
    if not failures:
        print("ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
