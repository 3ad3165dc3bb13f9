"""The signed checkpoint of a task's log head: the trailer a record commit carries when
HARNESS_SIGNING_KEY names a key, its check, and `audit --key` through the real CLI on the
demo run signed (deterministic commit ids, replay unchanged, every forgery a finding)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from harness.base import signing
from harness.base.errors import InvalidInput
from harness.importers import demo
from harness.record import checkpoint
from harness.repository import repo

from .builders import FAST
from .conftest import Sample, calc_patch, err, new_file_patch, ok, scripted, subtask

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
HEAD = "ab" * 32
LOG = "ai/tasks/demo/progress.ndjson"


def value(trailer: str) -> str:
    name, _, found = trailer.partition(": ")
    assert name == checkpoint.TRAILER
    return found


def test_a_trailer_is_deterministic_and_checks_with_its_key_only() -> None:
    trailer = checkpoint.Signer(KEY).trailer("demo", HEAD)
    assert trailer == checkpoint.Signer(KEY).trailer("demo", HEAD)
    assert "\n" not in trailer
    assert checkpoint.check(value(trailer), KEY.public_key(), "demo", HEAD) is None
    other = checkpoint.check(value(trailer), OTHER.public_key(), "demo", HEAD)
    assert other is not None and "not by the key given" in other


@pytest.mark.parametrize(
    ("task", "head"), [("other", HEAD), ("demo", "cd" * 32)], ids=["task", "head"]
)
def test_a_signature_over_another_task_or_head_does_not_check(task: str, head: str) -> None:
    trailer = value(checkpoint.Signer(KEY).trailer(task, head))
    why = checkpoint.check(trailer, KEY.public_key(), "demo", HEAD)
    assert why == f"carries a {checkpoint.TRAILER} that does not verify over log head abababababab"


@pytest.mark.parametrize("sig", ["é", "%%", ""])
def test_a_signature_that_is_no_base64_does_not_check(sig: str) -> None:
    """Not ASCII, base64 raised a ValueError of its own, which crashed `audit --key`."""
    keyid = value(checkpoint.Signer(KEY).trailer("demo", HEAD)).split()[0]
    why = checkpoint.check(f"{keyid} {sig}", KEY.public_key(), "demo", HEAD)
    assert why == f"carries a {checkpoint.TRAILER} that does not verify over log head abababababab"


def test_an_attestation_signature_never_passes_for_a_checkpoint() -> None:
    """The same key signing the same bytes as an in-toto envelope: another payload type."""
    envelope = signing.sign(checkpoint.payload("demo", HEAD), KEY)
    forged = f"{signing.keyid(KEY.public_key())} {envelope['signatures'][0]['sig']}"
    assert checkpoint.check(forged, KEY.public_key(), "demo", HEAD) is not None


@pytest.mark.parametrize("found", [None, "", "nokeyid", "KID !!!", "KID "])
def test_a_missing_or_broken_trailer_is_named(found: str | None) -> None:
    kid = signing.keyid(KEY.public_key())
    why = checkpoint.check(
        None if found is None else found.replace("KID", kid), KEY.public_key(), "demo", HEAD
    )
    assert why is not None and checkpoint.TRAILER in why


def test_audit_wants_the_newest_commit_signed_and_every_signature_sound() -> None:
    signed = checkpoint.Signer(KEY).trailer("demo", HEAD)
    good = {"Harness-Log-Head": HEAD, checkpoint.TRAILER: value(signed)}
    bare = {"Harness-Log-Head": HEAD}
    bad = {"Harness-Log-Head": "cd" * 32, checkpoint.TRAILER: value(signed)}
    public = KEY.public_key()
    # Signing may start mid-task: an older commit without a signature is no finding.
    assert checkpoint.audit([("a" * 40, bare), ("b" * 40, good)], "b" * 40, public, "demo") == []
    assert checkpoint.audit([("a" * 40, good), ("b" * 40, bare)], "b" * 40, public, "demo") == [
        f"commit bbbbbbbbbbbb carries no {checkpoint.TRAILER}"
    ]
    found = checkpoint.audit([("a" * 40, bad), ("b" * 40, good)], "b" * 40, public, "demo")
    assert found == [
        f"commit aaaaaaaaaaaa carries a {checkpoint.TRAILER} that does not verify over log "
        "head cdcdcdcdcdcd"
    ]


def write_key(where: Path, key: Ed25519PrivateKey, password: bytes | None = None) -> Path:
    crypt: serialization.KeySerializationEncryption = (
        serialization.NoEncryption()
        if password is None
        else serialization.BestAvailableEncryption(password)
    )
    path = where / "key.pem"
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, crypt)
    )
    return path


def test_the_signer_comes_from_the_environment_and_a_bad_key_is_one_line(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    assert checkpoint.signer(root, {}) is None
    assert checkpoint.signer(root, {checkpoint.ENV: ""}) is None
    path = write_key(tmp_path, KEY, b"pw")
    env = {checkpoint.ENV: str(path), checkpoint.PASSPHRASE: "pw"}
    found = checkpoint.signer(root, env)
    assert found is not None
    assert signing.keyid(found.key.public_key()) == signing.keyid(KEY.public_key())
    for env, reason in [
        ({checkpoint.ENV: str(path)}, "the key is encrypted"),
        ({checkpoint.ENV: str(tmp_path / "none")}, "file not found"),
        ({checkpoint.ENV: str(root / "key.pem")}, "inside the repository"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            checkpoint.signer(root, env)
        assert str(caught.value).startswith(f"{checkpoint.ENV}: ") and reason in str(caught.value)
        assert str(tmp_path) not in str(caught.value)  # the key's path is never printed


# -- through the CLI -------------------------------------------------------------------------


def run_demo(where: Path, env: dict[str, str]) -> Sample:
    root = where / "repo"
    root.mkdir(parents=True)
    demo.build(root)
    made = Sample(root, root / "agents" / "script.json")
    res = made.cli("run", "demo", env=env)
    assert res.returncode == 0, res.stderr
    return made


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("keys")
    write_key(where, KEY)
    for name, key in (("key.pub", KEY), ("other.pub", OTHER)):
        (where / name).write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
        )
    return where


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, keys: Path) -> Sample:
    return run_demo(tmp_path_factory.mktemp("signed"), {checkpoint.ENV: str(keys / "key.pem")})


def audit(sample: Sample, *args: str) -> tuple[int, list[str]]:
    res = sample.cli("audit", "demo", *args)
    assert res.returncode in (0, 1), res.stderr
    return res.returncode, res.stdout.splitlines()


def test_a_signed_run_audits_clean_with_its_key(signed: Sample, keys: Path) -> None:
    message = signed.git("log", "-1", "--format=%B")
    assert f"{checkpoint.TRAILER}: {signing.keyid(KEY.public_key())} " in message
    assert audit(signed, "--key", str(keys / "key.pub")) == (0, ["audit demo: 23 events, clean"])
    assert audit(signed)[0] == 0


def test_every_harness_commit_of_a_signed_run_passes_git_verify_commit(
    signed: Sample, keys: Path, tmp_path: Path
) -> None:
    commits = signed.git("log", "--format=%H", "--grep=^Harness-Task: demo").split()
    assert len(commits) == 4  # three changes and the record commit
    mine, theirs = tmp_path / "allowed", tmp_path / "others"
    mine.write_text("harness@example.org " + (keys / "key.pub").read_text() + "\n")
    theirs.write_text("someone@example.org " + (keys / "other.pub").read_text() + "\n")
    for allowed, passes in ((mine, True), (theirs, False)):
        for commit in commits:
            done = subprocess.run(
                ["git", "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", commit],
                cwd=signed.root,
                capture_output=True,
                text=True,
                check=False,
            )
            assert (done.returncode == 0) == passes, done.stderr
    # The people's commit the demo starts from is not harness's to sign.
    first = signed.git("rev-list", "--max-parents=0", "HEAD").strip()
    assert "gpgsig" not in signed.git("cat-file", "commit", first)


def test_replay_rebuilds_the_signed_commits_without_the_key(signed: Sample) -> None:
    """CI holds no key: a rebuilt commit equal to what a recorded signature covers gets that
    signature back, so the same commit ids come out."""
    res = signed.cli("replay", "demo")
    assert res.returncode == 0, res.stderr
    rebuilt = [line.strip() for line in res.stdout.splitlines()[1:]]
    recorded = signed.git("log", "--format=%H", "--grep=^harness: record", "--invert-grep")
    assert rebuilt == list(reversed(recorded.split()[:-1]))
    for commit in rebuilt:
        assert "gpgsig -----BEGIN SSH SIGNATURE-----" in signed.git("cat-file", "commit", commit)


def test_a_commit_object_keeps_its_bytes_through_signing_and_back() -> None:
    raw = b"tree t\nparent p\nauthor a 1 +0000\ncommitter c 1 +0000\n\nsubject\n\nbody\n"
    armor = "-----BEGIN SSH SIGNATURE-----\nAAAA\nBBBB\n-----END SSH SIGNATURE-----"
    signed = repo.with_signature(raw, armor)
    assert signed.startswith(b"tree t\nparent p\nauthor a 1 +0000\ncommitter c 1 +0000\ngpgsig ")
    assert b"\n AAAA\n BBBB\n -----END SSH SIGNATURE-----\n\nsubject\n\nbody\n" in signed
    assert repo.without_signature(signed) == (raw, armor)
    assert repo.without_signature(raw) == (raw, None)


@FAST
@given(st.lists(st.binary(min_size=1).filter(lambda b: b"\n" not in b), min_size=1, max_size=4))
def test_any_signature_a_commit_carries_is_given_back_byte_for_byte(lines: list[bytes]) -> None:
    """A pull request's commit may carry any bytes there (0xff crashed replay): what
    without_signature reads, with_signature writes back the same."""
    raw = b"tree t\nauthor a 1 +0000\ncommitter c 1 +0000\n\nsubject\n"
    folded = b"\n ".join(lines)
    signed = raw.replace(b"\n\n", b"\ngpgsig " + folded + b"\n\n", 1)
    unsigned, signature = repo.without_signature(signed)
    assert unsigned == raw and signature is not None
    assert repo.with_signature(unsigned, signature) == signed


def test_a_key_gives_the_same_commits_on_every_run(
    signed: Sample, keys: Path, tmp_path: Path
) -> None:
    again = run_demo(tmp_path, {checkpoint.ENV: str(keys / "key.pem")})
    assert again.git("rev-parse", "HEAD") == signed.git("rev-parse", "HEAD")
    assert str(keys) not in again.git("log", "--format=%B")
    for path in (again.root / "ai").rglob("*"):
        assert not path.is_file() or str(keys).encode() not in path.read_bytes(), path


def test_another_key_or_an_unsigned_run_is_a_finding(
    signed: Sample, keys: Path, tmp_path: Path
) -> None:
    code, lines = audit(signed, "--key", str(keys / "other.pub"))
    assert code == 1
    assert any("not by the key given" in line for line in lines)
    # Nothing the key given made covers any line: each is a finding, past 20 only counted.
    assert lines[0] == (
        "seq 0: no signature covers this line: no commit carries a valid signature by the key"
    )
    assert lines[-2:] == [
        "-: 3 more signature findings not shown",
        "audit demo: 23 events, 22 findings",
    ]
    unsigned = run_demo(tmp_path, {})
    head = unsigned.git("rev-parse", "HEAD").strip()
    assert head == "8f1fff8dd94c6ef67c222abad4a6d349ab494ff9"  # signing off changes nothing
    code, lines = audit(unsigned, "--key", str(keys / "key.pub"))
    assert code == 1 and f"-: commit {head[:12]} carries no {checkpoint.TRAILER}" in lines
    assert audit(unsigned)[0] == 0


def test_a_rewritten_record_commit_is_a_finding(signed: Sample, keys: Path) -> None:
    """The record commit remade with its trailer's signature flipped: what someone without
    the key can do to the history."""
    message = signed.git("log", "-1", "--format=%B")
    line = next(x for x in message.splitlines() if x.startswith(checkpoint.TRAILER))
    sig = bytearray(base64.b64decode(line.rsplit(" ", 1)[1]))
    sig[0] ^= 1
    forged = line.rsplit(" ", 1)[0] + " " + base64.b64encode(bytes(sig)).decode()
    head = signed.git("rev-parse", "HEAD").strip()
    try:
        signed.git(
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--amend",
            "-m",
            message.replace(line, forged),
        )
        code, lines = audit(signed, "--key", str(keys / "key.pub"))
        assert code == 1
        bad = [x for x in lines if "that does not verify over log head" in x]
        assert len(bad) == 1 and bad[0].startswith("-: commit ")
    finally:
        signed.git("reset", "-q", "--hard", head)
    assert audit(signed, "--key", str(keys / "key.pub"))[0] == 0  # the twin: as harness made it


def test_audit_key_must_be_a_readable_public_key(signed: Sample, keys: Path) -> None:
    for key, reason in [(keys / "none", "file not found"), (keys / "key.pem", "not a PEM")]:
        res = signed.cli("audit", "demo", "--key", str(key))
        assert res.returncode == 2
        assert len(res.stderr.splitlines()) == 1 and reason in res.stderr


def test_a_bad_signing_key_refuses_the_run_before_it_writes(tmp_path: Path, keys: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    demo.build(root)
    made = Sample(root, root / "agents" / "script.json")
    head = made.git("rev-parse", "HEAD")
    res = made.cli("run", "demo", env={checkpoint.ENV: str(keys / "key.pub")})
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"harness: {checkpoint.ENV}: not a PEM or OpenSSH private key"
    ]
    assert made.git("rev-parse", "HEAD") == head
    assert not (root / "ai/tasks/demo/progress.ndjson").exists()


# -- a later run's record passed off as signed ---------------------------------------------


def two_runs(where: Path, keys: Path, second_signed: bool) -> Path:
    """S1 signed: T1 lands, T2 blocks, record commit R1. S2 (`resume`, then `run`, signed or
    not): T2 lands, two more record commits."""
    s = scripted(where)
    s.write_plan(
        [subtask("T1"), subtask("T2", inputs=[], creates=["src/extra.py"], depends_on=["T1"])]
    )
    s.write_script([ok("T1", ("src/calc.py", calc_patch())), err("T2", "hard", "cannot do it")])
    signed_env = {checkpoint.ENV: str(keys / "key.pem")}
    assert s.cli("run", "demo", env=signed_env).returncode == 1
    s.write_script([ok("T2", ("src/extra.py", new_file_patch("src/extra.py", ["X = 1"])))])
    later = signed_env if second_signed else {}
    assert s.cli("resume", "demo", "--reason", "fixed", env=later).returncode == 0
    assert s.cli("run", "demo", env=later).returncode == 0
    return s.root


@pytest.fixture(scope="module")
def half_signed(tmp_path_factory: pytest.TempPathFactory, keys: Path) -> Path:
    return two_runs(tmp_path_factory.mktemp("half"), keys, second_signed=False)


@pytest.fixture(scope="module")
def all_signed(tmp_path_factory: pytest.TempPathFactory, keys: Path) -> Path:
    return two_runs(tmp_path_factory.mktemp("all"), keys, second_signed=True)


def copied(root: Path, where: Path) -> Sample:
    shutil.copytree(root, where / "repo", symlinks=True)
    return Sample(where / "repo", where / "script.json")


def first_signed(s: Sample) -> tuple[str, str, str]:
    """R1, S1's record commit: its id, its Harness-Log-Head line and its signature line."""
    sha = s.git("log", "--format=%H", "--grep=^Harness-Log-Signature: ", "--reverse").split()[0]
    message = s.git("log", "-1", "--format=%B", sha).splitlines()
    head = next(x for x in message if x.startswith("Harness-Log-Head: "))
    return sha, head, next(x for x in message if x.startswith(checkpoint.TRAILER))


def amend_head(s: Sample, head_line: str, signature: str) -> None:
    """HEAD's message made to carry `head_line` and `signature` in place of its own."""
    message = s.git("log", "-1", "--format=%B").splitlines()
    kept = [x for x in message if not x.startswith(("Harness-Log-Head: ", checkpoint.TRAILER))]
    body = "\n".join([*kept, head_line, signature]).strip() + "\n"
    s.git("-c", "user.name=h", "-c", "user.email=h@h", "commit", "-q", "--amend", "-m", body)


def resign_records(s: Sample, since: str, head_line: str, signature: str, tmp: Path) -> None:
    """Every record commit after `since` rewritten to carry `head_line` and `signature`, as
    someone without the key can (the commits after them made again on them)."""
    script = tmp / "resign.py"
    script.write_text(
        "import sys\n"
        "lines = sys.stdin.read().splitlines()\n"
        "if lines and lines[0].startswith('harness: record '):\n"
        "    drop = ('Harness-Log-Head: ', 'Harness-Log-Signature: ')\n"
        "    lines = [x for x in lines if not x.startswith(drop)]\n"
        f"    lines += [{head_line!r}, {signature!r}]\n"
        "print('\\n'.join(lines).strip())\n"
    )
    done = subprocess.run(
        ["git", "filter-branch", "-f", "--msg-filter", f"{sys.executable} {script}", "--",
         f"{since}..HEAD"],
        cwd=s.root,
        env={**os.environ, "FILTER_BRANCH_SQUELCH_WARNING": "1", "GIT_COMMITTER_NAME": "h",
             "GIT_COMMITTER_EMAIL": "h@h"},
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_run_after_the_signed_one_audits_clean_only_when_signed_too(
    half_signed: Path, all_signed: Path, keys: Path, tmp_path: Path
) -> None:
    twin = copied(all_signed, tmp_path / "all")
    assert audit(twin, "--key", str(keys / "key.pub"))[0] == 0
    half = copied(half_signed, tmp_path / "half")
    code, lines = audit(half, "--key", str(keys / "key.pub"))
    assert code == 1 and f"carries no {checkpoint.TRAILER}" in "\n".join(lines)


def test_a_later_record_commit_carrying_an_earlier_signature_is_a_finding(
    half_signed: Path, all_signed: Path, keys: Path, tmp_path: Path
) -> None:
    """S2's record commit amended to carry R1's head and signature: each line S2 wrote comes
    after the newest signed head, and nothing signs it."""
    s = copied(half_signed, tmp_path / "half")
    _, head, signature = first_signed(s)
    signed_lines = s.git("show", f"{first_signed(s)[0]}:{LOG}").count("\n")
    total = (s.root / LOG).read_text().count("\n")
    amend_head(s, head, signature)
    code, lines = audit(s, "--key", str(keys / "key.pub"))
    assert code == 1
    unsigned = [x for x in lines if "after log head" in x]
    assert [x.split(":")[0] for x in unsigned] == [f"seq {i}" for i in range(signed_lines, total)]
    # The twin: the same amend of a record commit to what it already says changes nothing.
    twin = copied(all_signed, tmp_path / "all")
    message = twin.git("log", "-1", "--format=%B").splitlines()
    amend_head(
        twin,
        next(x for x in message if x.startswith("Harness-Log-Head: ")),
        next(x for x in message if x.startswith(checkpoint.TRAILER)),
    )
    assert audit(twin, "--key", str(keys / "key.pub")) == (
        0,
        [f"audit demo: {total} events, clean"],
    )


def test_a_harness_commit_left_on_head_when_the_log_is_cut_back_is_a_finding(
    half_signed: Path, keys: Path, tmp_path: Path
) -> None:
    """The log and exchanges cut back to R1's and R1's signature copied onto the newest
    record commit, S2's subtask commit left on HEAD: no line names that commit."""
    s = copied(half_signed, tmp_path / "half")
    r1, head, signature = first_signed(s)
    s.git("rm", "-rq", "ai/tasks/demo", "ai/exchanges/demo")
    s.git("checkout", r1, "--", "ai/tasks/demo", "ai/exchanges/demo")
    s.git("add", "-A", "ai")
    s.git("-c", "user.name=h", "-c", "user.email=h@h", "commit", "-q", "--amend", "--no-edit")
    resign_records(s, r1, head, signature, tmp_path)
    t2 = s.git("log", "-1", "--format=%H", "--grep=^Harness-Subtask: T2").strip()
    code, lines = audit(s, "--key", str(keys / "key.pub"))
    assert code == 1
    assert any(f"commit {t2[:12]}" in x and "no line of the log names it" in x for x in lines), (
        lines
    )


def test_audit_refuses_a_public_key_inside_the_repository(
    signed: Sample, keys: Path, tmp_path: Path
) -> None:
    """A pull request can commit a key of its own: the key that judges the record must come
    from the person checking it, never from the record."""
    s = copied(signed.root, tmp_path)
    inside = s.root / "ai" / "key.pub"
    shutil.copy(keys / "key.pub", inside)
    link = tmp_path / "link.pub"
    link.symlink_to(inside)
    for named in (inside, link, s.root / "src" / ".." / "ai" / "key.pub"):
        res = s.cli("audit", "demo", "--key", str(named))
        assert res.returncode == 2, res.stdout
        assert len(res.stderr.splitlines()) == 1 and "inside the repository" in res.stderr
    # The twin: the same key, from outside.
    assert audit(s, "--key", str(keys / "key.pub"))[0] == 0
