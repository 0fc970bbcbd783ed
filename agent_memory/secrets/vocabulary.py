"""The words people put next to a secret, in the languages our users write in.

A value alone rarely says it is a secret ("4821", "Sunflower!12", "123-45-6789"):
the word before it does. Each list is a regular-expression fragment, matched
case-insensitively; Latin-script words are bounded so "card" does not match
"discard", scripts without spaces (Chinese, Japanese) are not. Covered: English,
Mandarin Chinese, Hindi, Spanish, French, Arabic, Bengali, Portuguese, Russian,
Urdu, German, Japanese, Italian, Indonesian/Malay, Turkish, Korean, and the word
for "password" in a dozen more.
"""

from __future__ import annotations

__all__ = [
    "ACCOUNT_WORDS",
    "BACKUP_CODE_WORDS",
    "CARD_WORDS",
    "CODE_WORDS",
    "COPULAS",
    "CVV_WORDS",
    "ID_WORDS",
    "NOT_A_CARD_WORDS",
    "NOT_A_VALUE",
    "PASSPORT_WORDS",
    "PASSWORD_WORDS",
    "PIN_WORDS",
    "SHORT_PASSWORD_WORDS",
    "ACCESS_TOKEN_WORDS",
    "KEY_WORDS",
    "TOTP_WORDS",
    "latin",
]


def latin(*words: str) -> str:
    """An alternation of Latin-script words that must stand alone (not inside another word)."""
    return r"(?<![^\W\d_])(?:" + "|".join(words) + r")(?![^\W\d_])"


# Words that name a password and may be followed by a few words before the value
# ("password for the office wifi is ...", "contraseña del correo: ...").
PASSWORD_WORDS = "|".join([
    latin(
        r"passwords?", r"passwd", r"passcodes?", r"pass ?phrases?", r"pass ?words?",
        r"contrase[ñn]as?", r"claves?", r"mots? de passe", r"senhas?", r"palavras?[ -]passe",
        # with the endings of the definite, plural and case forms: "das Passworts", "die Passwörter",
        # "lösenordet", "passordene", "adgangskoden", "wachtwoorden", "hasła", "hasłem", "salasanat"...
        r"passw(?:ort(?:e[sn]?|s)?|[öo]rter(?:n)?)", r"kennw(?:ort(?:e[sn]?|s)?|[öo]rter(?:n)?)",
        r"parola(?: d'ordine)?", r"parolam?", r"parolă", r"parolei", r"parolele",
        r"kata ?sandi(?:nya|mu|ku)?", r"sandi(?:nya|mu|ku)?", r"kata laluan(?:nya|mu|ku)?",
        r"[şs]ifre[a-zçğıöşü]{0,7}", r"wachtwoord(?:en|je|s)?",
        r"has(?:[łl](?:o|a|em|u|ami|ach|om)|e[łl]|[śs]le)", r"l[öo]senord(?:et|en|ets|ens)?",
        r"passord(?:et|ene|a|s)?", r"adgangskode(?:n|r|rne|ns)?", r"kodeord(?:et|ene|s)?",
        r"salasan[a-zäö]{1,6}", r"jelsz(?:[óo][a-zé]{0,3}|av[a-zá]{0,5})", r"hesl(?:o|a|á|em|e|u|ům|ech|ách)",
        r"lozink(?:a|e|i|u|om|ama)", r"gesl(?:o|a|u|om)",
        r"m[ậa]t kh[ẩa]u", r"nenosiri", r"κωδικ(?:ός|ού|ό|οί|ών|ούς)",
        r"парол[ьяеюиі](?:м|ми|х|й|ей|ями|ях)?", r"код доступа",
    ),
    r"密码|密碼|口令|パスワード|パスコード|暗証番号|비밀번호|비번|암호|패스워드",
    r"पासवर्ड|पास वर्ड|कूटशब्द",
    r"كلمة المرور|كلمة السر|كلمة مرور|كلمات المرور|كلمات السر|كلمات مرور|كلمه المرور|كلمه السر|رمز المرور|رمز عبور|گذرواژه|کلمه\u200c?\s?عبور|رمز",
    r"পাসও(?:য়|য়)ার্ড|পাসওয়ার্ড",
    r"پاس\s?ورڈ|پاسورڈ",
    r"รหัสผ่าน|סיסמה|סיסמא",
])

# Short words that only mean "password" right before ':' or '=' ("pwd: x", "pass=x").
SHORT_PASSWORD_WORDS = latin(r"pwd", r"pw", r"pass", r"mdp", r"psw", r"pswd", r"pword", r"p/w", r"passwd")

# Words that name a PIN: the value is digits.
PIN_WORDS = "|".join([
    latin(r"pins?(?:[ -]?(?:codes?|numbers?|nummer[n]?|no|#))?", r"code pin", r"c[óo]digo pin", r"пин(?:-?код(?:а|ом|у)?)?",
          r"pin-код(?:а|ом|у)?", r"pinkod(?:u|um)?"),
    latin(r"geheimzahl", r"geheimnummer", r"kartenpin"),
    r"الرقم السري|رقم سري|رقم التعريف الشخصي|पिन|পিন|پن کوڈ|PIN码|PIN碼|支付密码|取款密码",
])

# Codes that open something: doors, gates, alarms, safes.
CODE_WORDS = "|".join([
    latin(
        r"(?:door|gate|alarm|entry|access|garage|lock ?box|safe|keypad|building|buzzer|intercom|locker|"
        r"padlock|lock|front door|apartment|house)[ -]?(?:code|combination|combo|pin)",
        r"combination", r"digicode",
        r"code (?:de la porte|du portail|d'entr[ée]e|de l'alarme|d'acc[èe]s|du coffre|de l'immeuble)",
        r"c[óo]digo (?:de (?:la |)(?:puerta|port[óo]n|acceso|alarma|entrada|seguran[çc]a da porta)|del port[óo]n|"
        r"do port[ãa]o|da porta|de acesso|do alarme|do cofre|da fechadura)",
        r"codice (?:del cancello|della porta|dell'allarme|di accesso|della cassaforte|del portone)",
        r"код (?:от |)(?:домофона|двери|подъезда|сейфа|замка|калитки|сигнализации)",
        r"t[üu]rcode", r"torcode", r"zugangscode", r"alarmcode", r"tresorcode", r"schlosscode",
        r"kode (?:pintu|akses|gerbang|brankas)", r"kap[ıi] (?:[şs]ifresi|kodu)", r"alarm (?:[şs]ifresi|kodu)",
    ),
    r"门禁密码|门禁码|门锁密码|保险箱密码|ドアコード|暗証コード|도어락|현관 비밀번호",
])

CVV_WORDS = latin(
    r"cvv2?", r"cvc2?", r"csc", r"security code", r"card verification (?:value|code)", r"c[óo]digo de seguridad",
    r"code de s[ée]curit[ée]", r"c[óo]digo de seguran[çc]a", r"kartenpr[üu]fnummer", r"pr[üu]fnummer",
    r"cvv-код",
) + r"|安全码|セキュリティコード|보안코드|보안 코드"

# Words that say a run of digits is a payment card.
CARD_WORDS = "|".join([
    latin(
        r"cards?", r"cc", r"ccn", r"cc#", r"credit", r"debit", r"visa", r"master ?card", r"amex",
        r"american express", r"discover", r"jcb", r"maestro", r"union ?pay", r"rupay", r"diners", r"pay(?: with)?",
        r"paid", r"payment", r"charge", r"billing", r"checkout", r"exp", r"expiry", r"expires", r"valid thru",
        r"cvv", r"cvc", r"tarjeta", r"carte", r"cb", r"karte", r"kreditkarte", r"kartennummer", r"cart[ãa]o",
        r"carta", r"kartu", r"kart", r"kart[ıi]", r"карт[аыуе]", r"картой", r"kredi",
    ),
    r"卡号|卡號|银行卡|信用卡|借记卡|カード|카드|कार्ड|بطاقة|কার্ড|کارڈ",
])

# Words that say a run of digits is anything but a card (or an id).
NOT_A_CARD_WORDS = latin(
    r"orders?", r"invoices?", r"tracking", r"parcel", r"package", r"shipment", r"barcode", r"ean(?:-?13)?",
    r"upc", r"isbn", r"issn", r"gtin", r"sku", r"ref", r"reference", r"phone", r"tel", r"call", r"fax",
    r"mobile", r"customer", r"transaction", r"serial", r"imei", r"meeting", r"ticket", r"receipt",
    r"confirmation", r"part", r"lot", r"batch", r"model", r"item", r"article", r"product", r"pedido", r"commande",
    r"bestellung", r"заказ", r"订单", r"注文",
)

# Words that say a number is a national identifier.
ID_WORDS = "|".join([
    latin(
        r"ssn#?", r"ssns", r"social security(?: number| no\.?| #)?", r"soc\.? sec\.?", r"social insurance(?: number)?",
        r"tax id", r"itin", r"national id(?:entity)?(?: number| no\.?| card)?",
        r"id (?:number|no\.?|#)", r"identity (?:number|card)", r"identification number",
        r"sozialversicherungs(?:nummer)?", r"steuer-?id", r"steuernummer", r"personalausweis(?:nummer)?",
        r"n[úu]mero de seguro social", r"seguro social", r"s[ée]curit[ée] sociale", r"num[ée]ro de s[ée]cu",
        r"dni", r"nie", r"nif", r"cpf", r"curp", r"rfc", r"cnic", r"nss", r"nir", r"nic", r"nid", r"nik", r"sin", r"tin",
        r"ein", r"rg",
        r"t\.?c\.? kimlik(?: no)?", r"kimlik(?: numaras[ıi]| no)?", r"инн", r"снилс", r"codice fiscale", r"pesel",
        r"bsn", r"personnummer", r"aadhaar", r"aadhar", r"uidai", r"pan(?: card| number)?",
        r"national insurance(?: number| no\.?)?", r"ni(?: number| no\.?)", r"nino",
    ),
    r"身份证|身份證|居民身份|证件号|マイナンバー|個人番号|주민등록번호|주민번호|आधार|पैन|رقم الهوية|الهوية الوطنية|"
    r"জাতীয় পরিচয়|এনআইডি|شناختی کارڈ|شناختی|قومی شناختی",
])

PASSPORT_WORDS = latin(
    r"passport(?: number| no\.?| #)?", r"passeport", r"pasaporte", r"passaporte", r"reisepass(?:nummer)?",
    r"passaporto", r"paspor", r"pasaport", r"паспорт(?:а)?",
) + r"|护照|護照|パスポート|여권|पासपोर्ट|جواز السفر|جواز|পাসপোর্ট|پاسپورٹ"

ACCOUNT_WORDS = "|".join([
    latin(
        r"account (?:number|no\.?|#)", r"acct\.? ?(?:number|no\.?|#)", r"a/c(?: no\.?)?", r"bank account",
        r"kontonummer", r"konto", r"n[úu]mero de cuenta",
        r"cuenta(?: bancaria)?", r"num[ée]ro de compte", r"compte bancaire", r"n[úu]mero da conta", r"conta",
        r"номер сч[её]та", r"сч[её]т", r"rekening", r"nomor rekening", r"hesap (?:numaras[ıi]|no)",
        r"conto corrente", r"numero di conto",
    ),
    r"账号|账户|帳號|銀行帳戶|口座番号|계좌번호|계좌|खाता संख्या|खाता नंबर|رقم الحساب|হিসাব নম্বর|অ্যাকাউন্ট নম্বর|اکاؤنٹ نمبر",
])

BACKUP_CODE_WORDS = "|".join([
    latin(
        r"(?:2fa|mfa|two[- ]factor|2-step|backup|recovery|scratch|emergency|one[- ]time|single[- ]use)"
        r"(?: backup| recovery)? codes?", r"recovery keys?", r"rescue keys?",
        r"c[óo]digos? de (?:respaldo|recuperaci[óo]n|seguran[çc]a|backup|recupera[çc][ãa]o)",
        r"codes? de (?:secours|r[ée]cup[ée]ration|sauvegarde)", r"backup-codes?", r"wiederherstellungscodes?",
        r"sicherungscodes?", r"коды? восстановления", r"резервные коды", r"kode (?:cadangan|pemulihan)",
        r"yedek kodlar[ıi]?", r"kurtarma kodlar[ıi]?", r"codici di (?:backup|recupero)",
    ),
    r"备用码|恢复码|备份码|救援码|バックアップコード|リカバリーコード|복구 코드|백업 코드|बैकअप कोड|رموز الاسترداد|রিকভারি কোড",
])

TOTP_WORDS = latin(
    r"totp(?: secret| seed| key)?", r"otp (?:secret|seed|key)", r"(?:2fa|mfa|two[- ]factor) (?:secret|seed|setup key|key)",
    r"setup key", r"authenticator (?:secret|key|seed|setup key|code)", r"google authenticator",
    r"secret key for (?:2fa|mfa|the authenticator)",
)

# Words that name a token, and words that name a key or a secret: the value must look random.
ACCESS_TOKEN_WORDS = "|".join([
    latin(
        r"(?:api|access|auth|refresh|session|bearer|bot|id|oauth|personal access|pat|github|slack|discord|telegram)?"
        r"[ _-]?tokens?", r"token(?:[ıi]|nya)", r"токен(?:а|ы|ом|ов|у)?",
    ),
    r"令牌|トークン|토큰|टोकन|توكن|رمز الوصول|টোকেন|ٹوکن",
])
KEY_WORDS = "|".join([
    latin(
        r"api[ _-]?keys?", r"apikey", r"api[ _-]?secret", r"x-api-key", r"secret[ _-]?keys?",
        r"secrets?", r"client[ _-]?secret", r"access[ _-]?keys?(?:[ _-]?id)?", r"auth[ _-]?keys?",
        r"session[ _-]?(?:secret|key)", r"private[ _-]?keys?", r"priv[ _-]?key", r"signing[ _-]?(?:secret|key)",
        r"webhook[ _-]?secret", r"keys?", r"sid", r"credentials?", r"creds", r"license[ _-]?key", r"product[ _-]?key",
        r"app[ _-]?secret", r"consumer[ _-]?secret", r"master[ _-]?key", r"encryption[ _-]?key",
        r"cl[ée]s?", r"cl[ée] (?:api|secr[èe]te|priv[ée]e)", r"claves? (?:api|secretas?|privadas?)",
        r"chaves?(?: (?:api|secretas?|privadas?))?", r"schl[üu]ssel[sn]?", r"api-schl[üu]ssel[sn]?", r"chiav[ei]",
        r"kunci(?:nya)?", r"anahtar(?:[ıi]|ım|ımız|lar[ıi]?)?", r"llaves?",
        r"ключ(?:а|и|ом|ей|у)?",
    ),
    r"密钥|秘钥|私钥|密鑰|私鑰|キー|秘密鍵|シークレット|키|कुंजी|مفتاح|কী|کلید",
])


# Linking words between a credential word and its value ("password IS x", "mot de passe EST x").
COPULAS = frozenset(
    "is was are were ist lautet war est es era sont c'est adalah ialah yaitu yakni ni = - -> => : is: was:".split()
)

# Words that follow "password is" in sentences about passwords rather than in a stated password.
NOT_A_VALUE = frozenset(
    """a an the my your our their his her its this that these those it in on at of for to by with from not no
    set reset required needed incorrect correct wrong invalid expired expiring changed saved stored managed
    kept hidden secret same different empty missing blank too very weak strong long short new old
    unknown forgotten locked protected encrypted hashed case-sensitive sent shared here there what which
    where when who how why below above following attached enclosed and or but if so as be been being
    written printed taped posted listed shown given provided valid random generated unique simple easy hard
    complex good bad fine okay ok same again now still just also only always never compromised stolen
    broken outdated obsolete temporary complicated predictable guessable insecure secure safe unsafe great
    terrible awful annoying useless fine important private personal mine yours ours theirs btw lol thanks
    thx please pls though anyway haha
    none null nil undefined true false yes raise return await yield throw lambda self""".split()
)


# --- stems: literal pieces, one of which every match of the word list contains ---------------
# The scanner finds these first (all lists in one pass), then matches the list only around them.

PASSWORD_STEMS = (
    "pass", "contrase", "clave", "senha", "palavra", "kennw", "parol", "sandi", "laluan", "şifre", "sifre",
    "wachtwoord", "hasł", "hasl", "hase", "haśl", "senord", "adgangskode", "kodeord", "salasan", "jelsz", "hesl",
    "lozink", "gesl", "khẩu", "khau",
    "nenosiri", "κωδικ", "парол", "код доступа", "密码", "密碼", "口令", "パスワード", "パスコード", "暗証番号", "비밀번호",
    "비번", "암호", "패스워드", "पासवर्ड", "पास वर्ड", "कूटशब्द", "كلمة", "كلمات", "كلمه", "کلمه", "رمز", "گذرواژه", "পাসও", "پاس",
    "รหัสผ่าน", "סיסמ",
)
SHORT_PASSWORD_STEMS = ("pwd", "pw", "pass", "mdp", "psw", "pword", "p/w")
PIN_STEMS = ("pin", "пин", "سري", "التعريف", "पिन", "পিন", "پن", "码", "碼", "geheim")
CODE_STEMS = (
    "code", "combination", "combo", "código", "codigo", "codice", "код", "kode", "kapı", "kapi", "alarm",
    "门禁", "门锁", "保险箱", "ドアコード", "暗証コード", "도어락", "현관",
)
CVV_STEMS = ("cvv", "cvc", "csc", "security code", "verification", "seguridad", "sécurité", "securite",
             "segurança", "seguranca", "prüfnummer", "prufnummer", "安全码", "セキュリティコード", "보안")
ID_STEMS = (
    "ssn", "social", "soc", "sin", "tax id", "tin", "ein", "national", "id ", "id#", "identi", "sozialversicherung",
    "steuer", "personalausweis", "seguro", "sécu", "secu", "nss", "nir", "dni", "nie", "nif", "cpf", "rg", "curp",
    "rfc", "nic", "nid", "nik", "kimlik", "инн", "снилс", "codice fiscale", "pesel", "bsn", "personnummer", "aadha",
    "uidai", "pan", "insurance", "ni ", "ni:", "nino", "身份", "居民", "证件", "マイナンバー", "個人番号", "주민", "आधार",
    "पैन", "الهوية", "পরিচয়", "এনআইডি", "شناختی",
)
PASSPORT_STEMS = ("passport", "passeport", "pasaporte", "passaporte", "reisepass", "passaporto", "paspor",
                  "pasaport", "паспорт", "护照", "護照", "パスポート", "여권", "पासपोर्ट", "جواز", "পাসপোর্ট", "پاسپورٹ")
ACCOUNT_STEMS = (
    "account", "acct", "a/c", "bank", "konto", "cuenta", "compte", "conta", "счёт",
    "счет", "rekening", "hesap", "conto", "账", "帳", "口座", "계좌", "खाता", "الحساب", "হিসাব", "অ্যাকাউন্ট", "اکاؤنٹ",
)
BACKUP_CODE_STEMS = (
    "code", "códig", "codig", "backup", "recovery", "wiederherstellung", "sicherung", "код", "kode", "kodlar",
    "codici", "备用", "恢复", "备份", "救援", "バックアップ", "リカバリー", "복구", "백업", "बैकअप", "الاسترداد", "রিকভারি",
)
TOTP_STEMS = ("totp", "otp", "2fa", "mfa", "two", "setup key", "authenticator")
ACCESS_TOKEN_STEMS = ("token", "токен", "令牌", "トークン", "토큰", "टोकन", "توكن", "رمز الوصول", "টোকেন", "ٹوکن")
KEY_STEMS = (
    "api", "secret", "access", "auth", "session", "private", "priv", "signing", "webhook", "key", "sid", "credential",
    "creds", "license", "product", "consumer", "master", "encryption", "clé", "cle", "clave", "llave", "chave",
    "schlüssel", "schlussel", "chiave", "kunci", "anahtar", "ключ", "密钥", "秘钥", "私钥", "密鑰", "私鑰", "キー",
    "秘密鍵", "シークレット", "키", "कुंजी", "مفتاح", "কী", "کلید",
)
WIFI_STEMS = ("wi-fi", "wifi", "wlan", "ssid", "hotspot", "wireless", "network")
PAIR_STEMS = ("login", "cred", "user", "account", "superuser", "admin", "root")

# Short id words that are ordinary words in lower case ("sin" in Spanish, "ein" in German, "pan"):
# they count only as written in capitals.
UPPER_ONLY = frozenset("sin tin ein rg nic nid nik nss nir nie nif pan bsn ni dni cpf".split())
