"""A corpus of secrets written the way people write them, and of harmless text that looks like them.

``SECRETS`` holds :class:`Secret` entries: a sentence, config line or chat message
(``text``) with the exact substring that must never be stored (``secret``), labelled
with a ``kind`` (finer than the detector's kind names: ``"password_fr"``,
``"token_telegram_bot"``...). ``BENIGN`` holds look-alikes that must be kept: order
numbers, barcodes, part numbers, hashes, placeholders, and sentences *about*
passwords in many languages.

Every value is made up here, from a seeded random generator, with the right shape:
length and alphabet of each vendor's tokens, a valid Luhn digit for cards, mod 97 for
IBANs, a valid checksum for BIP-39 phrases (from the real English word list, shipped
by the ``mnemonic`` package), check digits for national ids. None is a real credential;
the same corpus comes out on every run. Vendor prefixes are built by concatenation so
that secret scanners reading this file do not flag it.

Import it as ``from secrets_corpus import SECRETS, BENIGN``: pytest puts ``tests/`` on
``sys.path`` (rootdir ``conftest.py``, no ``__init__.py``).
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from typing import NamedTuple

from mnemonic import Mnemonic

__all__ = ["BENIGN", "SECRETS", "Secret", "card_number", "iban", "make_benign", "make_secrets"]


class Secret(NamedTuple):
    kind: str
    text: str
    secret: str


# --- value generators -----------------------------------------------------------------

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"
B64URL = string.ascii_letters + string.digits + "-_"
BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def chars(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters drawn from ``alphabet``, with at least one digit and one letter when both are in it."""
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        has_digit = any(c.isdigit() for c in alphabet)
        has_alpha = any(c.isalpha() for c in alphabet)
        if n < 8 or ((not has_digit or any(c.isdigit() for c in s)) and (not has_alpha or any(c.isalpha() for c in s))):
            return s


def luhn_digit(partial: str) -> str:
    """The check digit that makes ``partial + digit`` pass Luhn."""
    total = 0
    for i, c in enumerate(reversed(partial)):
        d = int(c)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def card_number(rng: random.Random, prefix: str, length: int = 16) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    return body + luhn_digit(body)


def group(number: str, sizes: tuple[int, ...], sep: str = " ") -> str:
    out, i = [], 0
    for n in sizes:
        out.append(number[i:i + n])
        i += n
    return sep.join(out)


def iban(rng: random.Random, country: str, bban_len: int, *, letters: int = 0) -> str:
    """A valid IBAN: ``letters`` upper-case bank-code letters, then digits, with the right check digits."""
    bban = "".join(rng.choice(string.ascii_uppercase) for _ in range(letters))
    bban += "".join(rng.choice(string.digits) for _ in range(bban_len - letters))
    rearranged = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in rearranged)) % 97
    return f"{country}{check:02d}{bban}"


def iban_grouped(code: str) -> str:
    return " ".join(code[i:i + 4] for i in range(0, len(code), 4))


def password(rng: random.Random) -> str:
    """A password as people choose them: a word with digits and a symbol, or a random string."""
    words = ["Sunflower", "mango", "Tiger", "dragon", "Lisboa", "violeta", "Kaffee", "soleil", "Moscow",
             "river", "Panda", "cricket", "orion", "Falcon", "zebra", "Nadia", "harbor", "Pistache"]
    style = rng.randrange(4)
    if style == 0:
        return rng.choice(words) + rng.choice("!@#$%&*?") + str(rng.randrange(10, 9999))
    if style == 1:
        return chars(rng, ALNUM + "!@#$%&*", rng.randrange(10, 16))
    if style == 2:
        return f"{rng.choice(words).lower()}-{rng.choice(words).lower()}-{rng.randrange(10, 99)}"
    return rng.choice(words).lower() + str(rng.randrange(1970, 2025))


def pin(rng: random.Random, n: int = 4) -> str:
    while True:
        p = "".join(rng.choice(string.digits) for _ in range(n))
        if len(set(p)) > 1:
            return p


def seed_phrase(rng: random.Random, words: int = 12) -> str:
    """A BIP-39 phrase with a valid checksum, from the real English list."""
    entropy = bytes(rng.randrange(256) for _ in range(words * 4 // 3))
    return Mnemonic("english").to_mnemonic(entropy)


def b64(rng: random.Random, n_bytes: int, *, url: bool = False, pad: bool = True) -> str:
    raw = bytes(rng.randrange(256) for _ in range(n_bytes))
    s = (base64.urlsafe_b64encode if url else base64.b64encode)(raw).decode()
    return s if pad else s.rstrip("=")


def b64url_json(obj: str) -> str:
    return base64.urlsafe_b64encode(obj.encode()).decode().rstrip("=")


def jwt(rng: random.Random) -> str:
    header = b64url_json('{"alg":"HS256","typ":"JWT"}')
    payload = b64url_json('{"sub":"%d","name":"user%d","iat":%d}' % (rng.randrange(10**6), rng.randrange(999),
                                                                        1_700_000_000 + rng.randrange(10**7)))
    return f"{header}.{payload}.{b64(rng, 32, url=True, pad=False)}"


def ssn(rng: random.Random) -> str:
    while True:
        a, g, s = rng.randrange(1, 900), rng.randrange(1, 100), rng.randrange(1, 10000)
        if a != 666:
            return f"{a:03d}-{g:02d}-{s:04d}"


def cpf(rng: random.Random) -> str:
    digits = [rng.randrange(10) for _ in range(9)]
    for n in (10, 11):
        total = sum(d * w for d, w in zip(digits, range(n, 1, -1)))
        digits.append((total * 10) % 11 % 10)
    s = "".join(map(str, digits))
    return f"{s[:3]}.{s[3:6]}.{s[6:9]}-{s[9:]}"


_D = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5], [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
    [3, 4, 0, 1, 2, 8, 9, 5, 6, 7], [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3], [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
]
_P = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4]]
for _i in range(2, 8):
    _P.append([_P[1][_P[_i - 1][j]] for j in range(10)])
_INV = [0, 4, 3, 2, 1, 5, 6, 7, 8, 9]


def aadhaar(rng: random.Random) -> str:
    """12 digits, first 2-9, last one the Verhoeff check digit."""
    body = str(rng.randrange(2, 10)) + "".join(rng.choice(string.digits) for _ in range(10))
    c = 0
    for i, ch in enumerate(reversed(body)):
        c = _D[c][_P[(i + 1) % 8][int(ch)]]
    full = body + str(_INV[c])
    return f"{full[:4]} {full[4:8]} {full[8:]}"


def china_id(rng: random.Random) -> str:
    """18 characters: region, birth date, sequence, ISO 7064 mod 11-2 check character."""
    body = f"{rng.choice(['110101', '310104', '440305', '510107'])}{rng.randrange(1960, 2005)}" \
           f"{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}{rng.randrange(1000):03d}"
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    return body + "10X98765432"[sum(int(c) * w for c, w in zip(body, weights)) % 11]


def dni(rng: random.Random) -> str:
    n = rng.randrange(10**7, 10**8)
    return f"{n}{'TRWAGMYFPDXBNJZSQVHLCKE'[n % 23]}"


def uk_nino(rng: random.Random) -> str:
    first = rng.choice("ABCEGHJKLMNOPRSTWXYZ")
    second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    if first + second in {"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"}:
        first, second = "J", "G"
    d = "".join(rng.choice(string.digits) for _ in range(6))
    return f"{first}{second} {d[:2]} {d[2:4]} {d[4:]} {rng.choice('ABCD')}"


# --- the secrets ----------------------------------------------------------------------

Maker = Callable[[random.Random], list[tuple[str, str]]]


def _fill(templates: list[str], value: Callable[[random.Random], str]) -> Maker:
    """One entry per template, each with a fresh value put where ``{}`` is."""

    def make(rng: random.Random) -> list[tuple[str, str]]:
        out = []
        for t in templates:
            v = value(rng)
            out.append((t.replace("{}", v), v))
        return out

    return make


_PW = password
_P4 = lambda rng: pin(rng, 4)  # noqa: E731
_P6 = lambda rng: pin(rng, 6)  # noqa: E731

_MAKERS: dict[str, Maker] = {
    # passwords, English, in prose and config
    "password_en": _fill([
        "my password is {} btw",
        "Password: {}",
        "The password for my laptop is {}, please remember it.",
        "New login for the portal — username jsmith, password {}",
        "Use {} as the password for the staging box.",
        "my email password is {} if you need to check the inbox",
    ], _PW),
    "password_short_forms": _fill([
        "pwd: {}",
        "pass: {}",
        "login admin / {}",
        "user: root pw: {}",
        "creds are admin/{} for the router",
        "PASSWD={}",
    ], _PW),
    "password_reversed": _fill([
        "I use {} as my password everywhere, I know it's bad",
        "{} is my password for the bank app",
        "{} is the wifi password at the cabin",
    ], _PW),
    "password_wifi": _fill([
        "The wifi password at home is {}",
        "WiFi: HomeNet-5G, key {}",
        "guest wi-fi pass is {}",
        "SSID CoffeeBar, WPA2 passphrase: {}",
    ], _PW),
    "password_zh": _fill([
        "我的密码是{}，别告诉别人",
        "WiFi密码：{}",
        "邮箱的登录密码是 {}",
        "服务器口令：{}",
    ], _PW),
    "password_hi": _fill([
        "मेरा पासवर्ड {} है",
        "पासवर्ड: {}",
        "वाईफाई का पासवर्ड {} है",
    ], _PW),
    "password_es": _fill([
        "mi contraseña es {}",
        "Contraseña: {}",
        "la clave del wifi es {}",
        "te paso la contraseña del correo: {}",
    ], _PW),
    "password_fr": _fill([
        "mon mot de passe est {}",
        "Mot de passe : {}",
        "le mot de passe du wifi c'est {}",
        "mdp: {}",
    ], _PW),
    "password_ar": _fill([
        "كلمة المرور الخاصة بي هي {}",
        "كلمة السر: {}",
        "كلمة مرور الواي فاي {}",
    ], _PW),
    "password_bn": _fill([
        "আমার পাসওয়ার্ড হলো {}",
        "পাসওয়ার্ড: {}",
        "ওয়াইফাই পাসওয়ার্ড {}",
    ], _PW),
    "password_pt": _fill([
        "minha senha é {}",
        "Senha: {}",
        "a senha do wifi é {}",
        "a palavra-passe do email é {}",
    ], _PW),
    "password_ru": _fill([
        "мой пароль {}",
        "Пароль: {}",
        "пароль от вайфая {}",
        "логин ivan, пароль {}",
    ], _PW),
    "password_ur": _fill([
        "میرا پاس ورڈ {} ہے",
        "پاس ورڈ: {}",
        "وائی فائی کا پاس ورڈ {} ہے",
    ], _PW),
    "password_de": _fill([
        "mein Passwort ist {}",
        "Kennwort: {}",
        "das WLAN-Passwort lautet {}",
    ], _PW),
    "password_ja": _fill([
        "パスワードは{}です",
        "パスワード：{}",
        "Wi-Fiのパスワードは {} だよ",
    ], _PW),
    "password_it": _fill([
        "la mia password è {}",
        "la parola d'ordine è {}",
        "password del wifi: {}",
    ], _PW),
    "password_id": _fill([
        "kata sandi saya {}",
        "sandi wifi: {}",
        "password email saya adalah {}",
    ], _PW),
    "password_tr": _fill([
        "şifrem {}",
        "Parola: {}",
        "wifi şifresi {}",
    ], _PW),
    "password_ko": _fill([
        "내 비밀번호는 {}입니다",
        "비밀번호: {}",
        "와이파이 비번 {}",
    ], _PW),
    # PINs, door codes and combinations
    "pin_en": _fill([
        "my PIN is {}",
        "card PIN {}",
        "the SIM pin code is {}",
        "ATM pin: {}",
    ], _P4),
    "pin_intl": _fill([
        "mi PIN es {}",
        "mon code PIN est {}",
        "meine PIN ist {}",
        "minha senha do cartão é {}",
        "пин-код {}",
        "银行卡密码是{}",
        "暗証番号は{}です",
        "PIN saya {}",
        "kart şifrem {}",
        "मेरा पिन {} है",
        "الرقم السري {}",
        "카드 비밀번호 {}",
    ], _P4),
    "door_code": _fill([
        "the door code is {}",
        "gate code: {}#",
        "alarm code is {}, disarm within 30 seconds",
        "the lockbox combination is {}",
        "le digicode est {}",
        "el código de la puerta es {}",
        "código do portão: {}",
        "код от домофона {}",
        "Türcode {}",
        "门禁密码 {}",
        "il codice del cancello è {}",
    ], _P4),
    "pin_six": _fill([
        "my phone passcode is {}",
        "the banking app PIN is {}",
        "支付密码 {}",
    ], _P6),
    # recovery material
    "seed_phrase_12": _fill([
        "my wallet seed: {}",
        "recovery phrase — {}",
        "{}",
    ], seed_phrase),
    "seed_phrase_24": _fill([
        "Ledger backup words: {}",
        "助记词 {}",
    ], lambda rng: seed_phrase(rng, 24)),
    "backup_codes_digits": _fill([
        "Google backup codes: {}",
        "my 2FA recovery codes are {}",
        "códigos de respaldo: {}",
    ], lambda rng: " ".join(f"{pin(rng, 4)} {pin(rng, 4)}" for _ in range(5))),
    "backup_codes_github": _fill([
        "GitHub recovery codes:\n{}",
        "save these 2fa backup codes: {}",
    ], lambda rng: "\n".join(f"{chars(rng, HEX, 5)}-{chars(rng, HEX, 5)}" for _ in range(6))),
    "totp_secret": _fill([
        "the TOTP secret is {}",
        "2FA setup key: {}",
        "authenticator secret {} (time based)",
    ], lambda rng: chars(rng, BASE32, 32)),
    "totp_uri": _fill([
        "scan otpauth://totp/Acme:me@example.com?secret={}&issuer=Acme",
    ], lambda rng: chars(rng, BASE32, 16)),
    "bitlocker_recovery_key": _fill([
        "BitLocker recovery key: {}",
        "recovery key for the laptop is {}",
    ], lambda rng: "-".join(f"{rng.randrange(0, 720896) // 11 * 11:06d}" for _ in range(8))),
    "onepassword_secret_key": _fill([
        "1Password secret key A3-{}",
    ], lambda rng: "-".join(chars(rng, UPPER_ALNUM, n) for n in (6, 6, 5, 5, 5, 5))),
    "app_password": _fill([
        "Gmail app password: {}",
        "the app-specific password is {}",
    ], lambda rng: " ".join(chars(rng, string.ascii_lowercase, 4) for _ in range(4))),
    # cloud
    "aws_access_key_id": _fill([
        "AWS access key id {}",
        "aws_access_key_id = {}",
        "the key {} belongs to the deploy user",
    ], lambda rng: "AK" + "IA" + chars(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
    "aws_secret_key": _fill([
        "aws_secret_access_key = {}",
        "my Amazon secret key is {}",
        "AWS_SECRET_ACCESS_KEY={}",
        "amazon secret: {}",
    ], lambda rng: chars(rng, ALNUM + "/+", 40)),
    "azure_storage_connection": _fill([
        "DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={};EndpointSuffix=core.windows.net",
        "storage conn string: AccountName=logs01;AccountKey={}",
    ], lambda rng: b64(rng, 64)),
    "azure_service_bus": _fill([
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey={}",
    ], lambda rng: b64(rng, 32)),
    "azure_sas": _fill([
        "SharedAccessSignature=sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2026-12-01T00:00:00Z&sig={}",
        "blob url https://acme.blob.core.windows.net/c/f.csv?sp=r&st=2026-01-01&sv=2022-11-02&sr=b&sig={}",
    ], lambda rng: b64(rng, 32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")),
    "azure_client_secret": _fill([
        "azure client secret: {}",
        "AZURE_CLIENT_SECRET={}",
    ], lambda rng: chars(rng, ALNUM, 3) + "8Q~" + chars(rng, ALNUM + "_.-~", 31)),
    "gcp_api_key": _fill([
        "Maps key {}",
        "firebase apiKey: \"{}\"",
    ], lambda rng: "AI" + "za" + chars(rng, ALNUM + "_-", 35)),
    "gcp_oauth_client_secret": _fill([
        "client_secret: {}",
        "Google OAuth secret {}",
    ], lambda rng: "GOC" + "SPX-" + chars(rng, ALNUM + "_-", 28)),
    "digitalocean_token": _fill([
        "DO token {}",
        "doctl auth init -t {}",
    ], lambda rng: "dop" + "_v1_" + chars(rng, HEX, 64)),
    "cloudflare_token": _fill([
        "Cloudflare API token: {}",
        "CF_API_TOKEN={}",
    ], lambda rng: chars(rng, ALNUM + "_-", 40)),
    "heroku_api_key": _fill([
        "HEROKU_API_KEY={}",
        "my heroku api key is {}",
    ], lambda rng: "-".join(chars(rng, HEX, n) for n in (8, 4, 4, 4, 12))),
    "vault_token": _fill([
        "VAULT_TOKEN={}",
        "vault login {}",
    ], lambda rng: "hv" + "s." + chars(rng, ALNUM + "_-", 90)),
    "tailscale_key": _fill([
        "tailscale up --authkey {}",
    ], lambda rng: "tsk" + "ey-auth-" + chars(rng, ALNUM, 17) + "-" + chars(rng, ALNUM, 33)),
    # code hosting and package registries
    "github_pat_classic": _fill([
        "use {} for the CI",
        "GITHUB_TOKEN={}",
        "here's my github token {}",
    ], lambda rng: "gh" + "p_" + chars(rng, ALNUM, 36)),
    "github_pat_fine_grained": _fill([
        "fine-grained token {}",
    ], lambda rng: "github" + "_pat_" + chars(rng, ALNUM, 22) + "_" + chars(rng, ALNUM, 59)),
    "gitlab_pat": _fill([
        "gitlab token: {}",
        "git clone https://oauth2:{}@gitlab.com/acme/app.git",
    ], lambda rng: "gl" + "pat-" + chars(rng, ALNUM + "_-", 20)),
    "npm_token": _fill([
        "//registry.npmjs.org/:_authToken={}",
        "npm publish token {}",
    ], lambda rng: "np" + "m_" + chars(rng, ALNUM, 36)),
    "pypi_token": _fill([
        "password = {}",
        "twine upload -p {}",
    ], lambda rng: "py" + "pi-AgEIcHlwaS5vcmc" + chars(rng, ALNUM + "_-", 70)),
    # AI and model hubs
    "openai_key": _fill([
        "OPENAI_API_KEY={}",
        "my openai key is {}",
        "sure, try {} for the demo",
    ], lambda rng: "sk" + "-proj-" + chars(rng, ALNUM + "_-", 64)),
    "anthropic_key": _fill([
        "ANTHROPIC_API_KEY={}",
        "claude key {}",
    ], lambda rng: "sk" + "-ant-api03-" + chars(rng, ALNUM + "_-", 93) + "AA"),
    "huggingface_token": _fill([
        "HF token {}",
        "huggingface-cli login --token {}",
        "my hugging face token is {}",
    ], lambda rng: "h" + "f_" + chars(rng, string.ascii_letters, 34)),
    "groq_key": _fill([
        "GROQ_API_KEY={}",
    ], lambda rng: "gs" + "k_" + chars(rng, ALNUM, 52)),
    "replicate_token": _fill([
        "REPLICATE_API_TOKEN={}",
    ], lambda rng: "r" + "8_" + chars(rng, ALNUM, 37)),
    "perplexity_key": _fill([
        "perplexity key {}",
    ], lambda rng: "pp" + "lx-" + chars(rng, ALNUM, 48)),
    "mistral_key": _fill([
        "the Mistral API key is {}",
        "MISTRAL_API_KEY={}",
    ], lambda rng: chars(rng, ALNUM, 32)),
    "cohere_key": _fill([
        "cohere api key: {}",
    ], lambda rng: chars(rng, ALNUM, 40)),
    # payments
    "stripe_secret_key": _fill([
        "stripe key {}",
        "STRIPE_SECRET_KEY={}",
    ], lambda rng: "sk" + "_live_" + chars(rng, ALNUM, 99)),
    "stripe_restricted_key": _fill([
        "restricted key {}",
    ], lambda rng: "rk" + "_live_" + chars(rng, ALNUM, 99)),
    "stripe_webhook_secret": _fill([
        "STRIPE_WEBHOOK_SECRET={}",
        "signing secret {}",
    ], lambda rng: "wh" + "sec_" + chars(rng, ALNUM, 32)),
    "square_token": _fill([
        "square access token {}",
    ], lambda rng: "EA" + "AA" + chars(rng, ALNUM + "_-", 60)),
    "shopify_token": _fill([
        "shopify admin token {}",
    ], lambda rng: "shp" + "at_" + chars(rng, HEX, 32)),
    # messaging and chat
    "slack_bot_token": _fill([
        "SLACK_BOT_TOKEN={}",
        "slack token {}",
    ], lambda rng: "xo" + "xb-" + f"{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-"
               + chars(rng, ALNUM, 24)),
    "slack_webhook": _fill([
        "post alerts to {}",
        "SLACK_WEBHOOK_URL={}",
    ], lambda rng: "https://hooks.slack.com/services/T" + chars(rng, UPPER_ALNUM, 8) + "/B"
               + chars(rng, UPPER_ALNUM, 10) + "/" + chars(rng, ALNUM, 24)),
    "discord_webhook": _fill([
        "the discord webhook is {}",
        "send build results to {}",
    ], lambda rng: f"https://discord.com/api/webhooks/{rng.randrange(10**17, 10**18)}/"
               + chars(rng, ALNUM + "_-", 68)),
    "discord_bot_token": _fill([
        "DISCORD_TOKEN={}",
        "my discord bot token: {}",
    ], lambda rng: base64.b64encode(str(rng.randrange(10**17, 10**18)).encode()).decode().rstrip("=")
               + "." + chars(rng, ALNUM + "_-", 6) + "." + chars(rng, ALNUM + "_-", 38)),
    "telegram_bot_token": _fill([
        "bot token {}",
        "TELEGRAM_BOT_TOKEN={}",
        "BotFather gave me {}",
    ], lambda rng: f"{rng.randrange(10**8, 10**10)}:AA" + chars(rng, ALNUM + "_-", 33)),
    "twilio_account_sid": _fill([
        "Twilio account SID {}",
    ], lambda rng: "A" + "C" + chars(rng, HEX, 32)),
    "twilio_auth_token": _fill([
        "twilio auth token {}",
        "TWILIO_AUTH_TOKEN={}",
    ], lambda rng: chars(rng, HEX, 32)),
    "twilio_api_key": _fill([
        "twilio api key {}",
    ], lambda rng: "S" + "K" + chars(rng, HEX, 32)),
    "sendgrid_key": _fill([
        "SENDGRID_API_KEY={}",
        "sendgrid key {}",
    ], lambda rng: "S" + "G." + chars(rng, ALNUM + "_-", 22) + "." + chars(rng, ALNUM + "_-", 43)),
    "mailgun_key": _fill([
        "mailgun api key {}",
        "MAILGUN_API_KEY={}",
    ], lambda rng: "ke" + "y-" + chars(rng, HEX, 32)),
    "mailchimp_key": _fill([
        "mailchimp key {}",
        "MAILCHIMP_API_KEY={}",
    ], lambda rng: chars(rng, HEX, 32) + "-us" + str(rng.randrange(1, 21))),
    "postmark_token": _fill([
        "X-Postmark-Server-Token: {}",
    ], lambda rng: "-".join(chars(rng, HEX, n) for n in (8, 4, 4, 4, 12))),
    # productivity, observability
    "notion_token": _fill([
        "notion integration secret {}",
        "NOTION_TOKEN={}",
    ], lambda rng: "sec" + "ret_" + chars(rng, ALNUM, 43)),
    "notion_token_new": _fill([
        "notion key {}",
    ], lambda rng: "nt" + "n_" + "".join(rng.choice(string.digits) for _ in range(11)) + chars(rng, ALNUM, 35)),
    "linear_key": _fill([
        "LINEAR_API_KEY={}",
    ], lambda rng: "lin" + "_api_" + chars(rng, ALNUM, 40)),
    "atlassian_token": _fill([
        "jira api token {}",
    ], lambda rng: "ATA" + "TT3xFfGF0" + chars(rng, ALNUM + "_-", 180) + "=" + chars(rng, HEX.upper(), 8)),
    "datadog_key": _fill([
        "DD_API_KEY={}",
        "datadog api key: {}",
    ], lambda rng: chars(rng, HEX, 32)),
    "grafana_token": _fill([
        "grafana service account token {}",
    ], lambda rng: "gl" + "sa_" + chars(rng, ALNUM, 32) + "_" + chars(rng, HEX, 8)),
    "newrelic_key": _fill([
        "NEW_RELIC_API_KEY={}",
    ], lambda rng: "NR" + "AK-" + chars(rng, UPPER_ALNUM, 27)),
    "postman_key": _fill([
        "postman api key {}",
    ], lambda rng: "PM" + "AK-" + chars(rng, HEX, 24) + "-" + chars(rng, HEX, 34)),
    "doppler_token": _fill([
        "DOPPLER_TOKEN={}",
    ], lambda rng: "dp" + ".pt." + chars(rng, ALNUM, 43)),
    "facebook_token": _fill([
        "facebook page access token {}",
    ], lambda rng: "EA" + "AB" + chars(rng, ALNUM, 150)),
    # generic credentials
    "generic_api_key": _fill([
        "api_key = \"{}\"",
        "X-API-Key: {}",
        "the api key for the weather service is {}",
        "apikey={}",
    ], lambda rng: chars(rng, ALNUM, 32)),
    "generic_secret_env": _fill([
        "DJANGO_SECRET_KEY={}",
        "JWT_SECRET={}",
        "SESSION_SECRET: {}",
        "app secret: {}",
    ], lambda rng: chars(rng, ALNUM + "!@#%^&*(-_=+)", 48)),
    "generic_client_secret": _fill([
        "client_secret={}",
        "OAUTH_CLIENT_SECRET=\"{}\"",
    ], lambda rng: chars(rng, ALNUM + "_-", 40)),
    "bearer_lowercase": _fill([
        "authorization: bearer {}",
        "curl -H 'authorization: bearer {}' https://api.example.com",
        "bearer {}",
    ], lambda rng: chars(rng, ALNUM + "_-.", 40)),
    "basic_auth": _fill([
        "Authorization: Basic {}",
        "curl -H \"authorization: basic {}\" https://api.example.com",
    ], lambda rng: base64.b64encode(f"user{rng.randrange(99)}:{password(rng)}".encode()).decode()),
    "jwt": _fill([
        "session cookie {}",
        "Authorization: Bearer {}",
        "id_token={}",
    ], jwt),
    # keys
    "pem_private_key": _fill([
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
        "here is the key:\n-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----\n{}\n-----END EC PRIVATE KEY-----",
    ], lambda rng: "MII" + b64(rng, 600)[:61]),
    "openssh_private_key": _fill([
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----",
    ], lambda rng: "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAA" + b64(rng, 300)[:60]),
    "private_key_body": _fill([
        "key (without header): {}",
        "the server key body is {}",
    ], lambda rng: "MIIEv" + "QIBADANBgkqhkiG9w0BAQEFAASC" + b64(rng, 900)[:400]),
    "wireguard_private_key": _fill([
        "[Interface]\nPrivateKey = {}\nAddress = 10.0.0.2/32",
        "my wireguard private key is {}",
    ], lambda rng: b64(rng, 32)),
    "age_secret_key": _fill([
        "age key: {}",
        "{}",
    ], lambda rng: "AGE-SECRET" + "-KEY-1" + chars(rng, BECH32.upper(), 58)),
    "ethereum_private_key": _fill([
        "my ethereum private key is 0x{}",
        "metamask private key: {}",
        "PRIVATE_KEY=0x{}",
    ], lambda rng: chars(rng, HEX, 64)),
    "bitcoin_wif": _fill([
        "bitcoin private key (WIF) {}",
        "import {} into electrum",
    ], lambda rng: rng.choice("KL") + chars(rng, BASE58, 51)),
    "ssh_password_host": _fill([
        "sshpass -p '{}' ssh deploy@10.0.0.5",
    ], _PW),
    # URLs with credentials
    "database_url": _fill([
        "DATABASE_URL=postgres://app:{}@db.internal:5432/app",
        "mysql://root:{}@127.0.0.1:3306/shop",
        "REDIS_URL=redis://default:{}@cache.example.net:6379",
        "mongodb+srv://admin:{}@cluster0.abcd.mongodb.net/test",
    ], lambda rng: chars(rng, ALNUM, 14)),
    "url_with_password": _fill([
        "fetch https://bob:{}@files.example.com/report.pdf",
        "proxy http://:{}@proxy.corp:3128",
        "ftp://anonymous:{}@ftp.example.org/pub",
        "https://:{}@git.example.com/repo.git",
    ], lambda rng: chars(rng, ALNUM, 12)),
    # payment cards
    "card_visa": _fill([
        "my card number is {}",
        "Visa {} exp 08/28",
        "pay with {}",
        "número de tarjeta {}",
        "numéro de carte {}",
        "银行卡号 {}",
        "Kartennummer: {}",
    ], lambda rng: group(card_number(rng, "4"), (4, 4, 4, 4), rng.choice([" ", "-", ""]))),
    "card_mastercard": _fill([
        "Mastercard {}",
        "card: {} cvv 123",
        "número do cartão {}",
        "номер карты {}",
    ], lambda rng: group(card_number(rng, rng.choice(["51", "53", "55", "2221", "2720"])), (4, 4, 4, 4),
                         rng.choice([" ", ""]))),
    "card_amex": _fill([
        "amex {}",
        "my AmEx is {}",
    ], lambda rng: group(card_number(rng, rng.choice(["34", "37"]), 15), (4, 6, 5))),
    "card_other": _fill([
        "Discover card {}",
        "JCB カード番号 {}",
        "rupay card {}",
        "carta di credito {}",
    ], lambda rng: card_number(rng, rng.choice(["6011", "3528", "6521", "65"]))),
    "card_cvv": _fill([
        "CVV: {}",
        "the security code on the back is {}",
        "CVC {}",
    ], lambda rng: pin(rng, 3)),
    # bank accounts
    "iban": _fill([
        "salary goes to {}",
        "IBAN: {}",
        "mi IBAN es {}",
        "virement sur {}",
    ], lambda rng: iban_grouped(iban(rng, *rng.choice([("DE", 18), ("FR", 23), ("ES", 20), ("IT", 23)])))),
    "iban_compact": _fill([
        "transfer to {}",
        "Kontonummer {}",
    ], lambda rng: iban(rng, "GB", 18, letters=4)),
    "iban_lowercase": _fill([
        "my iban is {}",
        "iban {}",
    ], lambda rng: iban(rng, "NL", 14, letters=4).lower()),
    "bank_account_routing": _fill([
        "routing 021000021 account number {}",
        "my bank account number is {}",
    ], lambda rng: "".join(rng.choice(string.digits) for _ in range(10))),
    # national ids
    "ssn": _fill([
        "my SSN is {}",
        "social security number: {}",
        "SSN {}",
    ], ssn),
    "ssn_compact": _fill([
        "ssn {}",
        "my social security number is {}",
    ], lambda rng: ssn(rng).replace("-", "")),
    "uk_nino": _fill([
        "NI number {}",
        "national insurance: {}",
    ], uk_nino),
    "spanish_dni": _fill([
        "DNI {}",
        "mi DNI es {}",
    ], dni),
    "brazil_cpf": _fill([
        "meu CPF é {}",
        "CPF: {}",
    ], cpf),
    "india_aadhaar": _fill([
        "my Aadhaar number is {}",
        "आधार नंबर {}",
    ], aadhaar),
    "china_resident_id": _fill([
        "身份证号 {}",
        "我的身份证号码是{}",
    ], china_id),
    "passport_number": _fill([
        "my passport number is {}",
        "numéro de passeport : {}",
    ], lambda rng: rng.choice(string.ascii_uppercase) + "".join(rng.choice(string.digits) for _ in range(8))),
    # issue 28: multi-line secrets in the encodings people paste them in
    "private_key_json_escaped": lambda rng: [pem_in_json(rng, nl) for nl in ("\n", "\r\n")],
    "private_key_base64": lambda rng: [pem_in_base64(rng, wrap) for wrap in (0, 76)],
    # issue 28: the account number beside a routing number or a sort code is the secret, not the code
    "bank_account_beside_routing": _fill([
        "Wire to routing number 021000021, account number {}.",
        "Routing: 021000021\nAccount: {}",
        "ACH details: ABA 011000015 acct {}",
        "account {} / routing 021000021",
    ], lambda rng: "".join(rng.choice(string.digits) for _ in range(rng.randrange(8, 13)))),
    "bank_account_beside_sort_code": _fill([
        "Pay into 60-16-13 {} please",
        "sort code 40-47-84, account {}",
        "Bank: Barclays, 20-32-06 {}",
    ], lambda rng: _digits(rng, 8)),
    # issue 28: credential words in their definite, plural and case forms
    "password_inflected": _fill([
        "Die Passwörter sind {} und noch eins",
        "das Passworts lautet {}",
        "lösenordet är {}",
        "passordet er {}",
        "adgangskoden er {}",
        "de wachtwoorden zijn {}",
        "las contraseñas son {}",
        "les mots de passe : {}",
        "le password sono {}",
        "as senhas são {}",
        "hasła: {}",
        "zaloguj się hasłem {}",
        "salasanan on {}",
        "salasanat: {}",
        "şifreniz: {}",
        "kata sandinya {}",
        "пароли: {}",
        "heslá sú {}",
    ], _PW),
    # issue 28: an e-mail address and a password with no word for the password
    "password_after_login_email": _fill([
        "login: bob@example.com {}",
        "bob@example.com:{}",
        "Sign in with anna.k@corp.io / {}",
    ], lambda rng: rng.choice(["Tr0ub4dor&", "Kestrel$", "Blue#Sky"]) + str(rng.randrange(10, 99))),
}


def pem_in_json(rng: random.Random, newline: str) -> tuple[str, str]:
    """A service-account key file: the PEM key is a JSON string, its line breaks escaped."""
    body = b64(rng, 600)
    pem = "-----BEGIN " + "PRIVATE KEY-----" + newline + newline.join(
        body[i:i + 64] for i in range(0, len(body), 64)) + newline + "-----END PRIVATE KEY-----" + newline
    escaped = json.dumps(pem)[1:-1]
    text = ('{\n  "type": "service_account",\n  "project_id": "demo-123",\n  "private_key": "' + escaped
            + '",\n  "client_email": "bot@demo-123.iam.gserviceaccount.com"\n}')
    return text, escaped[:escaped.rindex("-----") + 5]  # BEGIN to END, line breaks as escapes


def pem_in_base64(rng: random.Random, wrap: int) -> tuple[str, str]:
    """A key file encoded once more in base64, as a Kubernetes secret holds it, maybe wrapped."""
    body = b64(rng, 300)
    pem = "-----BEGIN RSA " + "PRIVATE KEY-----\n" + "\n".join(
        body[i:i + 64] for i in range(0, len(body), 64)) + "\n-----END RSA PRIVATE KEY-----\n"
    encoded = base64.b64encode(pem.encode()).decode()
    if wrap:
        encoded = "\n".join(encoded[i:i + wrap] for i in range(0, len(encoded), wrap))
        return f"tls.key: |\n{encoded}\ntls.crt: none", encoded
    return f"data:\n  tls.key: {encoded}\n  tls.crt: none", encoded


# Written by hand, in other words than the generated ones: a check that the detector reads
# sentences and not only the templates above.
_FIXED_SECRETS: list[Secret] = [
    Secret('pw', 'btw the password to the shared drive is Quartz#2291', 'Quartz#2291'),
    Secret('pw', 'Login details: email anna@corp.io, password: BlueSky77!', 'BlueSky77!'),
    Secret('pw', 'my netflix pw is wolf-moon-88', 'wolf-moon-88'),
    Secret('pw', 'password=Hx9!kq2Lz', 'Hx9!kq2Lz'),
    Secret('pw', 'pwd = trombone44', 'trombone44'),
    Secret('pw', 'Pass: Kestrel$19', 'Kestrel$19'),
    Secret('pw', 'ssh root@10.1.2.3 with password toor1234', 'toor1234'),
    Secret('pw', 'I set Marigold!23 as the router password', 'Marigold!23'),
    Secret('pw', 'the admin login is admin / Zeppelin#5', 'Zeppelin#5'),
    Secret('pw', 'superuser: postgres / pgAdm1n!', 'pgAdm1n!'),
    Secret('pw', 'Mein Passwort für das Firmenkonto ist Schnee2023!', 'Schnee2023!'),
    Secret('pw', 'Mot de passe du compte: Girafe#88', 'Girafe#88'),
    Secret('pw', 'La contraseña de mi cuenta es Pimienta_71', 'Pimienta_71'),
    Secret('pw', 'A minha senha do banco é Cacau#4412', 'Cacau#4412'),
    Secret('pw', 'Пароль от почты: Medved2020!', 'Medved2020!'),
    Secret('pw', '邮箱密码 Hello@2024', 'Hello@2024'),
    Secret('pw', '我的WiFi密码是 tplink8888', 'tplink8888'),
    Secret('pw', 'パスワード: Sakura_2024', 'Sakura_2024'),
    Secret('pw', '제 비밀번호는 Kimchi!77 입니다', 'Kimchi!77'),
    Secret('pw', 'मेरा ईमेल पासवर्ड Delhi@123 है', 'Delhi@123'),
    Secret('pw', 'আমার ইমেইলের পাসওয়ার্ড Dhaka#2020', 'Dhaka#2020'),
    Secret('pw', 'کلمه عبور: Tehran@99', 'Tehran@99'),
    Secret('pw', 'كلمة المرور هي Cairo$2021', 'Cairo$2021'),
    Secret('pw', 'میرا ای میل پاس ورڈ Lahore#786 ہے', 'Lahore#786'),
    Secret('pw', 'Şifre: Ankara06!', 'Ankara06!'),
    Secret('pw', 'Kata sandi akun saya Jakarta#45', 'Jakarta#45'),
    Secret('pw', 'la password del wifi è Pizza!2020', 'Pizza!2020'),
    Secret('pw', 'wachtwoord: Tulp2021!', 'Tulp2021!'),
    Secret('pw', 'hasło do konta: Krakow#77', 'Krakow#77'),
    Secret('pin', 'PIN: 7391', '7391'),
    Secret('pin', 'the pin for my debit card is 4826', '4826'),
    Secret('pin', 'Mi PIN de la tarjeta: 5810', '5810'),
    Secret('pin', 'Code PIN 2741', '2741'),
    Secret('pin', 'ПИН 9034', '9034'),
    Secret('pin', 'keypad code 58213', '58213'),
    Secret('pin', 'the garage code is 1990#', '1990#'),
    Secret('pin', 'safe combination: 36-24-12', '36-24-12'),
    Secret('seed', 'backup phrase: abandon ability able about above absent absorb abstract absurd abuse access accident', 'abandon ability able about above absent absorb abstract absurd abuse access accident'),
    Secret('seed', '12 words: zoo wrong wrist write world worth wrap wreck wrestle wrong yard year', 'zoo wrong wrist write world worth wrap wreck wrestle wrong yard year'),
    Secret('codes', 'Your backup codes: 1234-5678 2345-6789 3456-7890 4567-8901', '1234-5678 2345-6789 3456-7890 4567-8901'),
    Secret('codes', 'recovery codes 8f3k2-9d8s1 7c6x5-4v3b2 1n2m3-4k5j6', '8f3k2-9d8s1 7c6x5-4v3b2 1n2m3-4k5j6'),
    Secret('totp', '2FA secret: JBSWY3DPEHPK3PXP', 'JBSWY3DPEHPK3PXP'),
    Secret('totp', 'authenticator key: gezd gnbv gy3t qojq gezd gnbv gy3t qojq', 'gezd gnbv gy3t qojq gezd gnbv gy3t qojq'),
    Secret('tg', 'telegram bot: 701234' + '5678:AAF3kPq9xZ_wV2mN8bT4rY6uJ1hL5cD0eGs', '701234' + '5678:AAF3kPq9xZ_wV2mN8bT4rY6uJ1hL5cD0eGs'),
    Secret('hf', 'hugging face: h' + 'f_aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH', 'h' + 'f_aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH'),
    Secret('slackhook', 'webhook https://hooks.sl' + 'ack.com/services/T024BE7LD/B08ABCDEF12/xYz123AbC456dEf789GhI012', 'https://hooks.sl' + 'ack.com/services/T024BE7LD/B08ABCDEF12/xYz123AbC456dEf789GhI012'),
    Secret('sg', 'S' + 'G.ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr', 'S' + 'G.ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr'),
    Secret('twilio', 'Twilio SID AC1' + 'a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7 token 9f8e7d6c5b4a39281706f5e4d3c2b1a0', '9f8e7d6c5b4a39281706f5e4d3c2b1a0'),
    Secret('wg', 'Privat' + 'eKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=', 'yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk='),
    Secret('age', 'AGE-SECR' + 'ET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX', 'AGE-SECR' + 'ET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX'),
    Secret('eth', 'wallet private key 0x4' + 'c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318', '4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318'),
    Secret('basic', 'Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l', 'YWxhZGRpbjpvcGVuc2VzYW1l'),
    Secret('bearer', 'use header authorization: bearer 8f7d6s5a4q3w2e1r0t9y8u7i6o5p4a3s', '8f7d6s5a4q3w2e1r0t9y8u7i6o5p4a3s'),
    Secret('iban', 'iban: fr7630006000011234567890189', 'fr7630006000011234567890189'),
    Secret('ssn', 'SSN 078051120', '078051120'),
    Secret('ssn', 'social security no. 219-09-9999', '219-09-9999'),
    Secret('urlpw', 'clone https://:ghToken123@git.example.org/x.git', 'ghToken123'),
    Secret('aws', 'amazon secret access key wJalrX' + 'UtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY', 'wJalrX' + 'UtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY'),
    Secret('card', 'card: 5425 2334 3010 9903 exp 04/27', '5425 2334 3010 9903'),
    Secret('card', 'my visa is 4263982640269299', '4263982640269299'),
    Secret('card', 'charge 3714 496353 98431 please', '3714 496353 98431'),
    Secret('generic', 'the Pinecone API key is pc' + 'sk_2Xy7Zq_8KdLmNpQrStUvWxYz1234567890abcdEfGh', 'pc' + 'sk_2Xy7Zq_8KdLmNpQrStUvWxYz1234567890abcdEfGh'),
    Secret('generic', 'weaviate key: Qm9pZ2h0LWtleS0xMjM0NTY3ODkw', 'Qm9pZ2h0LWtleS0xMjM0NTY3ODkw'),
    Secret('generic', 'my ElevenLabs key 3f9c2a7e1b4d6f8a0c2e4b6d8f0a1c3e', '3f9c2a7e1b4d6f8a0c2e4b6d8f0a1c3e'),
    Secret('generic', "Here's the token for the staging API: 4Xk9pQ2rT7vW1yZ3bN6mC8dF0gH5jL", '4Xk9pQ2rT7vW1yZ3bN6mC8dF0gH5jL'),
    Secret('generic', "const apiKey = 'Zx81Lq0PaWe93NdKk2Vt7Rb4';", 'Zx81Lq0PaWe93NdKk2Vt7Rb4'),
    Secret('pem', '-----BEGIN ' + 'DSA PRIVATE KEY-----\nMIIBugIBAAKBgQCdummykeybody1234567890abcdefgh\n-----END DSA PRIVATE KEY-----', 'MIIBugIBAAKBgQCdummykeybody1234567890abcdefgh'),
    Secret('passport', 'passport no: X12345678', 'X12345678'),
    Secret('discordhook', 'https://discordapp' + '.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEfGhIjKlMnOpQrStUvWxYz01', 'https://discordapp' + '.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEfGhIjKlMnOpQrStUvWxYz01'),
    Secret('mailchimp', '0123456789abcdef0123456789abcdef-u' + 's21', '0123456789abcdef0123456789abcdef-u' + 's21'),
    Secret('door', 'entry code 4590', '4590'),
    Secret('door', 'codigo de acceso 9912', '9912'),
    Secret('pw', 'Netflix login: john@x.com / Pa55word!', 'Pa55word!'),
    Secret('pw', 'Mi clave de acceso es 4821', '4821'),
    Secret('pin', 'Die PIN lautet 4821', '4821'),
    Secret('pin', '支付宝密码123456', '123456'),
    Secret('pin', 'رقم التعريف الشخصي 4821', '4821'),
    Secret('pin', 'Geheimzahl: 4821', '4821'),
    Secret('pw', 'contraseña del wifi: girasol.', 'girasol'),
    Secret('pw', 'the wifi key is BlueFox77', 'BlueFox77'),
    Secret('pw', 'Password for the VPN - Vpn!2024', 'Vpn!2024'),
    Secret('codes', 'Recovery key: ABCD-EFGH-IJKL-MNOP-QRST-UVWX', 'ABCD-EFGH-IJKL-MNOP-QRST-UVWX'),
    Secret('pin', 'The combination to the safe is 12-34-56', '12-34-56'),
    Secret('generic', 'API key for OpenWeather: 8f7e6d5c4b3a29180716253443526170', '8f7e6d5c4b3a29180716253443526170'),
    # issue 28, written by hand after the fixes: other phrasings of the same four gaps
    Secret('bank28', 'Account: 73920418 Sort: 30-94-57', '73920418'),
    Secret('bank28', 'Checking account 123456789, routing 021000021', '123456789'),
    Secret('bank28', 'acct# 1234567890 / ABA 021000021', '1234567890'),
    Secret('bank28', 'Account No.: 1234 5678 9012, IFSC: HDFC0001234', '1234 5678 9012'),
    Secret('bank28', 'BSB 062-000 Acc 12345678', '12345678'),
    Secret('bank28', 'Routing/Account: 021000021 / 000123456789', '000123456789'),
    Secret('bank28', 'Direct deposit: RTN 021000021 ACCT 987654321001', '987654321001'),
    Secret('bank28', 'Please pay 20-45-77 / 41234567 ref INV-2024', '41234567'),
    Secret('bank28', 'UK bank: 60-16-13, 31926819', '31926819'),
    Secret('bank28', 'BIC COBADEFFXXX Konto 1234567890', '1234567890'),
    Secret('pw28', 'Unsere Passwörter: Sommer2024! (Server) und Winter!2023 (Backup)', 'Winter!2023'),
    Secret('pw28', 'Das neue Kennwörter-Set: Alpha#2024', 'Alpha#2024'),
    Secret('pw28', 'lösenorden är Sommar2024! och Vinter2023!', 'Vinter2023!'),
    Secret('pw28', 'Passordene: Fjell2024!, Hav2023!', 'Hav2023!'),
    Secret('pw28', 'Wachtwoorden: Tulp2021! en Roos2022!', 'Roos2022!'),
    Secret('pw28', 'Hasłem do serwera jest Krakow#77', 'Krakow#77'),
    Secret('pw28', 'Salasanani on Kissa2024!', 'Kissa2024!'),
    Secret('pw28', 'Le password del server sono Pizza!2020 e Pasta#2021', 'Pasta#2021'),
    Secret('pw28', 'Mis contraseñas: Pimienta_71 y Oregano_82', 'Oregano_82'),
    Secret('pw28', 'As senhas do wifi: Cacau#4412', 'Cacau#4412'),
    Secret('pw28', 'Пароли от серверов: Medved2020! и Volk2021!', 'Volk2021!'),
    Secret('pw28', 'Şifreleri: Ankara06! ve Izmir35!', 'Izmir35!'),
    Secret('pw28', 'Kata sandinya adalah Jakarta#45', 'Jakarta#45'),
    Secret('login28', 'joe.bloggs@gmail.com:Summer2024!', 'Summer2024!'),
    Secret('login28', 'Login → anna@firma.de / Geheim#2024', 'Geheim#2024'),
    Secret('login28', 'creds: admin@corp.io Pa55w0rd!', 'Pa55w0rd!'),
    Secret('key28', '{"private_key": "-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5dLkSSVYRkT9MoAoGCCqGSM49\\nAwEHoUQDQgAEm2pIelvzHi1jvsW0IwlxT6gkI7eQhZkTQUNBtEbgEJmZ1KgB6Tl8\\n-----END EC PRIVATE KEY-----\\n"}', 'AwEHoUQDQgAEm2pIelvzHi1jvsW0IwlxT6gkI7eQhZkTQUNBtEbgEJmZ1KgB6Tl8'),
]


def make_secrets(seed: int = 20261123) -> list[Secret]:
    """The corpus, built again from ``seed``: one :class:`Secret` per template of every kind."""
    rng = random.Random(seed)
    out = []
    for kind, make in _MAKERS.items():
        for text, secret in make(rng):
            assert secret in text, (kind, text)
            out.append(Secret(kind, text, secret))
    for entry in _FIXED_SECRETS:
        assert entry.secret in entry.text, entry
        out.append(Secret("hand_" + entry.kind, entry.text, entry.secret))
    return out


# --- harmless look-alikes ----------------------------------------------------------------

_BENIGN_FIXED = [
    # talk about passwords, PINs, keys and tokens without one
    "The password policy requires 12 characters and a symbol.",
    "I need to reset my password before Monday.",
    "My PIN arrives by mail in a separate letter.",
    "Remind me to change my password every 90 days.",
    "She forgot her password again and called IT.",
    "The password is required to log in.",
    "My password manager is Bitwarden.",
    "the password for the router is on the sticker",
    "The password reset link expired.",
    "Passwords must not contain your username.",
    "password: ********",
    "password = <YOUR_PASSWORD>",
    "DB_PASSWORD=${DB_PASSWORD}",
    "api_key = your_api_key_here",
    "API_KEY=<YOUR_API_KEY>",
    "OPENAI_API_KEY=sk-...",
    "token: xxxx",
    "secret: changeme",
    "Set the token to {{ secrets.GITHUB_TOKEN }} in the workflow.",
    "export AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY",
    "The token bucket algorithm limits requests per second.",
    "I went to the passport office on Tuesday.",
    "My passport expires next year, I should renew it.",
    "Secret Santa gifts must be under 20 euros.",
    "The key is in the drawer by the door.",
    "We rotate API keys every quarter.",
    "The auth token is valid for one hour.",
    "Use a Bearer token in the Authorization header.",
    "Use Basic auth only over HTTPS.",
    "The private key never leaves the hardware module.",
    "Public key infrastructure is hard to run well.",
    "My 2FA app is Authy.",
    "I wrote my recovery phrase on paper and put it in the safe.",
    "Backup codes are in the drawer, not online.",
    "The door code changes every month.",
    "Connect the LED to pin 13.",
    "the passcode was sent by SMS",
    "I password-protect my laptop.",
    "The token ring network was popular in the 90s.",
    "Bearer bonds are no longer issued in the US.",
    "Keys to the kingdom is a good book.",
    "PIN entry is disabled on this terminal.",
    "Enter your PIN at the prompt.",
    "The webhook fires on every push to main.",
    "Our Slack workspace is acme-team.",
    "The Telegram group has 400 members.",
    "I joined the Hugging Face course.",
    "We send mail through SendGrid.",
    "Twilio handles our SMS.",
    "Azure storage costs went up 10%.",
    "age is a simple file encryption tool.",
    "WireGuard is faster than OpenVPN for us.",
    "Ethereum gas fees were high yesterday.",
    "I bought a little bitcoin in 2017.",
    "My seed tray has twelve tomato seedlings.",
    "abandon ship was the last order",
    "I like apple, banana and cherry in the fruit salad.",
    "Remember milk, bread, eggs, butter, cheese, apples, rice, beans, onions, garlic, salt, pepper.",
    "the secret to a good risotto is patience",
    "His secret is practice.",
    "Sign in with Google or with your email and password.",
    "Two-factor authentication is on for every admin.",
    "The TOTP window is 30 seconds.",
    "Recovery keys for BitLocker are stored in Active Directory.",
    "Authorization: Bearer <token>",
    "Authorization: Basic <credentials>",
    "curl -H 'Authorization: Bearer $TOKEN' https://api.example.com",
    "The password is long and random.",
    "my password is stored in the team vault",
    "reset your password: it expired",
    "the password is case-sensitive",
    "The private_key field holds a path: /etc/ssl/private/server.key",
    "ssh-keygen -t ed25519 -C me@example.com",
    "ssh to git@github.com:org/repo.git",
    "the repo is https://github.com/langchain-ai/langgraph",
    "the server runs at http://localhost:8080/api",
    "see https://user@example.com/profile for details",
    "BEGIN the PUBLIC KEY exchange first",
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "I use scikit-learn and sk-learn-style pipelines.",
    "The skip-connection design uses sk-layers.",
    "We moved to GitHub Actions last year.",
    # other languages, about credentials but holding none
    "忘记密码了，怎么重置？",
    "密码必须至少包含8个字符。",
    "请不要把密码告诉任何人。",
    "पासवर्ड भूल गए? रीसेट करें।",
    "पासवर्ड में कम से कम 8 अक्षर होने चाहिए।",
    "Olvidé mi contraseña y tengo que restablecerla.",
    "La contraseña debe tener al menos 12 caracteres.",
    "J'ai oublié mon mot de passe.",
    "Le mot de passe doit contenir un chiffre.",
    "نسيت كلمة المرور الخاصة بي.",
    "يجب أن تحتوي كلمة المرور على 8 أحرف على الأقل.",
    "আমি আমার পাসওয়ার্ড ভুলে গেছি।",
    "Esqueci minha senha do banco.",
    "A senha deve ter pelo menos 8 caracteres.",
    "Я забыл пароль от почты.",
    "Пароль должен содержать не менее 8 символов.",
    "میں اپنا پاس ورڈ بھول گیا ہوں۔",
    "Ich habe mein Passwort vergessen.",
    "Das Passwort muss mindestens 12 Zeichen lang sein.",
    "パスワードを忘れました。",
    "パスワードは8文字以上にしてください。",
    "Ho dimenticato la password.",
    "La password deve essere lunga almeno 10 caratteri.",
    "Saya lupa kata sandi saya.",
    "Kata sandi harus minimal 8 karakter.",
    "Şifremi unuttum.",
    "Şifre en az 8 karakter olmalı.",
    "비밀번호를 잊어버렸어요.",
    "비밀번호는 8자 이상이어야 합니다.",
    "Mon code PIN arrive par courrier.",
    "El PIN llega por correo.",
    "Meine neue PIN kommt per Post.",
    "新的银行卡密码会通过短信发送。",
    "O código do portão mudou ontem.",
    # numbers that are not secrets
    "call me at 555-123-4567",
    "call +4915112345678 after six",
    "Our team has 12345678 users.",
    "I was born in 1990 and moved to Berlin in 2015.",
    "meetings 2024-05-01 2024-06-01 2024-07-01 2024-08-01",
    "the invoice total was 1234 5678 9012 3456 yen",
    "We use PostgreSQL 16 on port 5432.",
    "My favorite number is 42.",
    "Upgrade to version 3.12.4 before Friday.",
    "numpy 1.26.4 and pandas 2.2.1 are pinned.",
    "The hex colour is #1e90ff for links and #ff6347 for errors.",
    "Brand colours: #0A0A0A, #FAFAFA, #3366CC.",
    "Build sha256:4f2c6e1a9b7d3c5e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6 passed the scan.",
    "The image digest is sha256:9b1d0f7e3c5a2b4d6e8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d4f6a8c0e1f3.",
    "The transaction hash is 0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060.",
    "Send ETH to 0x742d35Cc6634C0532925a3b844Bc454e4438f44e.",
    "My bitcoin address is bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq.",
    "Latitude 48.8566, longitude 2.3522.",
    "It weighs 1234.5678 kg.",
    "The meeting ID is 845 2231 9087.",
    "Flight LH 1234 leaves at 07:45 from gate B22.",
    "Room 4.05 on the fourth floor.",
    "My ORCID is 0000-0002-1825-0097.",
    "ISSN 0317-8471 is the journal.",
    "Ticket JIRA-4821 is blocked.",
    "The pull request #4821 fixes it.",
    "Error code 0x80070005 means access denied.",
    "HTTP 404 and 503 are the most common errors.",
    "IP address 192.168.1.254, netmask 255.255.255.0.",
    "MAC address 00:1A:2B:3C:4D:5E.",
    "The VIN is 1HGCM82633A004352.",
    "License plate B-AB 1234.",
    "See RFC 7519 for JWTs.",
    "ULID 01ARZ3NDEKTSV4RRFFQ69G5FAV identifies the event.",
    "The base64 of hello is aGVsbG8=.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
    "The Q3 revenue was $4,821,337.",
    "My bank branch code is 20-00-00 in London.",
    "Postcode SW1A 1AA is Downing Street.",
    "the PIN of the chip is connected to ground",
    "the passcode screen shows after 5 minutes",
    "My GitHub username is octocat-1999.",
    "Twilio number +1 415 555 0100 forwards to my phone.",
    "The Discord server invite is discord.gg/python.",
    "The model is meta-llama/Llama-3.1-8B-Instruct on Hugging Face.",
    "The Slack channel is #ops-alerts.",
    "She enjoys hiking, cooking Thai food and reading sci-fi novels.",
    "Prefers dark mode in every editor.",
    "Lives in Lisbon and works remotely.",
    "The team deploys on Fridays only after review.",
    # code and docs that mention credentials without holding one
    "profile fields like key_decisions[0].decision and key_decisions[0].timestamp",
    "password_hash = bcrypt(password, rounds=12)",
    "export DATABASE_URL=postgresql://user:pass@host:5432/db",
    "return [c for _, c in sorted(conflicts, key=lambda pc: (pc[0], str(pc[1].winner.id)))]",
    "allowed[key] = standing.may(access.Action.EDIT_OWN)",
    "token_ttl = 3600  # seconds",
    "if not api_key: raise ValueError('set OPENAI_API_KEY')",
    "headers = {'Authorization': f'Bearer {token}'}",
    "the password for the router: see the sticker",
    "password reset: done",
    "Password policy: 12 characters",
    "The password expires in 2025, remember to change it.",
    # written by hand, in other words than the templates below
    'Your one-time password will expire in 10 minutes.',
    'I changed the password yesterday, it works now.',
    'Please use a password manager like KeePass.',
    'Password must include 1 uppercase letter, 1 number and 1 symbol.',
    'The API key goes in the X-API-Key header.',
    'Tokens are refreshed every 3600 seconds.',
    'Store secrets in Vault, never in git.',
    'The card was declined twice at checkout.',
    'My credit score went up to 780.',
    'Flight confirmation ABC123 for June 3.',
    "Pin the tab so you don't lose it.",
    'The PIN pad at the store was broken.',
    'Our office door code changes next week, ask Jan.',
    'Call 1-800-555-0199 for support.',
    'Order #112-4455667-1234567 arrived today.',
    'Amazon order 113-9876543-2109876 was delivered.',
    'UPS 1Z999AA10123456784 is on its way.',
    'Track FedEx 7489 2739 1234 5678.',
    'The ISBN is 978-0-306-40615-7.',
    'See commit 9fceb02d0ae598e95dc970b74767f19372d61af8 for details.',
    'Docker image python:3.11-slim@sha256:0e1c3c8d7a1f5b2e4d6c8a0b2e4f6a8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a',
    'My phone number is +1 (415) 555-2671.',
    'Serial: SN-2024-000123-XY',
    'Use the key from the blue box, not the red one.',
    'The token economy of the game is balanced.',
    'Secret ingredient: a pinch of smoked paprika.',
    'The access code for the webinar will be emailed.',
    'Enter the 6-digit code from your authenticator app.',
    'Write down your recovery phrase and keep it offline.',
    'Backup codes can be regenerated in settings.',
    'The SSN field is optional on this form.',
    'IBAN format: two letters, two digits, up to 30 characters.',
    'Mon mot de passe est trop court, je dois le changer.',
    'Mi contraseña es segura, no te preocupes.',
    'Mein Passwort ist abgelaufen.',
    'Minha senha expirou ontem.',
    'Мой пароль слишком простой.',
    '我的密码太简单了。',
    'パスワードを変更しました。',
    '비밀번호를 바꿨어요.',
    'मेरा पासवर्ड बदल गया है।',
    'كلمة المرور الخاصة بي قديمة.',
    'Şifremi değiştirdim.',
    'Kata sandi saya sudah diganti.',
    'La mia password è scaduta.',
    'Zip code 94107 and 10001 are both in the US.',
    'He scored 3-1 in the final on 2023-12-18.',
    'Temperature range 12-25 degrees.',
    'The meeting PIN is shared in the invite.',
    'Wi-Fi is free in the lobby, ask the front desk.',
    'Their account manager is called Priya.',
    'Account settings > Security > Passwords.',
    'My passport photo was rejected.',
    'I renewed my passport at the consulate.',
    'The ticket number is 4411223344556677.',
    'Reference: 5105105105105100 is the standard test number used in docs.',
    'Call me about the key results for Q3.',
    'SKU 400-12-3456 is discontinued.',
    'Part no. 123-45-6789 fits the 2019 model.',
    'Version 2.14.0-rc.1 fixes the login bug.',
    # issue 28: near misses (hashes and ids after "key", public bank codes, addresses, code, inflected words)
    'Die Passwörter müssen mindestens 12 Zeichen lang sein.',
    'Das Passwort wurde gestern zurückgesetzt.',
    'Bitte ändere dein Passwort alle 90 Tage.',
    'Lösenordet måste bytas varje månad.',
    'Passordet ditt er utløpt, lag et nytt.',
    'Adgangskoden skal have mindst 8 tegn.',
    'De wachtwoorden worden versleuteld opgeslagen.',
    'Las contraseñas deben tener al menos 10 caracteres.',
    'Les mots de passe sont stockés dans un coffre.',
    'Le password devono essere cambiate ogni 3 mesi.',
    'As senhas expiram em 30 dias.',
    'Hasła muszą mieć co najmniej 8 znaków.',
    'Zapomniałem hasła do poczty.',
    'Salasanan pitää olla vähintään 12 merkkiä pitkä.',
    'Salasanat vaihdetaan kerran vuodessa.',
    'Heslo musí mít alespoň 8 znaků.',
    'Пароли хранятся в менеджере паролей.',
    'Şifreler 90 günde bir değiştirilmeli.',
    'Şifrenizi kimseyle paylaşmayın.',
    'Kata sandinya harus diganti setiap bulan.',
    '비밀번호는 주기적으로 변경하세요.',
    '密码需要至少8个字符。',
    'पासवर्ड कम से कम 8 अक्षरों का होना चाहिए।',
    'كلمة المرور يجب أن تحتوي على 8 أحرف على الأقل.',
    'The passwords are stored with argon2id and a per-user salt.',
    'Passwords and PINs are never logged.',
    'Two passwords were found in the breach dump, both already rotated.',
    'Die PIN wird per Post geschickt.',
    'Los PINs se envían por separado.',
    'Commit 3f9c2a7e1b4d6f8a0c2e4b6d8f0a1c3e5b7d9f01 reverted the migration.',
    'The ETag header was "33a64df551425fcc55e4d42a148795d9f25f89d4".',
    'sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
    'The cache key is user:42:profile:7d793037a0760186574b0282f2f435e7.',
    'idempotency_key=6f1c2d3e4b5a69788796a5b4c3d2e1f0 was reused',
    'Stripe returned the same response because the Idempotency-Key 4f9a1c2e-7b3d-4e5f-8a9b-0c1d2e3f4a5b matched.',
    'The request id 0af7651916cd43dd8448eb211c80319c shows in the access log.',
    'trace id 4bf92f3577b34da6a3ce929d0e0e4736, span id 00f067aa0ba902b7',
    'Correlation ID: 9d8c7b6a5f4e3d2c1b0a99887766554433221100',
    'Build ID a1b2c3d4e5f60718293a4b5c6d7e8f90 passed all checks.',
    'The object key is invoices/2024/0f8e7d6c5b4a39281716f5e4d3c2b1a0.pdf',
    'Docker image digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    'git checkout 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b',
    'The md5 of the archive is d41d8cd98f00b204e9800998ecf8427e.',
    'Session cache key 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 expired.',
    'The primary key for the row is 7c9e6679-7425-40de-944b-e07fc1f90ae7.',
    'partition key: tenant-42#2024-05',
    'The token hash in the database is 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae.',
    'the hash of my password is 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8',
    'The public key is ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@host',
    'Host key fingerprint SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8.',
    'GPG key ID 3AA5C34371567BD2 signs the releases.',
    'Tag the image with a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6 before pushing.',
    'The UUID 123e4567-e89b-12d3-a456-426614174000 is in the config.',
    'Set the nonce to 8f14e45fceea167a5a36dedd4bea2543 for the test.',
    'Our license key format is five groups of five letters.',
    'Translation key checkout.button.confirm is missing in German.',
    'The React key for each item is its id, e.g. 9b2c7f1e4a3d5b6c.',
    'Call me at +1 (415) 555-0132 after 5pm.',
    'The invoice total is 12,345.67 EUR, due 2024-06-30.',
    'Flight LH 1234 departs at 07:45 from gate B42.',
    'Tracking: 1Z999AA10123456784',
    'Order #4532015112830366 was delivered.',
    'Routing number for Chase in New York is 021000021.',
    'Our sort code is 20-00-00 at Barclays Leicester.',
    'The SWIFT code of Deutsche Bank is DEUTDEFF.',
    'BSB 062-000 is Commonwealth Bank in Sydney.',
    'IFSC code SBIN0000300 belongs to the Mumbai main branch.',
    'Meeting on 12-03-24 at 10:30 in room 4.',
    'Version 4.18.2 of express fixed the bug.',
    'The part number is 12-34-56 and the lot is 2024.',
    'Population 12345678 in 2020, up from 11-22-33 survey.',
    'The ISBN 978-3-16-148410-0 is on the back cover.',
    'Coordinates 52.5200, 13.4050 mark Berlin.',
    'Contact bob@example.com / Bob Smith for access.',
    'Send the report to alice@corp.io, cc carol@corp.io.',
    'Email support@acme.com or call 555-0100.',
    'Login with your work e-mail (e.g. bob@example.com) and SSO.',
    'Reach me at jane.doe@example.org | Product Team',
    'The account bob@example.com was created on 2024-05-01.',
    'user: bob@example.com, role: Admin2',
    'From: noreply@github.com Subject: [repo] PR #1234 merged',
    'password = os.environ["DB_PASSWORD"]',
    'api_key = settings.OPENAI_API_KEY',
    'token = request.headers.get("Authorization")',
    'if password != confirm_password: raise ValueError()',
    'const secret = process.env.JWT_SECRET;',
    'The key is in the vault under secret/data/prod/db.',
    "Use key 'theme' to store the user's choice.",
    'The AWS key pair is called prod-bastion-2024.',
    'Keys: id, name, created_at, updated_at.',
    'Secret Santa draw is on December 12th.',
    'The answer key for test 3 is on page 42.',
    'Press the hot key Ctrl+Shift+P to open the palette.',
    # issue 28: a credential word, a colon, and prose; an address or a bank code beside ordinary words
    'Password: must contain a number and a symbol.',
    'Passwort: mindestens 12 Zeichen, ein Sonderzeichen.',
    'Passwörter: mindestens 12 Zeichen.',
    'Contraseña: mínimo 8 caracteres.',
    'Mot de passe : au moins 12 caractères.',
    'Senha: pelo menos 8 caracteres.',
    'Hasło: minimum 8 znaków.',
    'Lösenord: minst 12 tecken.',
    'Wachtwoord: minimaal 8 tekens.',
    'Salasana: vähintään 12 merkkiä.',
    'Пароль: не менее 8 символов.',
    'Password: see the vault entry for prod.',
    'Password: ask Maria for it.',
    'Passwords: stored in 1Password, never in the repo.',
    'Die Passwörter der Nutzer werden mit bcrypt gehasht.',
    'Passwörter und PINs gehören nicht in Tickets.',
    'Lösenorden byts automatiskt var 90:e dag.',
    'Adgangskoden udløber om 30 dage.',
    'Salasanasi vanhenee 7 päivän kuluttua.',
    'Hasłem jest zwykle data urodzenia, co jest złym pomysłem.',
    'Şifreniz en az 8 karakter olmalıdır.',
    'Email alice@example.com / Sales2 for the quote.',
    'Questions? Write to help@acme.io | Mon-Fri 9-17',
    'Logged in as bob@example.com at 09:14:22 from 10.0.0.4.',
    'login: bob@example.com (SSO via Okta)',
    'User: bob@example.com, Role: ReadOnly2',
    'Routing number 021000021 is printed on every cheque, along with the cheque number 000123.',
    'Sort code 20-00-00; call 0345 734 5345 for help.',
    'SWIFT BIC: DEUTDEFFXXX, office phone 069 910 00.',
    'The passwords are rotated and the old ones revoked.',
    'Passwords must differ from the last 5 ones used.',
    'The PINs are 4 digits long.',
    'Meeting 12-03-24 10:30, room 12345678 booked.',
    'Batch 12-34-56 shipped 12345678 units.',
    'DB_PASSWORD = os.environ["DB_PASSWORD"]',
    'export PGPASSWORD=$(cat /run/secrets/pg)',
    'DB_PASSWORD=config.get("db", "password")',
    'password=getpass.getpass()',
]


def _digits(rng: random.Random, n: int, first: str = "123456789") -> str:
    return rng.choice(first) + "".join(rng.choice(string.digits) for _ in range(n - 1))


def ean13(rng: random.Random) -> str:
    body = _digits(rng, 12)
    total = sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(body))
    return body + str((10 - total % 10) % 10)


def isbn13(rng: random.Random) -> str:
    body = "978" + "".join(rng.choice(string.digits) for _ in range(9))
    total = sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(body))
    return body + str((10 - total % 10) % 10)


_BENIGN_TEMPLATES: list[tuple[str, Callable[[random.Random], str]]] = [
    ("Your order {} has shipped.", lambda rng: _digits(rng, 16)),
    ("Order number: {}", lambda rng: _digits(rng, 16)),
    ("Invoice {} is due on the 30th.", lambda rng: _digits(rng, 16)),
    ("The barcode on the box reads {}.", ean13),
    ("EAN {}", ean13),
    ("ISBN {} is the second edition.", isbn13),
    ("Part number {} is out of stock.", lambda rng: f"{rng.randrange(100, 1000)}-{rng.randrange(10, 100)}-"
                                                    f"{rng.randrange(1000, 10000)}"),
    ("Replace filter {} every six months.", lambda rng: f"{rng.randrange(100, 1000)}-{rng.randrange(10, 100)}-"
                                                        f"{rng.randrange(1000, 10000)}"),
    ("Tracking number {} (UPS).", lambda rng: "1Z" + chars(rng, UPPER_ALNUM, 16)),
    ("The parcel {} is in Leipzig.", lambda rng: _digits(rng, 20)),
    ("Call me on +44 7{} tomorrow.", lambda rng: f"{rng.randrange(100, 1000)} {rng.randrange(100000, 1000000)}"),
    ("My number is ({}) {}-{}.", None),  # filled below
    ("We met on {}.", lambda rng: f"{rng.randrange(2000, 2027)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"),
    ("The request id was {} in the logs.", lambda rng: "-".join(chars(rng, HEX, n) for n in (8, 4, 4, 4, 12))),
    ("Commit {} fixed the flaky test.", lambda rng: chars(rng, HEX, 40)),
    ("Revert {} please.", lambda rng: chars(rng, HEX, 7)),
    ("Release v{} is out.", lambda rng: f"{rng.randrange(0, 20)}.{rng.randrange(0, 40)}.{rng.randrange(0, 60)}"),
    ("The colour {} works better on dark backgrounds.", lambda rng: "#" + chars(rng, HEX, 6)),
    ("The file checksum is md5 {}.", lambda rng: chars(rng, HEX, 32)),
    ("Customer id {} asked for a refund.", lambda rng: _digits(rng, 9)),
    ("Account {} was upgraded to the pro plan.", lambda rng: "acct_" + chars(rng, LOWER_ALNUM, 10)),
    ("The report {} is attached.", lambda rng: f"REP-{rng.randrange(2020, 2027)}-{rng.randrange(1, 100000):05d}"),
    ("Serial number {} is under warranty.", lambda rng: chars(rng, UPPER_ALNUM, 10)),
    ("The lot {} was recalled.", lambda rng: f"{rng.randrange(100, 1000)}-{rng.randrange(10, 100)}-"
                                             f"{rng.randrange(1000, 10000)}"),
]


def make_benign(seed: int = 7) -> list[str]:
    """The fixed look-alikes plus numbers, hashes and ids from templates, built again from ``seed``."""
    rng = random.Random(seed)
    out = list(_BENIGN_FIXED)
    for _ in range(8):
        for template, value in _BENIGN_TEMPLATES:
            if value is None:
                out.append(template.format(rng.randrange(200, 1000), rng.randrange(200, 1000),
                                           rng.randrange(1000, 10000)))
            else:
                out.append(template.replace("{}", value(rng)))
    return out


SECRETS: list[Secret] = make_secrets()
BENIGN: list[str] = make_benign()
