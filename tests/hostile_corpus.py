"""Hostile and benign worker diffs against a small fixed tree, shared by gate and CLI tests."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from harness.gate.diffgate import DEFAULT_MANIFESTS, Rules


@dataclass(frozen=True)
class Case:
    name: str
    diffs: list[dict[str, object]]
    reason: str
    stage: str = "gate"
    overrides: dict[str, object] = field(default_factory=dict)


BASE_FILES: dict[str, str] = {
    "README.md": "# sample\n",
    "src/app.py": "def add(a, b):\n    return a + b\n",
    "src/util.py": "VALUE = 1\n",
    "tests/test_app.py": (
        "from src.app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    ),
    "docs/guide.md": "# Guide\n\nUse add.\n",
    "vendor/lib.py": "X = 1\n",
    "pyproject.toml": '[project]\nname = "sample"\ndependencies = []\n',
}
SYMLINKS: dict[str, str] = {"link": "src"}

# Rules that allow every path: for tests of how a patch is read, not of scope.
OPEN = Rules(
    write_scope=("**",),
    token_paths=("**",),
    readonly=(),
    creates=("**",),
    cited=frozenset(),
    manifests=(),
    no_new_deps=False,
)

DEFAULT_RULES = Rules(
    write_scope=("src/**", "tests/**", "docs/**", "vendor/**", "pyproject.toml", "link/**", "link"),
    token_paths=("**",),
    readonly=("vendor/**",),
    creates=("tests/**", "docs/**", "src/**"),
    cited=frozenset(BASE_FILES) | frozenset(SYMLINKS),
    manifests=DEFAULT_MANIFESTS,
    no_new_deps=True,
    special=frozenset(SYMLINKS),
    tree=frozenset(BASE_FILES) | frozenset(SYMLINKS),
)


def rules_for(case: Case) -> Rules:
    """The default rules with the case's overrides applied."""
    return dataclasses.replace(DEFAULT_RULES, **case.overrides)  # type: ignore[arg-type]


# Hunk bodies that apply cleanly to BASE_FILES.
APP = "@@ -1,2 +1,2 @@\n-def add(a, b):\n+def add(a: int, b: int) -> int:\n     return a + b\n"
UTIL = "@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"
NEW = "@@ -0,0 +1 @@\n+X = 1\n"
DEL_UTIL = "@@ -1 +0,0 @@\n-VALUE = 1\n"
PYPROJECT = (
    '@@ -1,3 +1,3 @@\n [project]\n name = "sample"\n-dependencies = []\n'
    '+dependencies = ["requests"]\n'
)


def git(a: str, b: str, body: str, ext: str = "", minus: str = "", plus: str = "") -> str:
    """A git-style patch; `minus`/`plus` override the ---/+++ names."""
    return f"diff --git a/{a} b/{b}\n{ext}--- {minus or 'a/' + a}\n+++ {plus or 'b/' + b}\n{body}"


def modify(path: str, body: str) -> str:
    return git(path, path, body)


def plain(path: str, body: str) -> str:
    return f"--- a/{path}\n+++ b/{path}\n{body}"


def add(path: str, body: str = NEW, mode: str = "100644") -> str:
    return git(path, path, body, ext=f"new file mode {mode}\n", minus="/dev/null")


def delete(path: str, body: str) -> str:
    return git(path, path, body, ext="deleted file mode 100644\n", plus="/dev/null")


def rename(source: str, target: str, body: str = "", similarity: int = 100) -> str:
    head = (
        f"diff --git a/{source} b/{target}\nsimilarity index {similarity}%\n"
        f"rename from {source}\nrename to {target}\n"
    )
    return head + (f"--- a/{source}\n+++ b/{target}\n{body}" if body else "")


def entry(file: object, patch: object) -> dict[str, object]:
    return {"file": file, "patch": patch}


def one(path: str, patch: str) -> list[dict[str, object]]:
    return [entry(path, patch)]


def _plain_add(path: str) -> str:
    return f"--- /dev/null\n+++ b/{path}\n{NEW}"


def _uncited(*paths: str) -> dict[str, object]:
    return {"cited": DEFAULT_RULES.cited - set(paths)}


_GIT_BINARY = (
    "diff --git a/src/x.bin b/src/x.bin\nnew file mode 100644\n"
    "index 0000000000000000000000000000000000000000..8352675d67aed6625ece79af41c27fdb4ee2e867\n"
    "GIT binary patch\nliteral 3\nKcmZQzWC8#H2LJ>B\n\nliteral 0\nHcmV?d00001\n\n"
)
_BINARY_DIFFER = (
    "diff --git a/src/x.bin b/src/x.bin\nnew file mode 100644\nindex 0000000..8352675\n"
    "Binary files /dev/null and b/src/x.bin differ\n"
)
_SYMLINK_CREATE = (
    "diff --git a/src/evil b/src/evil\nnew file mode 120000\n--- /dev/null\n+++ b/src/evil\n"
    "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
)
_LINK_BODY = (
    "@@ -1 +1 @@\n-src\n\\ No newline at end of file\n+/etc\n\\ No newline at end of file\n"
)
_LINK_GONE = "@@ -1 +0,0 @@\n-src\n\\ No newline at end of file\n"
_GITLINK = (
    "diff --git a/src/sub b/src/sub\nnew file mode 160000\nindex 0000000..1234567\n"
    "--- /dev/null\n+++ b/src/sub\n@@ -0,0 +1 @@\n"
    "+Subproject commit 1234567890123456789012345678901234567890\n"
)
_QUOTED = (
    'diff --git "a/src/\\303\\251.py" "b/src/\\303\\251.py"\nnew file mode 100644\n'
    '--- /dev/null\n+++ "b/src/\\303\\251.py"\n' + NEW
)
_EPOCH = "1970-01-01 00:00:00.000000000 +0000"
_STAMP = "2026-01-01 12:00:00.123456789 +0100"


def _quoted_add(escaped: str) -> str:
    """A new file whose C-quoted name is `escaped` (backslash escapes as git writes them)."""
    return (
        f'diff --git "a/{escaped}" "b/{escaped}"\nnew file mode 100644\n'
        f'--- /dev/null\n+++ "b/{escaped}"\n' + NEW
    )


def _gnu(path: str, old: str, new: str, body: str, old_path: str = "") -> str:
    """What `diff -u` writes: no `diff --git`, a TAB and a timestamp after each name."""
    return f"--- a/{old_path or path}\t{old}\n+++ b/{path}\t{new}\n{body}"


_BIG = "@@ -0,0 +1,10000 @@\n" + ("+" + "x" * 99 + "\n") * 10000

_LONG_NAME = "docs/" + "é" * 125  # a 250-byte name: 5 more bytes fill it, 6 are too many
_LONG_PATH = "docs/" + "/".join(["d" * 200] * 6) + "/x.md"

# git's header for a new empty file: no ---/+++, no hunk.
EMPTY = "new file mode 100644\nindex 0000000..e69de29\n"

HOSTILE: list[Case] = [
    # traversal
    Case("traversal_top", one("../evil.py", add("../evil.py")), "path traversal"),
    Case("traversal_nested", one("src/../../evil.py", add("src/../../evil.py")), "traversal"),
    Case(
        "traversal_plain",
        one("docs/../../x.md", "--- /dev/null\n+++ b/docs/../../x.md\n" + NEW),
        "path traversal",
    ),
    Case(
        "traversal_rename_target",
        one("../util.py", rename("src/util.py", "../util.py")),
        "path traversal",
    ),
    Case("traversal_file_field", one("../x.py", modify("src/util.py", UTIL)), "path traversal"),
    Case("traversal_ntfs_dots", one("src/.. /x.py", add("src/.. /x.py")), "path traversal"),
    Case("dot_segment", one("src/./app.py", modify("src/./app.py", APP)), "dot segment"),
    Case("empty_segment", one("src//app.py", modify("src//app.py", APP)), "empty path segment"),
    # absolute
    Case("absolute_git_header", one("/etc/harness_evil", add("/etc/harness_evil")), "absolute"),
    Case(
        "absolute_plain_plus",
        one("etc/cron.d/x", "--- /dev/null\n+++ /etc/cron.d/x\n" + NEW),
        "absolute path",
    ),
    Case("absolute_file_field", one("/work/src/util.py", modify("src/util.py", UTIL)), "absolute"),
    Case(
        "absolute_rename_target",
        one("/tmp/util.py", rename("src/util.py", "/tmp/util.py")),
        "absolute path",
    ),
    Case("absolute_windows_drive", one("C:/evil.py", add("C:/evil.py")), "absolute path"),
    # .git in any case, depth and spelling
    Case("dotgit_hook", one(".git/hooks/pre-commit", add(".git/hooks/pre-commit")), ".git"),
    Case("dotgit_upper", one(".GIT/config", add(".GIT/config")), ".git"),
    Case("dotgit_nested_mixed", one("src/.Git/config", add("src/.Git/config")), ".git"),
    Case("dotgit_trailing_dot", one(".git./config", add(".git./config")), ".git"),
    Case(
        "dotgit_trailing_space",
        one(
            ".git /config",
            "diff --git a/.git /config b/.git /config\nnew file mode 100644\n"
            "--- /dev/null\n+++ b/.git /config\t\n" + NEW,
        ),
        ".git",
    ),
    Case("dotgit_short_name", one("git~1/config", add("git~1/config")), ".git"),
    Case(
        "dotgit_ntfs_stream",
        one(".git::$INDEX_ALLOCATION/config", add(".git::$INDEX_ALLOCATION/config")),
        ".git",
    ),
    Case("dotgit_hfs_ignorable", one(".g\u200cit/config", add(".g\u200cit/config")), "control"),
    Case("dotgit_rename_into", one(".git/util.py", rename("src/util.py", ".git/util.py")), ".git"),
    # symlinks and gitlinks
    Case("symlink_create", one("src/evil", _SYMLINK_CREATE), "symlink mode"),
    Case(
        "symlink_mode_change",
        one(
            "src/app.py", git("src/app.py", "src/app.py", APP, "old mode 100644\nnew mode 120000\n")
        ),
        "symlink mode",
    ),
    Case(
        "symlink_delete",
        one(
            "link", git("link", "link", _LINK_GONE, "deleted file mode 120000\n", plus="/dev/null")
        ),
        "symlink mode",
    ),
    Case("write_through_symlink", one("link/x.py", add("link/x.py")), "symlink or gitlink path"),
    Case("retarget_symlink", one("link", modify("link", _LINK_BODY)), "symlink or gitlink path"),
    Case("gitlink_create", one("src/sub", _GITLINK), "gitlink mode"),
    Case(
        "gitlink_index_mode",
        one("src/app.py", git("src/app.py", "src/app.py", APP, "index 1234567..89abcde 160000\n")),
        "gitlink mode",
    ),
    # binary
    Case("binary_git_literal", one("src/x.bin", _GIT_BINARY), "binary patch"),
    Case("binary_files_differ", one("src/x.bin", _BINARY_DIFFER), "binary patch"),
    # modes
    Case(
        "mode_change",
        one(
            "src/app.py", git("src/app.py", "src/app.py", APP, "old mode 100644\nnew mode 100755\n")
        ),
        "mode change",
    ),
    Case("new_executable", one("tests/run.sh", add("tests/run.sh", mode="100755")), "mode change"),
    Case(
        "odd_mode_even_if_allowed",
        one(
            "src/app.py", git("src/app.py", "src/app.py", APP, "old mode 100644\nnew mode 100777\n")
        ),
        "unsupported file mode",
        overrides={"allow_mode_change": True},
    ),
    # scope, readonly, creates, citations, manifests, token, harness state
    Case(
        "rename_out_of_scope",
        one("lib/util.py", rename("src/util.py", "lib/util.py")),
        "outside write scope",
    ),
    Case(
        "rename_into_readonly",
        one("vendor/util.py", rename("src/util.py", "vendor/util.py")),
        "readonly path",
    ),
    Case(
        "readonly_edit",
        one("vendor/lib.py", modify("vendor/lib.py", "@@ -1 +1 @@\n-X = 1\n+X = 2\n")),
        "readonly path",
    ),
    Case("readonly_other_case", one("VENDOR/new.py", add("VENDOR/new.py")), "readonly path"),
    Case(
        "edit_outside_scope",
        one("README.md", modify("README.md", "@@ -1 +1 @@\n-# sample\n+# pwned\n")),
        "outside write scope",
    ),
    Case(
        "unlisted_new_file",
        one("docs/new.md", add("docs/new.md")),
        "not in creates",
        overrides={"creates": ()},
    ),
    Case(
        "rename_target_not_in_creates",
        one("src/helpers.py", rename("src/util.py", "src/helpers.py")),
        "not in creates",
        overrides={"creates": ("tests/**",)},
    ),
    Case(
        "uncited_edit",
        one("src/app.py", modify("src/app.py", APP)),
        "uncited",
        overrides=_uncited("src/app.py"),
    ),
    Case(
        "uncited_delete",
        one("src/util.py", delete("src/util.py", DEL_UTIL)),
        "uncited",
        overrides=_uncited("src/util.py"),
    ),
    Case(
        "uncited_rename",
        one("src/utils.py", rename("src/util.py", "src/utils.py")),
        "uncited",
        overrides=_uncited("src/util.py"),
    ),
    Case("manifest_edit", one("pyproject.toml", modify("pyproject.toml", PYPROJECT)), "manifest"),
    Case(
        "manifest_new",
        one("src/requirements.txt", add("src/requirements.txt", "@@ -0,0 +1 @@\n+requests\n")),
        "manifest",
    ),
    Case(
        "outside_token",
        one("src/app.py", modify("src/app.py", APP)),
        "outside write token",
        overrides={"token_paths": ("tests/**",)},
    ),
    Case(
        "no_token",
        one("src/app.py", modify("src/app.py", APP)),
        "no write token",
        overrides={"token_paths": ()},
    ),
    Case(
        "harness_state",
        one("ai/state.json", add("ai/state.json", "@@ -0,0 +1 @@\n+{}\n")),
        "harness state",
        overrides={"write_scope": ("**",), "creates": ("**",)},
    ),
    Case(
        "harness_state_case",
        one("AI/plan.json", add("AI/plan.json", "@@ -0,0 +1 @@\n+{}\n")),
        "harness state",
        overrides={"write_scope": ("**",), "creates": ("**",)},
    ),
    # the file field and the headers must agree
    Case("file_mismatch", one("src/util.py", modify("src/app.py", APP)), "does not match"),
    Case(
        "git_header_disagrees",
        one(
            "src/app.py", git("src/util.py", "src/util.py", APP, "", "a/src/app.py", "b/src/app.py")
        ),
        "diff --git paths disagree",
    ),
    Case(
        "plain_sides_disagree",
        one("src/util.py", "--- a/src/app.py\n+++ b/src/util.py\n" + UTIL),
        "paths disagree",
    ),
    Case(
        "new_file_mode_on_modify",
        one("src/app.py", git("src/app.py", "src/app.py", APP, "new file mode 100644\n")),
        "conflicting file mode",
    ),
    # unusual characters
    # plain style: git itself would create "src/x\r.py" and "src/x" from these
    Case("cr_in_path", one("src/x\r.py", _plain_add("src/x\r.py")), "control character"),
    Case(
        "crlf_patch",
        one("src/util.py", modify("src/util.py", UTIL).replace("\n", "\r\n")),
        "control character",
    ),
    Case("nul_in_path", one("src/x\0.py", add("src/x\0.py")), "NUL"),
    Case("nul_in_file_field", one("src/app.py\0", modify("src/app.py", APP)), "control character"),
    Case("nul_in_body", one("src/util.py", modify("src/util.py", UTIL + "+Y = 0\0\n")), "NUL"),
    Case(
        "lone_surrogate",
        one("src/util.py", modify("src/util.py", UTIL + "+Y = '\udc80'\n")),
        "UTF-8",
    ),
    Case("tab_in_path", one("src/x\t.py", _plain_add("src/x\t.py")), "control character"),
    Case("escape_in_path", one("src/\x1b[31mx.py", add("src/\x1b[31mx.py")), "control character"),
    Case("bidi_in_path", one("src/x\u202e.py", add("src/x\u202e.py")), "control character"),
    # git ignores what follows a name's TAB unless it is a timestamp: nothing may hide there
    Case(
        "text_after_tab",
        one("src/util.py", "--- a/src/util.py\tjunk\n+++ b/src/util.py\n" + UTIL),
        "control character",
    ),
    # C-quoted names are decoded, then held to every rule
    Case("quoted_traversal", one("../x.py", _quoted_add("../x.py")), "path traversal"),
    Case("quoted_dotgit", one(".git/config", _quoted_add(".git/config")), ".git"),
    Case("quoted_newline", one("src/x\nz.py", _quoted_add("src/x\\nz.py")), "control character"),
    Case("quoted_not_utf8", one("src/x.py", _quoted_add("src/\\377.py")), "not UTF-8"),
    Case("quoted_file_mismatch", one("src/e.py", _QUOTED), "does not match"),
    Case(
        "quoted_rename_traversal",
        one("../u.py", rename("src/util.py", '"../u.py"').replace('b/"../u.py"', '"b/../u.py"')),
        "path traversal",
    ),
    # git creates the missing file of a traditional patch that needs no old lines
    Case(
        "creation_by_missing_file",
        one("docs/new.md", plain("docs/new.md", NEW)),
        "not in creates",
        overrides={"creates": ()},
    ),
    # GNU diff dates a side that does not exist at the epoch: git creates the file
    Case(
        "epoch_creation_not_in_creates",
        one("docs/new.md", _gnu("docs/new.md", _EPOCH, _STAMP, NEW)),
        "not in creates",
        overrides={"creates": ()},
    ),
    Case("name_too_long", one(_LONG_NAME + "x" * 6, add(_LONG_NAME + "x" * 6)), "name too long"),
    Case("path_too_long", one(_LONG_PATH, add(_LONG_PATH)), "path too long"),
    Case("backslash_path", one("src\\..\\..\\evil.py", add("src\\..\\..\\evil.py")), "backslash"),
    Case(
        "missing_prefix_plain",
        one("src/app.py", "--- src/app.py\n+++ src/app.py\n" + APP),
        "does not match patch path app.py",  # git strips a traditional patch's first folder
    ),
    Case(
        "missing_prefix_git",
        one(
            "src/app.py",
            "diff --git src/app.py src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n" + APP,
        ),
        "diff --git paths disagree",  # git strips its first folder too: app.py
    ),
    # malformed structure
    Case(
        "hunk_truncated",
        one("src/util.py", modify("src/util.py", "@@ -1,2 +1,2 @@\n-VALUE = 1\n+VALUE = 2\n")),
        "hunk count mismatch",
    ),
    Case(
        "hunk_longer_than_header",
        one("src/util.py", modify("src/util.py", UTIL + "+EXTRA = 3\n")),
        "hunk count mismatch",
    ),
    Case(
        "garbage_in_hunk",
        one("src/app.py", modify("src/app.py", APP.replace("+def", "*def"))),
        "garbage in hunk",
    ),
    Case(
        "garbage_after_hunk",
        one("src/util.py", modify("src/util.py", UTIL + "Hope this helps!\n")),
        "garbage after hunk",
    ),
    Case(
        "bad_hunk_header",
        one("src/util.py", modify("src/util.py", "@@ -1 +1\n-VALUE = 1\n+VALUE = 2\n")),
        "bad hunk header",
    ),
    Case(
        "empty_hunk",
        one("src/util.py", modify("src/util.py", "@@ -0,0 +0,0 @@\n")),
        "empty hunk",
    ),
    Case("no_hunks", one("src/app.py", "--- a/src/app.py\n+++ b/src/app.py\n"), "no hunks"),
    Case(
        "pure_mode_change_no_hunks",
        one(
            "src/app.py", "diff --git a/src/app.py b/src/app.py\nold mode 100644\nnew mode 100755\n"
        ),
        "no hunks",
        overrides={"allow_mode_change": True},
    ),
    Case(
        "partial_rename_no_hunks",
        one("src/utils.py", rename("src/util.py", "src/utils.py", similarity=90)),
        "no hunks",
    ),
    Case(
        "bare_new_file_with_a_hunk",
        one(
            "src/x.py",
            "diff --git a/src/x.py b/src/x.py\nnew file mode 100644\n@@ -0,0 +1 @@\n+x\n",
        ),
        "missing ---/+++ header",
    ),
    Case(
        "bare_new_file_names_two_paths",
        one("src/x.py", "diff --git a/src/x.py b/src/y.py\nnew file mode 100644\n"),
        "no hunks",
    ),
    Case(
        "bare_new_and_deleted",
        one("src/x.py", f"diff --git a/src/x.py b/src/x.py\n{EMPTY}deleted file mode 100644\n"),
        "conflicting file mode headers",
    ),
    Case(
        "bare_new_file_traversal",
        one("src/../../x.py", f"diff --git a/src/../../x.py b/src/../../x.py\n{EMPTY}"),
        "traversal",
    ),
    Case("empty_patch", one("src/app.py", ""), "empty patch"),
    Case("truncated_patch", one("src/util.py", modify("src/util.py", UTIL)[:-1]), "truncated"),
    Case(
        "chatter_after_diff_command",
        one(
            "src/util.py",
            "diff -ruN a/src/util.py b/src/util.py\nSee:\n" + plain("src/util.py", UTIL),
        ),
        "unknown header",
    ),
    Case(
        "chatter_before_patch",
        one("src/util.py", "Here is the fix:\n" + plain("src/util.py", UTIL)),
        "unknown header",
    ),
    Case(
        "unknown_extended_header",
        one("src/util.py", git("src/util.py", "src/util.py", UTIL, "X-Evil: yes\n")),
        "unknown header",
    ),
    Case(
        "dissimilarity_header",
        one("src/util.py", git("src/util.py", "src/util.py", UTIL, "dissimilarity index 90%\n")),
        "unknown header",
    ),
    Case(
        "copy_header",
        one(
            "src/copy.py",
            "diff --git a/src/app.py b/src/copy.py\nsimilarity index 100%\n"
            "copy from src/app.py\ncopy to src/copy.py\n",
        ),
        "copy header",
    ),
    # several files where one is allowed
    Case(
        "two_files_git",
        one("src/app.py", modify("src/app.py", APP) + modify("src/util.py", UTIL)),
        "more than one file",
    ),
    Case(
        "two_files_plain",
        one("src/app.py", plain("src/app.py", APP) + plain("src/util.py", UTIL)),
        "more than one file",
    ),
    Case(
        "two_files_headers_only",
        one("src/utils.py", rename("src/util.py", "src/utils.py") + modify("src/app.py", APP)),
        "more than one file",
    ),
    # another file system's spelling of a file of the tree (or of the answer)
    Case("case_clash", one("docs/GUIDE.md", add("docs/GUIDE.md")), "same file as docs/guide.md"),
    Case(
        "nfd_clash",
        [entry(name, add(name)) for name in ("docs/caf\u00e9.md", "docs/cafe\u0301.md")],
        "same file as docs/caf",
    ),
    Case("trailing_dot_clash", one("docs/guide.md.", add("docs/guide.md.")), "same file"),
    Case(
        "trailing_space_clash",
        one(
            "docs/guide.md ",
            "diff --git a/docs/guide.md  b/docs/guide.md \nnew file mode 100644\n"
            "--- /dev/null\n+++ b/docs/guide.md \t\n" + NEW,
        ),
        "same file",
    ),
    Case(
        "folder_case_clash",
        one("Docs/new.md", add("Docs/new.md")),
        "same file as docs",
        overrides={"write_scope": ("**",), "creates": ("**",)},
    ),
    Case(
        "rename_onto_other_case",
        one("docs/Guide.md", rename("src/util.py", "docs/Guide.md")),
        "same file as docs/guide.md",
    ),
    # size limits (the real defaults)
    Case(
        "too_many_files",
        [entry(f"tests/gen_{n}.py", add(f"tests/gen_{n}.py")) for n in range(101)],
        "too many files",
    ),
    Case("too_many_bytes", one("docs/big.md", add("docs/big.md", _BIG)), "too large"),
    # shape of the entries
    Case("file_not_string", [entry(3, modify("src/app.py", APP))], "not a string"),
    Case("patch_not_string", [entry("src/app.py", [APP])], "not a string"),
    Case("patch_missing", [{"file": "src/app.py"}], "missing"),
    # each section of one path is gated on its own
    Case(
        "recreate_not_in_creates",
        [
            entry("src/util.py", delete("src/util.py", DEL_UTIL)),
            entry("src/util.py", add("src/util.py", "@@ -0,0 +1 @@\n+VALUE = 3\n")),
        ],
        "not in creates",
        overrides={"creates": ("tests/**",)},
    ),
    Case(
        "change_then_rename_out_of_scope",
        [
            entry("src/util.py", modify("src/util.py", UTIL)),
            entry("lib/util.py", rename("src/util.py", "lib/util.py")),
        ],
        "outside write scope",
    ),
    # these pass the gate; `git apply --check` must refuse them
    Case("same_change_twice", [entry("src/util.py", modify("src/util.py", UTIL))] * 2, "", "apply"),
    Case(
        "change_after_rename_away",
        [
            entry("src/utils.py", rename("src/util.py", "src/utils.py")),
            entry("src/util.py", modify("src/util.py", UTIL)),
        ],
        "",
        stage="apply",
    ),
    Case(
        "context_mismatch",
        one("src/app.py", modify("src/app.py", APP.replace("-def add(a, b)", "-def add(x, y)"))),
        "",
        stage="apply",
    ),
    Case("new_file_exists", one("src/util.py", add("src/util.py")), "", stage="apply"),
    Case(
        "crlf_content",
        one("src/util.py", modify("src/util.py", "@@ -1 +1 @@\n-VALUE = 1\r\n+VALUE = 2\r\n")),
        "",
        stage="apply",
    ),
    Case(
        "delete_wrong_content",
        one("src/util.py", delete("src/util.py", "@@ -1 +0,0 @@\n-VALUE = 9\n")),
        "",
        stage="apply",
    ),
]

BENIGN: list[Case] = [
    Case(
        "new_empty_file",
        one("src/empty.py", f"diff --git a/src/empty.py b/src/empty.py\n{EMPTY}"),
        "",
    ),
    Case("modify_git", one("src/app.py", modify("src/app.py", APP)), ""),
    Case("modify_plain", one("src/util.py", plain("src/util.py", UTIL)), ""),
    Case(
        "add_in_creates",
        one("tests/test_util.py", add("tests/test_util.py", "@@ -0,0 +1 @@\n+import src.util\n")),
        "",
    ),
    Case("add_plain", one("docs/new.md", "--- /dev/null\n+++ b/docs/new.md\n" + NEW), ""),
    Case("delete_cited", one("src/util.py", delete("src/util.py", DEL_UTIL)), ""),
    Case("rename_pure", one("src/utils.py", rename("src/util.py", "src/utils.py")), ""),
    Case(
        "rename_with_edit",
        one(
            "docs/usage.md",
            rename(
                "docs/guide.md",
                "docs/usage.md",
                "@@ -1,3 +1,3 @@\n # Guide\n \n-Use add.\n+Use add(a, b).\n",
                similarity=66,
            ),
        ),
        "",
    ),
    Case(
        "mode_change_allowed",
        one(
            "src/app.py", git("src/app.py", "src/app.py", APP, "old mode 100644\nnew mode 100755\n")
        ),
        "",
        overrides={"allow_mode_change": True},
    ),
    Case(
        "new_executable_allowed",
        one(
            "tests/run.sh", add("tests/run.sh", "@@ -0,0 +1,2 @@\n+#!/bin/sh\n+echo ok\n", "100755")
        ),
        "",
        overrides={"allow_mode_change": True},
    ),
    Case(
        "no_newline_at_end",
        one("src/util.py", modify("src/util.py", UTIL + "\\ No newline at end of file\n")),
        "",
    ),
    Case(
        "space_in_name",
        one(
            "docs/user guide.md",
            "diff --git a/docs/user guide.md b/docs/user guide.md\nnew file mode 100644\n"
            "--- /dev/null\n+++ b/docs/user guide.md\t\n" + NEW,
        ),
        "",
    ),
    Case("unicode_name", one("docs/café.md", add("docs/café.md")), ""),
    Case(
        "manifest_when_deps_allowed",
        one("pyproject.toml", modify("pyproject.toml", PYPROJECT)),
        "",
        overrides={"no_new_deps": False},
    ),
    Case(
        "several_entries",
        [
            entry("src/app.py", modify("src/app.py", APP)),
            entry("tests/test_more.py", add("tests/test_more.py")),
            entry("src/util.py", delete("src/util.py", DEL_UTIL)),
        ],
        "",
    ),
    Case("longest_name", one(_LONG_NAME + "xxxxx", add(_LONG_NAME + "xxxxx")), ""),
    Case("gnu_timestamps", one("src/util.py", _gnu("src/util.py", _STAMP, _STAMP, UTIL)), ""),
    Case(
        "posix_timestamp",
        one("src/util.py", "--- a/src/util.py\t2024-01-01 00:00:00\n+++ b/src/util.py\n" + UTIL),
        "",
    ),
    Case(
        "gnu_new_file",
        one(
            "docs/new.md",
            "diff -ruN a/docs/new.md b/docs/new.md\n" + _gnu("docs/new.md", _EPOCH, _STAMP, NEW),
        ),
        "",
    ),
    Case("gnu_deletion", one("src/util.py", _gnu("src/util.py", _STAMP, _EPOCH, DEL_UTIL)), ""),
    Case("quoted_name", one("src/é.py", _QUOTED), ""),
    # diff.mnemonicPrefix: git strips i/ and w/ as it does a/ and b/
    Case(
        "mnemonic_prefix",
        one(
            "src/app.py",
            git("src/app.py", "src/app.py", APP).replace("a/", "i/").replace("b/", "w/"),
        ),
        "",
    ),
    Case("traditional_creation", one("docs/new.md", plain("docs/new.md", NEW)), ""),
    Case(
        "quoted_rename",
        one(
            "docs/guíde.md",
            rename("docs/guide.md", '"docs/gu\\303\\255de.md"').replace(
                'b/"docs/gu\\303\\255de.md"', '"b/docs/gu\\303\\255de.md"'
            ),
        ),
        "",
    ),
    Case(
        "traditional_orig",
        one("src/util.py", _gnu("src/util.py", _STAMP, _STAMP, UTIL, "src/util.py.orig")),
        "",
    ),
    Case(
        "traditional_no_prefix",
        one("pyproject.toml", f"--- pyproject.toml.orig\n+++ pyproject.toml\n{PYPROJECT}"),
        "",
        overrides={"no_new_deps": False},
    ),
    # attrs 2d6da44be2: a case-only rename of one file
    Case("case_only_rename", one("docs/Guide.md", rename("docs/guide.md", "docs/Guide.md")), ""),
    # one path in several sections, applied in order
    Case(
        "delete_then_create",
        [
            entry("src/util.py", delete("src/util.py", DEL_UTIL)),
            entry("src/util.py", add("src/util.py", "@@ -0,0 +1 @@\n+VALUE = 3\n")),
        ],
        "",
    ),
    Case(
        "rename_then_change",
        [
            entry("src/utils.py", rename("src/util.py", "src/utils.py")),
            entry("src/utils.py", modify("src/utils.py", UTIL)),
        ],
        "",
    ),
    Case(
        "two_patches_of_one_file",
        [
            entry("src/util.py", modify("src/util.py", UTIL)),
            entry("src/util.py", modify("src/util.py", "@@ -1 +1 @@\n-VALUE = 2\n+VALUE = 3\n")),
        ],
        "",
    ),
    Case(
        "change_then_delete",
        [
            entry("src/util.py", modify("src/util.py", UTIL)),
            entry("src/util.py", delete("src/util.py", "@@ -1 +0,0 @@\n-VALUE = 2\n")),
        ],
        "",
    ),
    # Whitespace is applied as it is: tomli's fixtures need trailing blanks (417f3357e5).
    Case(
        "trailing_whitespace",
        one(
            "tests/data/trailing.toml",
            add("tests/data/trailing.toml", '@@ -0,0 +1,2 @@\n+a = """x  \n+"""\n'),
        ),
        "",
    ),
    Case(
        "blank_line_at_eof_and_space_before_tab",
        one(
            "src/util.py", modify("src/util.py", "@@ -1 +1,2 @@\n-VALUE = 1\n+VALUE = 2 \t# x\n+\n")
        ),
        "",
    ),
]
