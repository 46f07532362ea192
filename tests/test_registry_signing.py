"""Signed registry entries (Ed25519), trusted keys, and publishing the head.

Expected signatures and hashes are checked here with ``cryptography`` and ``hashlib``
directly, from the format the README and :mod:`delphi.registry.signing` describe, not by
calling delphi's own verification.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

import delphi
from delphi import RegistryError
from delphi.cli import main as registry_main
from delphi.registry import Registry, generate_key, load_signing_key, load_trusted_keys

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "ladders" / "marin-registry.jsonl"
PREFIX = b"delphi.registry/1 entry signature\n"


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def sha256_without_hash(raw: dict) -> str:
    return hashlib.sha256(canonical({k: v for k, v in raw.items() if k != "hash"})).hexdigest()


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_bytes().split(b"\n")[:-1]]


def write_lines(path: Path, raws: list[dict]) -> None:
    path.write_bytes(b"".join(canonical(r) + b"\n" for r in raws))


def rechain(raws: list[dict]) -> list[dict]:
    """What someone with write access can do: recompute every prev_hash and hash."""
    prev, out = "0" * 64, []
    for raw in raws:
        raw = {**raw, "prev_hash": prev}
        raw["hash"] = sha256_without_hash(raw)
        prev = raw["hash"]
        out.append(raw)
    return out


def external(reg: Registry, id: str, loss: float = 2.5, **kw):
    return reg.register_external(id=id, loss=loss, target={"flops": 1e21}, source="test", **kw)


def run_cli(capsys, *argv):
    code = registry_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def keys(tmp_path):
    """Alice's and Mallory's key files, and a trusted-keys file listing Alice only."""
    alice = tmp_path / "alice.key"
    mallory = tmp_path / "mallory.key"
    generate_key(alice, name="alice")
    generate_key(mallory, name="mallory")
    return alice, mallory, Path(str(alice) + ".pub")


# --------------------------------------------------------------------------- keys
def test_keygen_writes_a_private_key_0600_and_its_public_key(tmp_path, capsys):
    path = tmp_path / "k"
    code, out, _ = run_cli(capsys, "registry", "keygen", path, "--name", "alice")
    assert code == 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    private = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(private, ed25519.Ed25519PrivateKey)
    raw = private.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
    expected = "ed25519:" + base64.b64encode(raw).decode() + " alice"
    assert out.splitlines()[0] == expected
    assert (tmp_path / "k.pub").read_text() == expected + "\n"
    assert load_trusted_keys(tmp_path / "k.pub") == {expected.split()[0]: "alice"}
    # Never overwritten.
    before = path.read_bytes()
    code, _, err = run_cli(capsys, "registry", "keygen", path)
    assert code == 1 and "never overwritten" in err and path.read_bytes() == before
    code, out, _ = run_cli(capsys, "registry", "keygen", tmp_path / "j", "--json")
    d = json.loads(out)
    assert d["fingerprint"] == "ed25519:" + hashlib.sha256(
        base64.b64decode(d["public_key"][len("ed25519:"):])).hexdigest()[:16]


def test_bad_key_files_are_refused_without_echoing_them(tmp_path):
    secret = tmp_path / "notakey"
    secret.write_text("root:$6$saltsalt$hash:19000:0:99999:7:::\n")
    secret.chmod(0o600)
    with pytest.raises(RegistryError, match="not an unencrypted PEM private key") as info:
        load_signing_key(secret)
    assert "saltsalt" not in str(info.value) and "19000" not in str(info.value)
    ec_key = tmp_path / "ec.pem"
    ec_key.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    ec_key.chmod(0o600)
    with pytest.raises(RegistryError, match=r"not an Ed25519 private key \(it is an "
                                            r"elliptic-curve \(ECDSA\) key\)"):
        load_signing_key(ec_key)
    generate_key(tmp_path / "open.key")
    (tmp_path / "open.key").chmod(0o644)
    with pytest.raises(RegistryError, match="readable by others.*chmod 600"):
        load_signing_key(tmp_path / "open.key")
    with pytest.raises(RegistryError, match="cannot read signing key"):
        load_signing_key(tmp_path / "missing.key")


def test_trusted_keys_file_errors_name_the_line(tmp_path, keys):
    _, _, pub = keys
    bad = tmp_path / "trusted"
    bad.write_text("# Alice\n" + pub.read_text() + "ed25519:tooshort bob\n")
    with pytest.raises(RegistryError, match="trusted, line 3: expected 'ed25519:"):
        load_trusted_keys(bad)
    bad.write_text(pub.read_text() * 2)
    with pytest.raises(RegistryError, match="line 2: key .* listed twice"):
        load_trusted_keys(bad)
    bad.write_text("# nobody\n\n")
    with pytest.raises(RegistryError, match="lists no trusted key"):
        load_trusted_keys(bad)


# --------------------------------------------------------------------------- signatures
def test_a_signed_entry_carries_an_ed25519_signature_of_its_canonical_content(tmp_path, keys):
    alice, _, _ = keys
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "p", interval=(2.4, 2.6, 0.9), sign_key=alice)
    reg.score("p", 2.55, sign_key=alice)
    private = serialization.load_pem_private_key(alice.read_bytes(), password=None)
    public_raw = private.public_key().public_bytes(serialization.Encoding.Raw,
                                                   serialization.PublicFormat.Raw)
    prev = "0" * 64
    for raw in lines_of(path):
        sig = raw["signature"]
        assert sig["alg"] == "ed25519" and base64.b64decode(sig["key"]) == public_raw
        message = PREFIX + canonical({k: v for k, v in raw.items()
                                      if k not in ("hash", "signature")})
        ed25519.Ed25519PublicKey.from_public_bytes(public_raw).verify(
            base64.b64decode(sig["sig"]), message)  # raises InvalidSignature if wrong
        assert raw["prev_hash"] == prev and raw["hash"] == sha256_without_hash(raw)
        prev = raw["hash"]
    # Keys never enter the file: only the public key and signatures.
    data = path.read_bytes()
    pem_body = b"".join(alice.read_bytes().split(b"\n")[1:-2])
    private_raw = private.private_bytes(serialization.Encoding.Raw,
                                        serialization.PrivateFormat.Raw,
                                        serialization.NoEncryption())
    for secret in (pem_body, base64.b64encode(private_raw), private_raw.hex().encode(),
                   b"PRIVATE KEY"):
        assert secret not in data


def test_unsigned_entries_keep_their_format_and_hashes(tmp_path, keys):
    alice, _, _ = keys
    # The bundled file (written before signatures existed) hashes exactly as before.
    for raw in lines_of(BUNDLED):
        assert "signature" not in raw and raw["hash"] == sha256_without_hash(raw)
    assert Registry(BUNDLED).verify().ok
    path = tmp_path / "r.jsonl"
    path.write_bytes(BUNDLED.read_bytes())
    reg = Registry(path)
    new = external(reg, "unsigned-new")
    assert "signature" not in json.loads(new.line)  # no "signature": null either
    external(reg, "signed-new", sign_key=alice)
    report = reg.verify()
    assert report.ok and [s.key is not None for s in report.signers] == [False] * 6 + [True]
    assert path.read_bytes().startswith(BUNDLED.read_bytes())


def test_verify_names_each_signer(tmp_path, keys, capsys):
    alice, mallory, pub = keys
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "a", sign_key=alice)
    external(reg, "m", sign_key=mallory)
    external(reg, "u")
    mallory_key = (Path(str(mallory) + ".pub")).read_text().split()[0]
    fp = "ed25519:" + hashlib.sha256(base64.b64decode(mallory_key[8:])).hexdigest()[:16]
    report = reg.verify()
    assert report.ok and [(s.line, s.id) for s in report.signers] == [(1, "a"), (2, "m"),
                                                                       (3, "u")]
    assert [s.describe() for s in report.signers][1:] == [f"signed by {fp}", "unsigned"]
    both = tmp_path / "both"
    both.write_text(pub.read_text() + Path(str(mallory) + ".pub").read_text())
    code, out, _ = run_cli(capsys, "registry", "verify", path, "--trusted-keys", both)
    assert code == 1 and "FAILED at line 3 (id u): is not signed" in out
    assert "signed by alice (ed25519:" in out and f"signed by mallory ({fp})" in out
    code, out, _ = run_cli(capsys, "registry", "verify", path, "--json")
    d = json.loads(out)
    assert code == 0 and [s["fingerprint"] for s in d["signers"]][1:] == [fp, None]


def test_trusted_keys_catch_unsigned_foreign_and_forged_appends(tmp_path, keys, capsys):
    alice, mallory, pub = keys
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "p", sign_key=alice)
    reg.score("p", 2.6, sign_key=alice)
    good = path.read_bytes()
    assert reg.verify(trusted_keys=pub).ok

    def check(id_, line, fragment, trusted=pub):
        report = Registry(path).verify(trusted_keys=trusted)
        assert not report.ok and (report.line, report.id) == (line, id_), report
        assert fragment in report.problem, report
        code, out, _ = run_cli(capsys, "registry", "verify", path,
                               *(["--trusted-keys", trusted] if trusted else []))
        assert code == 1 and f"FAILED at line {line} (id {id_})" in out

    # A forged but well-chained append: verifies on the chain alone, not with trusted keys.
    external(reg, "forged")
    assert reg.verify().ok
    check("forged", 3, "is not signed")
    path.write_bytes(good)
    external(Registry(path), "forged", sign_key=mallory)
    check("forged", 3, "not one of the trusted keys")
    # An edited entry with every hash recomputed: Alice's signature no longer matches, with or
    # without trusted keys.
    raws = lines_of(path)[:2]
    raws[0]["forecast"]["loss"] = 2.4
    write_lines(path, rechain(raws))
    check("p", 1, "signature that does not verify", trusted=None)
    # A valid signature moved onto another entry (chain recomputed).
    path.write_bytes(good)
    raws = lines_of(path)
    raws[1]["signature"] = raws[0]["signature"]
    write_lines(path, rechain(raws))
    check("p/outcome-1", 2, "signature that does not verify", trusted=None)
    # An appended entry with a signature of its own but a bad one.
    path.write_bytes(good)
    external(Registry(path), "x", sign_key=alice)
    raws = lines_of(path)
    sig = base64.b64decode(raws[2]["signature"]["sig"])
    raws[2]["signature"]["sig"] = base64.b64encode(bytes([sig[0] ^ 1]) + sig[1:]).decode()
    write_lines(path, rechain(raws))
    check("x", 3, "signature that does not verify")
    # Appends refuse to extend a chain holding a bad signature.
    with pytest.raises(RegistryError, match="line 3 .*signature that does not verify"):
        external(Registry(path), "y", sign_key=alice)


def test_cli_register_and_score_sign_entries(tmp_path, keys, capsys):
    alice, _, pub = keys
    path = tmp_path / "r.jsonl"
    code, out, _ = run_cli(capsys, "register", "--registry", path, "--id", "p",
                           "--external-loss", "2.5", "--external-source", "t",
                           "--target-flops", "1e21", "--sign-key", alice)
    key = pub.read_text().split()[0]
    fp = "ed25519:" + hashlib.sha256(base64.b64decode(key[8:])).hexdigest()[:16]
    assert code == 0 and f"signed     {fp}" in out
    code, _, _ = run_cli(capsys, "score", "--registry", path, "--id", "p", "--actual", "2.6",
                         "--sign-key", alice, "--json")
    assert code == 0
    assert all("ed25519:" + r["signature"]["key"] == key for r in lines_of(path))
    code, out, _ = run_cli(capsys, "registry", "verify", path, "--trusted-keys", pub)
    assert code == 0 and out.count("signed by alice") == 2
    before = path.read_bytes()
    code, _, err = run_cli(capsys, "register", "--registry", path, "--id", "q",
                           "--external-loss", "2.5", "--external-source", "t",
                           "--target-flops", "1e21", "--sign-key", tmp_path / "nope.key")
    assert code == 1 and "cannot read signing key" in err and path.read_bytes() == before


# --------------------------------------------------------------------------- head
def test_head_prints_the_last_hash_to_publish(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "a")
    external(reg, "b")
    last = lines_of(path)[-1]["hash"]
    code, out, _ = run_cli(capsys, "registry", "head", path)
    assert code == 0 and out == last + "\n"
    code, out, _ = run_cli(capsys, "registry", "head", path, "--json")
    assert json.loads(out) == {"path": str(path), "head": last, "n_entries": 2,
                               "delphi_version": delphi.__version__}
    # Published, then the last entry is cut off: the chain alone verifies, the head does not.
    path.write_bytes(b"".join(x + b"\n" for x in path.read_bytes().split(b"\n")[:1]))
    assert reg.verify().ok
    code, out, _ = run_cli(capsys, "registry", "verify", path, "--expect-head", last)
    assert code == 1 and "removed from the end, or the history was rewritten" in out
    # No head for a broken or empty registry.
    path.write_bytes(path.read_bytes().replace(b'"loss":2.5', b'"loss":2.4'))
    code, out, err = run_cli(capsys, "registry", "head", path)
    assert code == 1 and out == "" and "does not verify" in err
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(RegistryError, match="empty"):
        Registry(tmp_path / "empty.jsonl").head()


def test_wrong_kinds_of_key_file_are_named_without_python_internals(tmp_path, capsys):
    from cryptography.hazmat.primitives.asymmetric import rsa

    generate_key(tmp_path / "me.key", name="me")
    pub = tmp_path / "me.key.pub"
    assert stat.S_IMODE(os.stat(pub).st_mode) & 0o044   # readable by others, as it should be
    with pytest.raises(RegistryError) as info:
        load_signing_key(pub)
    message = str(info.value)
    assert f"is a public key; pass the private key file ({tmp_path / 'me.key'})" in message
    assert "chmod" not in message and "readable by others" not in message
    # A PEM public key too.
    pem_pub = tmp_path / "pub.pem"
    pem_pub.write_bytes(ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(RegistryError, match="is a public key; pass the private key file"):
        load_signing_key(pem_pub)
    encrypted = tmp_path / "enc.key"
    encrypted.write_bytes(ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pass phrase")))
    encrypted.chmod(0o600)
    rsa_key = tmp_path / "rsa.key"
    rsa_key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048)
                        .private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    rsa_key.chmod(0o600)
    garbage = tmp_path / "garbage.key"
    garbage.write_bytes(b"\x00\x01not a key")
    garbage.chmod(0o600)
    expected = {pub: "is a public key; pass the private key file",
                encrypted: "encrypted private keys are not supported",
                rsa_key: "is not an Ed25519 private key (it is an RSA key)",
                garbage: "is not an unencrypted PEM private key"}
    registry = tmp_path / "r.jsonl"
    for key, fragment in expected.items():
        for argv in (["register", "--registry", registry, "--id", "x", "--external-loss", "2.5",
                      "--external-source", "s", "--target-flops", "1e21"],
                     ["score", "--registry", registry, "--id", "x", "--actual", "2.5"]):
            code, out, err = run_cli(capsys, *argv, "--sign-key", key)
            assert code == 1 and out == "" and len(err.splitlines()) == 1
            assert fragment in err, err
            for internal in ("ValueError", "TypeError", "RSAPrivateKey", "Traceback"):
                assert internal not in err
    assert not registry.exists()


@pytest.mark.parametrize("bad", ["", "  "])
def test_keygen_with_an_empty_path_is_a_one_line_error(capsys, bad):
    code, out, err = run_cli(capsys, "registry", "keygen", bad)
    assert code == 1 and out == ""
    assert err.strip() == (f"delphi: error: key file {bad!r}: give the path of a file to "
                           f"create, e.g. me.key")
    with pytest.raises(RegistryError, match="give the path of a file"):
        generate_key(bad)


def test_keygen_says_when_it_creates_the_folder(tmp_path, capsys):
    key = tmp_path / "new" / "sub" / "k.key"
    code, out, _ = run_cli(capsys, "registry", "keygen", key)
    assert code == 0 and key.exists()
    assert out.splitlines()[-1] == (f"created      {tmp_path / 'new'}, {tmp_path / 'new' / 'sub'} "
                                    f"(the folders did not exist; mode 0700)")
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700
    code, out, _ = run_cli(capsys, "registry", "keygen", tmp_path / "new" / "k2.key", "--json")
    assert json.loads(out)["created_folders"] == []
    code, out, _ = run_cli(capsys, "registry", "keygen", tmp_path / "k3.key")
    assert "created " not in out
    code, out, _ = run_cli(capsys, "registry", "keygen", tmp_path / "one" / "k4.key")
    assert out.splitlines()[-1] == (f"created      {tmp_path / 'one'} (the folder did not "
                                    f"exist; mode 0700)")
