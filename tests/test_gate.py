"""The memory gate's pure checks: secret detection, normalization, and every rejection reason.

No database: these are the functions the service calls before it embeds or stores anything.
Vendor-shaped fake keys are built by concatenation so secret scanners don't flag this file.
"""

from __future__ import annotations

import pytest

from agent_memory.config import MemoryConfig
from agent_memory.gate import check_content, normalize_content
from agent_memory.models import RejectionReason
from agent_memory.sensitive import KINDS, find_sensitive, iban_valid, luhn_valid

_RANDOM = "Q7xR2mK9vL4pZ8nB3wT6yH1cF5gJ0dS"  # 32 mixed characters, high entropy
_AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

# (text, the secret inside it, expected kind)
SECRETS = [
    ("my openai key is " + "sk-" + _RANDOM + "abcd", "sk-" + _RANDOM, "an API key"),
    ("project key " + "sk-proj-" + _RANDOM, "sk-proj-" + _RANDOM, "an API key"),
    ("anthropic: " + "sk-ant-api03-" + _RANDOM, "sk-ant-api03-" + _RANDOM, "an API key"),
    ("maps key " + "AIza" + "SyD3x9K2mQ7vL4pZ8nB3wT6yH1cF5gJ0dSa", "AIza" + "SyD3x9K2mQ7vL4pZ8nB3wT6yH1cF5gJ0dSa",
     "an API key"),
    ("stripe " + "sk_" + "live_" + _RANDOM[:24], "sk_" + "live_" + _RANDOM[:24], "an API key"),
    ("restricted " + "rk_" + "live_" + _RANDOM[:24], "rk_" + "live_" + _RANDOM[:24], "an API key"),
    ("api_key=" + _RANDOM, _RANDOM, "an API key"),
    ("my api key is " + _RANDOM, _RANDOM, "an API key"),
    ("use " + "ghp_" + _RANDOM + "abcd", "ghp_" + _RANDOM, "an access token"),
    ("oauth " + "gho_" + _RANDOM + "abcd", "gho_" + _RANDOM, "an access token"),
    ("server " + "ghs_" + _RANDOM + "abcd", "ghs_" + _RANDOM, "an access token"),
    ("fine-grained " + "github_pat_" + "11ABCDEFG0" + _RANDOM, "github_pat_" + "11ABCDEFG0", "an access token"),
    ("slack bot " + "xox" + "b-1234567890-" + _RANDOM[:24], "1234567890-" + _RANDOM[:24], "an access token"),
    ("slack user " + "xox" + "p-1234567890-" + _RANDOM[:24], "1234567890-" + _RANDOM[:24], "an access token"),
    ("token: " + _RANDOM, _RANDOM, "an access token"),
    ("ACCESS_TOKEN=" + _RANDOM, _RANDOM, "an access token"),
    ("send Authorization: Bearer " + _RANDOM, _RANDOM, "an access token"),
    ("key id " + "AKIA" + "IOSFODNN7EXAMPLE", "AKIA" + "IOSFODNN7EXAMPLE", "an AWS access key id"),
    ("aws_secret_access_key = " + _AWS_SECRET, _AWS_SECRET, "an AWS secret key"),
    ("my AWS secret key is " + _AWS_SECRET, _AWS_SECRET, "an AWS secret key"),
    ("my password is hunter2", "hunter2", "a password"),
    ("Password: c0rrect-Horse!", "c0rrect-Horse!", "a password"),
    ("the wifi password is tr0ub4dor", "tr0ub4dor", "a password"),
    ("my password for github is bananas42", "bananas42", "a password"),
    ("DB_PASSWORD=s3cr3t-value", "s3cr3t-value", "a password"),
    ("connect with pwd=Zq81!x", "Zq81!x", "a password"),
    ("the door passcode is 8812#", "8812#", "a password"),
    ("my password is banana.", "banana", "a password"),
    ("my password is banana, don't tell anyone", "banana", "a password"),
    ("my PIN is 1234", "1234", "a PIN"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
     "MIIEpAIBAAKCAQEA", "a private key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n", "b3BlbnNzaC1rZXktdjE", "a private key"),
    ("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n", "MIGHAgEAMBMGByqGSM49", "a private key"),
    ("my card is 4111 1111 1111 1111", "4111 1111 1111 1111", "a payment card number"),
    ("card 5555-5555-5555-4444 exp 12/27", "5555-5555-5555-4444", "a payment card number"),
    ("amex 3782 822463 10005", "3782 822463 10005", "a payment card number"),
    ("pay with 4111111111111111.", "4111111111111111", "a payment card number"),
    ("my SSN is 123-45-6789", "123-45-6789", "a national id number"),
    ("NI number JG 10 37 26 A", "JG 10 37 26 A", "a national id number"),
    ("NINO: AB123456C", "AB123456C", "a national id number"),
    ("DNI 12345678Z", "12345678Z", "a national id number"),
    ("session " + _JWT, _JWT, "a JWT"),
    ("Authorization: Bearer " + _JWT, _JWT, "a JWT"),
    ("DATABASE_URL=postgres://app:Sup3rS3cret@db.internal:5432/app", "Sup3rS3cret",
     "a database URL with a password"),
    ("use postgresql+psycopg://me:pa55word@localhost/db", "pa55word", "a database URL with a password"),
    ("mongodb+srv://admin:Xy7pQ@cluster0.example.net", "Xy7pQ", "a database URL with a password"),
    ("fetch https://bob:letmein99@files.example.com/x", "letmein99", "a URL with a password"),
    ("salary goes to DE89 3704 0044 0532 0130 00", "DE89 3704 0044 0532 0130 00", "a bank account number (IBAN)"),
    ("IBAN GB82WEST12345698765432", "GB82WEST12345698765432", "a bank account number (IBAN)"),
    ("my iban is gb82west12345698765432", "gb82west12345698765432", "a bank account number (IBAN)"),
    ("my account number is 12345678", "12345678", "a bank account number"),
    ("my wallet seed: abandon ability able about above absent absorb abstract absurd abuse access accident",
     "abandon ability able about above absent absorb abstract absurd abuse access accident", "a wallet seed phrase"),
    ("alerts go to https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF12/" + _RANDOM[:24],
     "https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF12/" + _RANDOM[:24], "a webhook URL"),
    ("2FA backup codes: 4829 1038 5521 0932 7741 2290", "4829 1038 5521 0932 7741 2290", "a recovery code"),
    ("the TOTP secret is JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", "a recovery code"),
    ("CVV: 123", "123", "a card security code"),
    ("passport number X12345678", "X12345678", "a passport number"),
    ("mi contraseña es Girasol#42", "Girasol#42", "a password"),
    ("我的密码是Sunflower!12", "Sunflower!12", "a password"),
    ("I use Marigold!23 as my password", "Marigold!23", "a password"),
    ("the door code is 4821", "4821", "a PIN"),
    ("ssn 078051120", "078051120", "a national id number"),
    ("clone https://:" + "pw" + "Tok3n99@git.example.org/x.git", "pw" + "Tok3n99", "a URL with a password"),
]

ORDINARY = [
    "I prefer dark mode",
    "My favorite number is 42",
    "we use PostgreSQL 16 on port 5432",
    "the meeting is on 2024-05-01",
    "call me at 555-123-4567",
    "I password-protect my laptop",
    "The token ring network",
    "my order id is 1234567890123",
    "The password is required to log in",
    "my password is stored in the team vault",
    "reset your password: it expired",
    "the password is case-sensitive",
    "the passcode was sent by SMS",
    "the password for the router is on the sticker",
    "My password manager is 1Password",
    "call +4915112345678 after six",  # Luhn-valid by chance, but a phone number
    "password: ********",
    "DB_PASSWORD=${DB_PASSWORD}",
    "api_key = your_api_key_here",
    "the auth token is valid for one hour",
    "token: <redacted>",
    "I use scikit-learn and sk-learn-style pipelines for classification",
    "meetings 2024-05-01 2024-06-01 2024-07-01 2024-08-01",
    "the invoice total was 1234 5678 9012 3456 yen",  # grouped like a card but fails Luhn
    "connect LED to pin 13",
    "the repo is https://github.com/langchain-ai/langgraph",
    "the server runs at http://localhost:8080/api",
    "ssh to git@github.com:org/repo.git",
    "BEGIN the PUBLIC KEY exchange first",
    "Use a Bearer token in the Authorization header",
    "I was born in 1990 and moved to Berlin in 2015",
    "Our team has 12345678 users",
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS, ids=[s[2] + ":" + s[0][:24] for s in SECRETS])
def test_every_secret_kind_is_detected(text: str, secret: str, kind: str) -> None:
    assert find_sensitive(text) == kind


def test_the_samples_cover_every_kind() -> None:
    assert {kind for _, _, kind in SECRETS} == set(KINDS)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_memories_are_not_flagged(text: str) -> None:
    assert find_sensitive(text) is None
    assert check_content(text, confidence=1.0, config=MemoryConfig()) is None


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS, ids=[s[2] + ":" + s[0][:24] for s in SECRETS])
def test_rejection_names_the_kind_but_never_the_secret(text: str, secret: str, kind: str) -> None:
    rejection = check_content(text, confidence=1.0, config=MemoryConfig())
    assert rejection is not None
    assert rejection.reason is RejectionReason.SENSITIVE
    assert rejection.kind == kind
    assert rejection.message == (
        f"content looks like it contains {kind}; secrets are never stored — remove it and save the rest"
    )
    assert secret not in rejection.message
    assert secret not in repr(rejection)


# --- validators ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "valid"),
    [
        ("4111111111111111", True),
        ("4111 1111 1111 1111", True),
        ("5555-5555-5555-4444", True),
        ("378282246310005", True),
        ("4111111111111112", False),
        ("4111 1111 1111 1113", False),
        ("1234567890123", False),
        ("", False),
    ],
)
def test_luhn(number: str, valid: bool) -> None:
    assert luhn_valid(number) is valid


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("card 4111 1111 1111 1111", True),
        ("card 4111 1111 1111 1112", False),
        ("card 4012888888881881", True),
        ("card 4012888888881882", False),
        ("card 6011111111111117", True),
        ("card 6011111111111118", False),
    ],
)
def test_card_numbers_are_flagged_only_when_luhn_valid(text: str, flagged: bool) -> None:
    assert (find_sensitive(text) == "a payment card number") is flagged


@pytest.mark.parametrize(
    ("iban", "valid"),
    [
        ("DE89 3704 0044 0532 0130 00", True),
        ("GB82WEST12345698765432", True),
        ("gb82 west 1234 5698 7654 32", True),
        ("DE89 3704 0044 0532 0130 01", False),
        ("GB82WEST1234", False),
        ("DE89-3704", False),
    ],
)
def test_iban_mod_97(iban: str, valid: bool) -> None:
    assert iban_valid(iban) is valid


def test_iban_failing_the_check_is_not_flagged() -> None:
    assert find_sensitive("ref DE89 3704 0044 0532 0130 01") is None


@pytest.mark.parametrize(
    "ssn",
    ["000-12-3456", "666-12-3456", "900-12-3456", "999-45-6789", "123-00-4567", "123-45-0000"],
)
def test_never_issued_ssn_ranges_are_not_flagged(ssn: str) -> None:
    assert find_sensitive(f"my SSN is {ssn}") is None


@pytest.mark.parametrize("ssn", ["123-45-6789", "001-01-0001", "665-99-9999", "899-12-3456", "123 45 6789"])
def test_valid_ssns_are_flagged(ssn: str) -> None:
    assert find_sensitive(f"SSN {ssn}") == "a national id number"


@pytest.mark.parametrize("ssn", ["123-45-6789", "665-99-9999", "123456789"])
def test_ssn_shaped_numbers_without_an_id_word_are_not_flagged(ssn: str) -> None:
    # part and lot numbers share the NNN-NN-NNNN shape: an id word nearby is what makes it an SSN
    assert find_sensitive(f"part number {ssn} is out of stock") is None


def test_dni_with_a_wrong_letter_is_not_flagged() -> None:
    assert find_sensitive("ref 12345678A") is None


# --- normalization ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("  dark   mode  ", "dark mode"),
        ("a\tb \t c", "a b c"),
        ("line one\r\nline two\rline three", "line one\nline two\nline three"),
        ("first  \n  second", "first\nsecond"),
        ("a\n\n\n\nb", "a\n\nb"),
        ("\n\t \n", ""),
        ("non\u00a0breaking", "non breaking"),
    ],
)
def test_normalize_content(raw: str, normalized: str) -> None:
    assert normalize_content(raw) == normalized


# --- each rejection reason ----------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "   ", "\n\t\r\n "])
def test_empty_content(content: str) -> None:
    rejection = check_content(content, confidence=1.0, config=MemoryConfig())
    assert rejection is not None
    assert rejection.reason is RejectionReason.EMPTY
    assert "empty" in rejection.message
    assert rejection.kind is None


def test_too_short() -> None:
    rejection = check_content("  tea ", confidence=1.0, config=MemoryConfig(min_length=5, max_length=2000))
    assert rejection is not None
    assert rejection.reason is RejectionReason.TOO_SHORT
    assert "3 characters" in rejection.message
    assert "5 to 2000" in rejection.message
    assert "add" in rejection.message


def test_too_long() -> None:
    rejection = check_content("x" * 2001, confidence=1.0, config=MemoryConfig())
    assert rejection is not None
    assert rejection.reason is RejectionReason.TOO_LONG
    assert "2001 characters" in rejection.message
    assert "5 to 2000" in rejection.message
    assert "shorten it or split it into several memories" in rejection.message


def test_length_is_measured_after_normalizing() -> None:
    config = MemoryConfig(min_length=5, max_length=10)
    assert check_content("  a  b  c  d  e  ", confidence=1.0, config=config) is None  # "a b c d e" = 9


@pytest.mark.parametrize(("length", "accepted"), [(9, False), (10, True), (20, True), (21, False)])
def test_length_boundaries_are_inclusive(length: int, accepted: bool) -> None:
    config = MemoryConfig(min_length=10, max_length=20)
    assert (check_content("x" * length, confidence=1.0, config=config) is None) is accepted


def test_default_boundaries() -> None:
    config = MemoryConfig()
    assert check_content("x" * config.min_length, confidence=1.0, config=config) is None
    assert check_content("x" * config.max_length, confidence=1.0, config=config) is None


def test_low_confidence() -> None:
    rejection = check_content("I prefer dark mode", confidence=0.5, config=MemoryConfig())
    assert rejection is not None
    assert rejection.reason is RejectionReason.LOW_CONFIDENCE
    assert "0.5" in rejection.message
    assert "0.7" in rejection.message
    assert "MEMORY_MIN_CONFIDENCE" in rejection.message


@pytest.mark.parametrize(("confidence", "accepted"), [(0.69, False), (0.7, True), (1.0, True)])
def test_confidence_at_threshold_is_accepted(confidence: float, accepted: bool) -> None:
    config = MemoryConfig(min_confidence=0.7)
    assert (check_content("I prefer dark mode", confidence=confidence, config=config) is None) is accepted


def test_min_confidence_zero_accepts_anything() -> None:
    assert check_content("I prefer dark mode", confidence=0.0, config=MemoryConfig(min_confidence=0.0)) is None


# --- order of checks ----------------------------------------------------------------------


def test_empty_wins_over_low_confidence() -> None:
    rejection = check_content("  ", confidence=0.0, config=MemoryConfig())
    assert rejection is not None and rejection.reason is RejectionReason.EMPTY


def test_a_long_secret_is_reported_as_sensitive() -> None:
    content = "notes " * 400 + "-----BEGIN PRIVATE KEY-----\n" + "A" * 2000
    rejection = check_content(content, confidence=0.1, config=MemoryConfig())
    assert rejection is not None
    assert rejection.reason is RejectionReason.SENSITIVE
    assert rejection.kind == "a private key"


def test_a_short_secret_is_reported_as_sensitive() -> None:
    rejection = check_content("PIN is 1234", confidence=1.0, config=MemoryConfig(min_length=50))
    assert rejection is not None and rejection.reason is RejectionReason.SENSITIVE


def test_length_wins_over_confidence() -> None:
    rejection = check_content("tea", confidence=0.0, config=MemoryConfig())
    assert rejection is not None and rejection.reason is RejectionReason.TOO_SHORT


def test_huge_content_is_rejected_as_too_long_without_scanning_it(monkeypatch):
    import agent_memory.gate as gate

    def no_scan(text):
        raise AssertionError(f"scanned {len(text)} characters")

    monkeypatch.setattr(gate, "find_sensitive", no_scan)
    huge = "my password is hunter2! " + "lorem ipsum dolor " * 500_000  # ~9 MB
    rejection = check_content(huge, confidence=1.0, config=MemoryConfig())
    assert rejection is not None and rejection.reason is RejectionReason.TOO_LONG
    # just over the limit is still scanned, so a long pasted secret is named as a secret
    monkeypatch.undo()
    long_secret = "my password is hunter2! " + "x" * 2100
    assert check_content(long_secret, confidence=1.0, config=MemoryConfig()).reason is RejectionReason.SENSITIVE
