#!/usr/bin/env python3
"""Deterministic test strings for tokenizer checks.

generate(n, seed) returns n strings: a fixed list of hand-picked edge cases first, then random
strings drawn from categories that stress the parts of a byte-level BPE tokenizer that are easy
to get wrong: the pre-tokenizer regex (\\s, \\p{L}, \\p{N}, (?i:...) contractions, the
lookahead), NFC normalization, added/special token matching, multi-byte UTF-8 and merges.
Strings are valid Unicode scalar sequences (never lone surrogates), so they are valid UTF-8.

CLI: corpus.py [--n 10000] [--seed 1] [--out FILE] writes JSON lines, one JSON string a line,
ASCII only (ensure_ascii), to FILE or stdout.
"""

import argparse
import json
import random
import sys
import unicodedata

# Special and added tokens of the families under test (Qwen2/Qwen3 and Llama 3), plus partial
# and near-miss spellings that must not match.
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|reserved_special_token_0|>", "<|reserved_special_token_3|>",
]
PARTIAL_TOKENS = [
    "<|im_", "<|im_end", "|im_end|>", "<|im_end|", "<|eot_", "<|eot_id", "<|begin_of_text",
    "<think", "think>", "</think", "<|", "|>", "<||>", "<|IM_END|>", "<|im end|>",
    "<|endoftext||>", "<<|im_end|>>", "<|<|eot_id|>|>", "< think>", "<Think>",
]

# Everything Unicode calls White_Space, plus look-alikes that are not (ZWSP, BOM, U+180E, WJ).
WHITESPACE = [
    " ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2001",
    "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a",
    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
]
NOT_WHITESPACE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u180e", "\u00ad"]

WORDS = (
    "the of and to in is you that it he was for on are as with his they at be this have from "
    "or one had by word but not what all were we when your can said there use an each which she "
    "do how their if will up other about out many then them these so some her would make like "
    "him into time has look two more write go see number no way could people my than first water "
    "been call who oil its now find long down day did get come made may part over new sound take "
    "only little work know place year live me back give most very after thing our just name good "
    "sentence man think say great where help through much before line right too mean old any same "
    "tell boy follow came want show also around form three small set put end does another well "
    "large must big even such because turn here why ask went men read need land different home us "
    "move try kind hand picture again change off play spell air away animal house point page "
    "letter mother answer found study still learn should America world tokenizer kernel tensor "
    "Internationalization antidisestablishmentarianism"
).split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
CONTRACTION_WORDS = ["I", "you", "we", "they", "it", "don", "can", "she", "He", "that", "O"]
ACCENTED = [
    "café", "naïve", "résumé", "façade", "jalapeño", "Straße", "über", "Ærø", "smørrebrød",
    "crème brûlée", "São Paulo", "Zürich", "Kraków", "Ångström", "Dvořák", "İstanbul", "ǅemal",
    "Œuvre", "ﬁnancial", "ﬀ", "Ǆ", "ẞ", "Ⅻ", "㎏", "①②③", "½", "x²", "H₂O", "ℌ", "Å", "Ω",
]
CYRILLIC = ["привет", "мир", "Москва", "ёлка", "ЁЖ", "Україна", "щі", "съешь"]
GREEK = ["αβγ", "Ελληνικά", "λόγος", "ΣΊΣΥΦΟΣ", "ς", "ΐ"]
CJK = [
    "中文", "你好世界", "汉字测试", "我们", "人工智能", "模型", "的一是不了人我在有他这",
    "日本語", "こんにちは", "カタカナ", "ひらがな", "東京都", "ｶﾀｶﾅ", "ＡＢＣ１２３", "。、「」",
    "，！？：；", "〜", "〇", "𠀀", "𠮷野家", "𪚥", "𫝀", "丨丶丿",
]
HANGUL = ["안녕하세요", "한국어", "서울", "ㄱㄴㄷ", "각", "\u1100\u1161\u11a8"]
ARABIC = ["مرحبا", "العربية", "سلام", "٠١٢٣٤٥٦٧٨٩", "ﷺ", "لا", "\u0628\u0650\u0633\u0652\u0645"]
HEBREW = ["שלום", "עברית", "\u05e9\u05c1\u05b8"]
DEVANAGARI = ["नमस्ते", "हिन्दी", "क्षत्रिय", "०१२३", "श्री", "\u0915\u093f"]
THAI = ["สวัสดี", "ภาษาไทย", "๑๒๓", "กรุงเทพมหานคร", "\u0e01\u0e33"]
OTHER_SCRIPTS = ["ქართული", "Հայերեն", "አማርኛ", "ᏣᎳᎩ", "ᚠᛇᚻ", "ꦗꦮ", "𐌰𐌱𐌲", "𝔘𝔫𝔦", "𝟙𝟚𝟛", "ߊߌ"]
EMOJI = [
    "😀", "😂", "🥲", "🤖", "🚀", "❤️", "❤", "☃", "⭐", "✨", "🔥", "👍", "🎉", "🧠", "🦀", "🐍",
    "👨\u200d👩\u200d👧\u200d👦", "👩\u200d💻", "🏳️\u200d🌈", "🧑🏽\u200d🚀", "👍🏻", "👍🏿",
    "👋🏽", "🇺🇸", "🇯🇵", "🇩🇪", "🇺", "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "1️⃣", "#️⃣", "*️⃣", "9\u20e3", "©️", "™", "🀄", "🃏", "🂡", "🪐", "🫠", "🫶🏼", "🟰", "🆗",
]
COMBINING = ["\u0301", "\u0300", "\u0308", "\u0302", "\u0303", "\u030a", "\u0327", "\u0323",
             "\u0331", "\u035c", "\u0361", "\u20dd", "\u0489", "\u05b7", "\u093c", "\u3099"]
# Strings whose NFC and NFD forms differ (both forms are emitted).
NFC_NFD_WORDS = ["café", "Ångström", "Å", "ñandú", "Ḝ", "ệ", "Ǖ", "가각", "ã̀", "ḱṓ", "が", "パ",
                 "ﬁ", "Ω", "é", "ÉCOLE", "naïve", "ṩ", "ǘ"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + [
    "…", "—", "–", "«", "»", "‘", "’", "“", "”", "•", "§", "¶", "†", "‽", "¿", "¡", "€", "£", "¥",
    "→", "⇒", "∀", "∑", "√", "∞", "≠", "≤", "±", "×", "÷", "°", "·", "‰", "′", "″",
]
CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "if __name__ == \"__main__\":\n    main()\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "const x = {a: 1, b: [2, 3]};  // comment\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    "<div class=\"box\"><p>Hello</p></div>\n",
    "    \n\n        x = y  \n",
    "fn main() -> Result<(), Box<dyn Error>> {\n    Ok(())\n}\n",
    "$ ls -la | grep '^d' && echo \"done\" >> log.txt\r\n",
    "a=b&&c||d!=e<=f>>g<<h::i->j",
    "{\"key\": \"value\", \"n\": -1.5e-10, \"ok\": true, \"x\": null}",
    "x+=1;y-=2;z*=3;w/=4;",
    "\t\tif (a) {\n\t\t\treturn;\n\t\t}\n",
    "https://example.com/path?q=1&r=two#frag",
    "user@example.org, 192.168.0.1:8080, ::1, 0xDEADBEEF, 1e9, 3.14159",
]
CONTROL = [chr(c) for c in list(range(0, 9)) + list(range(14, 32)) + [127]] + \
    [chr(c) for c in range(0x80, 0xa0) if c != 0x85]
OTHER_INVISIBLE = ["\u200e", "\u200f", "\u202a", "\u202e", "\u2066", "\u2069", "\u034f",
                   "\ufe0f", "\ufe0e", "\U000e0001", "\U000e0020", "\u061c"]
PRIVATE_USE = ["\ue000", "\uf8ff", "\ue123", "\U000f0000", "\U000ffffd", "\U00100000",
               "\U0010fffd"]
NONCHARACTERS = ["\ufffe", "\uffff", "\ufdd0", "\U0001fffe", "\U0010ffff", "\ufffd"]


def _cp(rng, lo, hi):
    """A random code point in [lo, hi], never a surrogate."""
    c = rng.randint(lo, hi)
    if 0xD800 <= c <= 0xDFFF:
        c = 0xE000 + (c - 0xD800)
    return chr(c)


def _pick(rng, seq, k_lo=1, k_hi=3):
    return [rng.choice(seq) for _ in range(rng.randint(k_lo, k_hi))]


def _word(rng):
    w = rng.choice(WORDS)
    r = rng.random()
    if r < 0.15:
        w = w.capitalize()
    elif r < 0.2:
        w = w.upper()
    return w


def _sentence(rng, k_lo=3, k_hi=14):
    words = [_word(rng) for _ in range(rng.randint(k_lo, k_hi))]
    s = " ".join(words)
    return s[0].upper() + s[1:] + rng.choice([".", "!", "?", ",", ":", "", "...", ";"])


def g_whitespace(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.5:
            parts.append(rng.choice(WHITESPACE) * rng.randint(1, 12))
        else:
            parts.append("".join(_pick(rng, WHITESPACE + NOT_WHITESPACE[:2], 1, 5)))
        if rng.random() < 0.5:
            parts.append(rng.choice([_word(rng), rng.choice(PUNCT), str(rng.randint(0, 999)),
                                     rng.choice(CJK), rng.choice(EMOJI)]))
    return "".join(parts)


def g_leading_trailing(rng):
    ws = lambda: "".join(_pick(rng, WHITESPACE, 1, 6))
    core = rng.choice([_sentence(rng), _word(rng), rng.choice(CJK), str(rng.randint(0, 10**6)),
                       rng.choice(PUNCT) * 2, rng.choice(SPECIAL_TOKENS)])
    mode = rng.randrange(3)
    return (ws() if mode != 1 else "") + core + (ws() if mode != 0 else "")


def g_digits(rng):
    r = rng.random()
    if r < 0.3:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40)))
    if r < 0.5:
        return rng.choice(["", "-", "+", "$", "€"]) + f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 6)}f}"
    if r < 0.6:
        return rng.choice(["٣٤٥", "०१२", "１２３", "¹²³", "½¾", "Ⅻ", "⑦", "𝟘𝟙", "๑๒"]) + \
            str(rng.randint(0, 99999))
    parts = []
    for _ in range(rng.randint(1, 8)):
        parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        parts.append(rng.choice([" ", ",", ".", ":", "-", "/", "", "  ", "x", "e", "\n"]))
    return "".join(parts)


def g_alnum(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.3:
            parts.append(_word(rng) + str(rng.randint(0, 9999)))
        elif r < 0.6:
            parts.append(str(rng.randint(0, 9999)) + _word(rng))
        elif r < 0.8:
            parts.append("".join(rng.choice("abcXYZ0123456789_") for _ in range(rng.randint(2, 16))))
        else:
            parts.append(rng.choice(["v1.2.3", "x86_64", "utf-8", "3D", "H2O", "4K", "mp3",
                                     "2nd", "COVID-19", "i18n", "A1B2C3", "0x1F600"]))
        parts.append(rng.choice([" ", "", "-", "_", ".", "\n"]))
    return "".join(parts)


def g_contractions(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        w = rng.choice(CONTRACTION_WORDS + [_word(rng)])
        c = rng.choice(CONTRACTIONS + ["'S", "'T", "'RE", "'Ve", "'lL", "'D", "'M", "'LL",
                                       "'x", "'", "''", "'\u017f", "'\u212a", "\u2019s", "'ſt"])
        r = rng.random()
        if r < 0.3:
            w, c = w.upper(), c.upper()
        elif r < 0.5:
            c = "".join(ch.upper() if rng.random() < 0.5 else ch for ch in c)
        parts.append((w if rng.random() < 0.85 else "") + c)
        parts.append(rng.choice([" ", " ", "", "\n", ". ", " '", "s"]))
    return "".join(parts)


def g_punct(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append("".join(_pick(rng, PUNCT, 1, 10)))
        parts.append(rng.choice(["", " ", "\n", "\r\n", _word(rng), "  ", "\n\n"]))
    return "".join(parts)


def g_english(rng):
    return " ".join(_sentence(rng) for _ in range(rng.randint(1, 4))) + \
        rng.choice(["", "\n", "\n\n", " "])


def g_code(rng):
    return "".join(_pick(rng, CODE, 1, 3))


def g_scripts(rng):
    pools = [CJK, HANGUL, ARABIC, HEBREW, DEVANAGARI, THAI, CYRILLIC, GREEK, OTHER_SCRIPTS,
             ACCENTED]
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(rng.choice(pools)))
        parts.append(rng.choice(["", " ", "，", "。", " ", "\n", "、", "1", _word(rng)]))
    return "".join(parts)


def g_emoji(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.6:
            parts.append(rng.choice(EMOJI))
        elif r < 0.75:  # a random regional-indicator pair, possibly not a real flag
            parts.append(_cp(rng, 0x1F1E6, 0x1F1FF) + _cp(rng, 0x1F1E6, 0x1F1FF))
        elif r < 0.9:  # ad-hoc ZWJ sequence with optional skin tone
            seq = [_cp(rng, 0x1F466, 0x1F469)]
            for _ in range(rng.randint(1, 3)):
                if rng.random() < 0.5:
                    seq.append(_cp(rng, 0x1F3FB, 0x1F3FF))
                seq.append("\u200d" + rng.choice(["💻", "🔬", "🚀", "❤️", "👦", "🦰"]))
            parts.append("".join(seq))
        else:
            parts.append(rng.choice("0123456789#*") + rng.choice(["\ufe0f\u20e3", "\u20e3"]))
        parts.append(rng.choice(["", "", " ", _word(rng), "\n", "!"]))
    return "".join(parts)


def g_combining(rng):
    parts = []
    if rng.random() < 0.3:  # marks at the very start, with nothing to attach to
        parts.append("".join(_pick(rng, COMBINING, 1, 3)))
    for _ in range(rng.randint(1, 5)):
        base = rng.choice(["e", "a", "o", "A", "n", "u", "i", "x", " ", "1", "ㄱ", "ا", "क", "字",
                           "🙂", "\n", "<|im_end|>", "'"])
        parts.append(base + "".join(_pick(rng, COMBINING, 0, 4)))
        if rng.random() < 0.2:  # Zalgo-style stack
            parts.append("".join(_pick(rng, COMBINING, 8, 30)))
        parts.append(rng.choice(["", " ", _word(rng)]))
    return "".join(parts)


def g_nfc_nfd(rng):
    w = rng.choice(NFC_NFD_WORDS)
    forms = [unicodedata.normalize(f, w) for f in ("NFC", "NFD", "NFKC", "NFKD")]
    return rng.choice([" ", "", "\n", "/"]).join(_pick(rng, forms, 1, 4))


def g_special(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.5:
            parts.append(rng.choice(SPECIAL_TOKENS))
        elif r < 0.75:
            parts.append(rng.choice(PARTIAL_TOKENS))
        else:
            parts.append(rng.choice(["<|im_start|>user\n", "<|im_end|>\n", "<|start_header_id|>",
                                     "assistant<|end_header_id|>\n\n", "<think>\n\n</think>\n\n"]))
        # Text glued to the token, including combining marks that would compose with text
        # before it if the token were normalized together with its neighbours.
        parts.append(rng.choice(["", "", " ", "\n", _word(rng), " " + _word(rng), "\u0301",
                                 "e", "  ", "\u00a0", rng.choice(CJK), rng.choice(EMOJI), "'s"]))
    return "".join(parts)


def g_invisible(rng):
    pool = NOT_WHITESPACE + OTHER_INVISIBLE + CONTROL + PRIVATE_USE + NONCHARACTERS
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append("".join(_pick(rng, pool, 1, 4)))
        parts.append(rng.choice(["", " ", _word(rng), "1", "\n", "字"]))
    return "".join(parts)


def g_rare_planes(rng):
    ranges = [(0x1F000, 0x1FAFF), (0x1F000, 0x1F0FF), (0x20000, 0x2A6DF), (0x2A700, 0x2EBEF),
              (0x30000, 0x3134F), (0x10000, 0x1FFFF), (0xE0000, 0xE01EF), (0x1D400, 0x1D7FF),
              (0x10000, 0x10FFFF)]
    parts = []
    for _ in range(rng.randint(1, 8)):
        lo, hi = rng.choice(ranges)
        parts.append(_cp(rng, lo, hi))
        if rng.random() < 0.3:
            parts.append(rng.choice([" ", "a", "1", "\n"]))
    return "".join(parts)


def g_random_codepoints(rng):
    """Code points from the whole range, weighted towards the BMP."""
    out = []
    for _ in range(rng.randint(1, 24)):
        r = rng.random()
        if r < 0.3:
            out.append(_cp(rng, 0x20, 0x7E))
        elif r < 0.5:
            out.append(_cp(rng, 0x80, 0x7FF))
        elif r < 0.85:
            out.append(_cp(rng, 0x800, 0xFFFF))
        else:
            out.append(_cp(rng, 0x10000, 0x10FFFF))
    return "".join(out)


def g_long(rng):
    """A few KB of mixed content."""
    target = rng.randint(2000, 6000)
    parts, size = [], 0
    while size < target:
        s = rng.choice([g_english, g_code, g_scripts, g_emoji, g_whitespace, g_digits,
                        g_special, g_combining])(rng)
        parts.append(s)
        size += len(s.encode("utf-8"))
    if rng.random() < 0.3:  # one very long run of a single kind
        parts.append(rng.choice([" ", "a", "1", "字", "\n", "!", "😀", "é"]) * rng.randint(500, 3000))
    return "".join(parts)


def g_mix(rng):
    return "".join(rng.choice(GENERATORS_SHORT)(rng) for _ in range(rng.randint(2, 5)))


GENERATORS_SHORT = [g_whitespace, g_leading_trailing, g_digits, g_alnum, g_contractions, g_punct,
                    g_english, g_code, g_scripts, g_emoji, g_combining, g_nfc_nfd, g_special,
                    g_invisible, g_rare_planes, g_random_codepoints]
# (generator, weight)
CATEGORIES = [(g, 6) for g in GENERATORS_SHORT] + [(g_mix, 20), (g_long, 1)]

FIXED = [
    "", " ", "  ", "\n", "\r\n", "\r", "\t", "\n\n\n", " \n ", "a", "A", "0", "00", "0000",
    "1234567", "'s", "'S", "I'm", "I'M", "we'LL", "don't", "DON'T", "they're", "'", "''",
    "hello world", " hello", "hello ", "  hello  world  ", "Hello,\nworld!\r\n",
    "e\u0301", "\u0301", "\u0301e", "\u00e9", "e\u0301\u0301", "a\u0308\u0304",
    "中文", "한국어", "مرحبا", "नमस्ते", "สวัสดี", "😀", "👨\u200d👩\u200d👧\u200d👦", "👍🏽",
    "🇺🇸", "1️⃣", "\ufeff", "\ufeffhello", "\u200b", "\x00", "\x00a\x00", "\x7f", "\ue000",
    "\U0001f000", "\U00020000", "\U0010ffff", "\u00a0", "\u3000", "a\u00a0b", "a\u3000b",
    "<|im_end|>", "<|im_start|>user\nhi<|im_end|>\n", "<|im_", "<think>", "<think>\n</think>",
    "<|eot_id|>", "<|begin_of_text|>hello", "<|endoftext|><|endoftext|>", "x<|im_end|>y",
    "e<|im_end|>\u0301", "   <|im_end|>   ", "\u00a0<|eot_id|>\u00a0",
    "    def f():\n        return 1\n", "a" * 300, " " * 300, "1" * 100, "😀" * 50,
]


def generate(n=10000, seed=1):
    """n deterministic test strings: the fixed edge cases, then random ones."""
    rng = random.Random(seed)
    gens, weights = zip(*CATEGORIES)
    out = list(FIXED[:n])
    while len(out) < n:
        out.append(rng.choices(gens, weights)[0](rng))
    for s in out:
        # Guard against a generator bug: every string must be valid UTF-8.
        s.encode("utf-8")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="output file (default: stdout)")
    args = ap.parse_args()
    lines = "".join(json.dumps(s, ensure_ascii=True) + "\n" for s in generate(args.n, args.seed))
    if args.out:
        with open(args.out, "w", encoding="ascii", newline="\n") as f:
            f.write(lines)
    else:
        sys.stdout.write(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
