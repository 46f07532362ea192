"""Signed registry entries: Ed25519 keys, signatures and trusted-key files.

The hash chain shows that entries were not edited, deleted or reordered *since a head was
published*, but anyone who can write the file can append a well-chained entry, or rewrite the
whole chain. A signature shows who wrote an entry: only the holder of the private key can make
it, and ``verify --trusted-keys`` fails on an entry that is unsigned or signed by a key not in
the list.

What is signed: the bytes ``SIGNED_PREFIX + canonical_json(entry without "hash" and
"signature")``. That includes ``prev_hash``, so a signature cannot be moved to another place
in the chain, and the prefix keeps it from being valid for anything but a delphi entry. The
entry's ``hash`` then covers the content *and* the signature (see :mod:`.schema`).

Keys (RFC 8032 Ed25519, via the ``cryptography`` package):

* private key file: PKCS#8 PEM, unencrypted, created with mode 0600 by :func:`generate_key`;
  :func:`load_signing_key` refuses one readable by group or others (as ssh does).
* public key text: ``ed25519:<base64 of the 32 raw bytes>``; its fingerprint is
  ``ed25519:<first 16 hex digits of SHA-256 of the raw bytes>``.
* trusted-keys file: one key per line, ``ed25519:<base64> [name]``; blank lines and lines
  starting with ``#`` are ignored. The ``.pub`` file written by :func:`generate_key` is one.

Only public keys and signatures ever enter a registry.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..core.files import read_regular_file
from ..errors import RegistryError
from .schema import SignatureRecord, canonical_json

__all__ = ["SIGNED_PREFIX", "SigningKey", "generate_key", "load_signing_key",
           "load_trusted_keys", "public_key_text", "fingerprint", "sign_fields",
           "signature_valid"]

#: Domain separation: what precedes the canonical entry in the signed message.
SIGNED_PREFIX = b"delphi.registry/1 entry signature\n"
_KEY_PREFIX = "ed25519:"


def _crypto():
    # Imported on use: reading and verifying unsigned registries needs no cryptography.
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return ed25519, serialization, InvalidSignature


def public_key_text(raw: bytes) -> str:
    """``ed25519:<base64>`` for 32 raw public-key bytes."""
    return _KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def fingerprint(key: str) -> str:
    """Short name of a public key (``ed25519:`` + 16 hex digits of SHA-256 of its raw bytes).

    ``key`` is the base64 of the raw bytes, with or without the ``ed25519:`` prefix.
    """
    b64 = key[len(_KEY_PREFIX):] if key.startswith(_KEY_PREFIX) else key
    return _KEY_PREFIX + hashlib.sha256(base64.b64decode(b64)).hexdigest()[:16]


@dataclass(frozen=True)
class SigningKey:
    """A loaded Ed25519 private key (never written to a registry) and its public key."""

    path: str
    private: Any = None
    public: str = ""
    """Public key text, ``ed25519:<base64>``."""

    def __repr__(self) -> str:  # never show key material
        return f"SigningKey({self.path!r}, public={self.public!r})"

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public)


def generate_key(path: str | os.PathLike, *, name: str | None = None) -> tuple[str, Path]:
    """Write a new Ed25519 private key to ``path`` (mode 0600) and its public key to
    ``path + ".pub"`` (a one-line trusted-keys file: ``ed25519:<base64> NAME``).

    Parameters
    ----------
    name: the signer's name written after the public key (default: the key file's name).

    Returns
    -------
    (public key line, path of the ``.pub`` file).

    Missing parent folders are created (mode 0700); the CLI says so.

    Raises
    ------
    RegistryError
        ``path`` or its ``.pub`` exists (keys are never overwritten), the name has spaces or
        the file cannot be written.
    """
    ed25519, serialization, _ = _crypto()
    if not str(path).strip() or not Path(path).name:
        # Path("") is "."; with_name() would fail on it with a Python error.
        raise RegistryError(f"key file {str(path)!r}: give the path of a file to create, "
                            f"e.g. me.key")
    path = Path(path)
    pub_path = path.with_name(path.name + ".pub")
    name = path.name if name is None else name
    if not name or any(c.isspace() for c in name):
        raise RegistryError(f"key name {name!r}: give a non-empty name without spaces")
    for p in (path, pub_path):
        if os.path.lexists(p):
            raise RegistryError(f"{p} exists; a key is never overwritten (choose another path)")
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    line = f"{public_key_text(raw)} {name}"
    try:
        # Each missing folder 0700 (mkdir(parents=True) would give the upper ones the umask).
        for folder in reversed([path.parent, *path.parent.parents]):
            if not folder.exists():
                folder.mkdir(mode=0o700)
        # O_EXCL: never follow or replace an existing file; 0600 from the start (no window
        # in which the key is readable by others).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(path, 0o600)  # the umask can only remove bits; make the mode exact anyway
        fd = os.open(pub_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, (line + "\n").encode("ascii"))
        finally:
            os.close(fd)
    except OSError as exc:
        raise RegistryError(f"cannot write key file {exc.filename or path}: "
                            f"{exc.strerror or exc}") from None
    return line, pub_path


def load_signing_key(path: str | os.PathLike) -> SigningKey:
    """Read an Ed25519 private key file (PKCS#8 PEM, as written by :func:`generate_key`).

    Raises
    ------
    RegistryError
        The file is missing, unreadable, not a regular file (a FIFO, a device), larger than a
        key file can be, a public key (the
        message names the private key file to pass instead), readable by group or others
        (POSIX; checked only once the file is known to hold a private key), an encrypted
        private key, or not an Ed25519 private key. The file's content is never echoed.
    """
    ed25519, serialization, _ = _crypto()
    path = Path(path)
    try:
        # A regular file of at most _MAX_KEY_BYTES (a FIFO or a device is never read).
        data = read_regular_file(path, limit=_MAX_KEY_BYTES, what="signing key",
                                 error=RegistryError)
        st = os.stat(path)
    except OSError as exc:
        raise RegistryError(f"cannot read signing key {path}: {exc.strerror or exc}") from None
    if _is_public_key(data):
        # Checked before the mode: a public key may be readable by anyone.
        private = (f"the private key file ({path.with_suffix('')})"
                   if path.suffix == ".pub" else "the private key file it was made with")
        raise RegistryError(f"signing key {path} is a public key; pass {private} (public keys "
                            f"go to `verify --trusted-keys`)")
    if os.name == "posix" and st.st_mode & 0o077:
        raise RegistryError(f"signing key {path} is readable by others (mode "
                            f"{stat.S_IMODE(st.st_mode):04o}); run `chmod 600 {path}`")
    if b"ENCRYPTED PRIVATE KEY" in data or b"Proc-Type: 4,ENCRYPTED" in data:
        raise RegistryError(_ENCRYPTED.format(path=path))
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:  # cryptography: "Password was not given but private key is encrypted"
        raise RegistryError(_ENCRYPTED.format(path=path)) from None
    except ValueError:
        # Never echo the file: it may be a secret of another kind.
        raise RegistryError(f"signing key {path} is not an unencrypted PEM private key; make "
                            f"one with `delphi registry keygen`") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        kind = _key_kind(key)
        raise RegistryError(f"signing key {path} is not an Ed25519 private key (it is {kind} "
                            f"key); make one with `delphi registry keygen`")
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    return SigningKey(str(path), key, public_key_text(raw))


#: A PEM private key is a few hundred bytes (RSA 4096: about 3.3 kB); anything larger is not one.
_MAX_KEY_BYTES = 64 * 1024
#: Largest trusted-keys file read [bytes]: some 10,000 keys of about 60 bytes each.
MAX_TRUSTED_KEYS_BYTES = 1024 * 1024

_ENCRYPTED = ("signing key {path} is an encrypted private key; encrypted private keys are not "
              "supported (delphi never asks for a passphrase): keep an unencrypted key with mode "
              "0600, e.g. from `delphi registry keygen`")



def _key_kind(key) -> str:
    """``"an RSA"``, ``"an elliptic-curve (ECDSA)"``...: the kind of a private key in words
    (by isinstance: the classes' own names are internal to cryptography)."""
    from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, rsa, x448, x25519

    for cls, label in ((rsa.RSAPrivateKey, "an RSA"),
                       (ec.EllipticCurvePrivateKey, "an elliptic-curve (ECDSA)"),
                       (dsa.DSAPrivateKey, "a DSA"), (ed448.Ed448PrivateKey, "an Ed448"),
                       (x25519.X25519PrivateKey, "an X25519"), (x448.X448PrivateKey, "an X448")):
        if isinstance(key, cls):
            return label
    return "another kind of"


def _is_public_key(data: bytes) -> bool:
    """Whether ``data`` is a public key: delphi's ``ed25519:...`` line (a ``.pub`` file), a PEM
    public key or an OpenSSH public key line."""
    head = data.lstrip()[:64]
    return (head.startswith((_KEY_PREFIX.encode(), b"ssh-", b"ecdsa-sha2-"))
            or b"-----BEGIN PUBLIC KEY-----" in data or b"-----BEGIN RSA PUBLIC KEY-----" in data
            or b"---- BEGIN SSH2 PUBLIC KEY ----" in data)


def load_trusted_keys(path: str | os.PathLike) -> dict[str, str]:
    """``{public key text: signer name}`` from a trusted-keys file.

    A key without a name is named by its fingerprint.

    Raises
    ------
    RegistryError
        The file cannot be read, is not a regular file (a FIFO, a device) or is larger than
        :data:`MAX_TRUSTED_KEYS_BYTES`, is not UTF-8, a line is not ``ed25519:<base64 of 32
        bytes> [name]`` (named by line number), the same key appears twice, or the file lists
        no key.
    """
    path = Path(path)
    try:
        data = read_regular_file(path, limit=MAX_TRUSTED_KEYS_BYTES, what="trusted keys",
                                 error=RegistryError)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"cannot read trusted keys {path}: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
    keys: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, name = line.partition(" ")
        if not key.startswith(_KEY_PREFIX) or not _is_raw_key(key[len(_KEY_PREFIX):]):
            raise RegistryError(f"{path}, line {n}: expected 'ed25519:<base64 public key> "
                                f"[name]' (as printed by `delphi registry keygen`)")
        if key in keys:
            raise RegistryError(f"{path}, line {n}: key {fingerprint(key)} is listed twice")
        keys[key] = name.strip() or fingerprint(key)
    if not keys:
        raise RegistryError(f"{path} lists no trusted key")
    return keys


def _is_raw_key(b64: str) -> bool:
    try:
        return len(base64.b64decode(b64, validate=True)) == 32
    except (binascii.Error, ValueError):
        return False


def _message(fields: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in fields.items() if k not in ("hash", "signature")}
    return SIGNED_PREFIX + canonical_json(body).encode("ascii")


def sign_fields(fields: Mapping[str, Any], key: SigningKey) -> SignatureRecord:
    """The signature of an entry's JSON fields (``hash`` and ``signature`` are left out)."""
    sig = key.private.sign(_message(fields))
    return SignatureRecord(key=key.public[len(_KEY_PREFIX):],
                           sig=base64.b64encode(sig).decode("ascii"))


def signature_valid(fields: Mapping[str, Any]) -> bool:
    """True when ``fields["signature"]`` is a valid signature of the other fields by the key
    it names."""
    ed25519, _, InvalidSignature = _crypto()
    sig = fields.get("signature")
    try:
        public = ed25519.Ed25519PublicKey.from_public_bytes(base64.b64decode(sig["key"]))
        public.verify(base64.b64decode(sig["sig"]), _message(fields))
    except (InvalidSignature, ValueError, TypeError, KeyError, binascii.Error):
        return False
    return True
